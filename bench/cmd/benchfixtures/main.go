// Command benchfixtures writes the AdmissionReviews that the benchmarks
// share: testdata/bench/<object>-<case>.json, for the objects pod-small,
// pod-large and deployment and the cases create-inject, create-present and
// update-unchanged (see testdata/bench/README.md).
//
// The output is deterministic (fixed names, uids and times), so the
// committed files can be checked against it. Run it from the bench
// module (the default -out is the repository's testdata/bench from there):
//
//	cd bench && go run ./cmd/benchfixtures
//
// It uses the standard library and the user.info rules of policy/userinfo.
package main

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/yunikorn-userinfo/userinfo/policy/userinfo"
)

// Submitter is the user every fixture is sent by, and userInfoValue what
// the policy writes for them (docs/BEHAVIOUR.md §2):
// {"user":"alice","groups":["dev","system:authenticated"]}.
const (
	submitter   = "alice"
	userInfoKey = userinfo.AnnotationKey
)

var (
	submitterGroups = []string{"dev", "system:authenticated"}
	userInfoValue   = userinfo.Identity{User: submitter, Groups: submitterGroups}.Value()
)

// The cases: how the object relates to the annotation.
const (
	// caseInject: CREATE without the annotation; the policy adds it.
	caseInject = "create-inject"
	// casePresent: CREATE with exactly the value the policy would write for
	// the submitter; allowed unchanged.
	casePresent = "create-present"
	// caseUnchanged: UPDATE whose object and oldObject are identical,
	// annotation included; allowed unchanged.
	caseUnchanged = "update-unchanged"
)

// Cases lists the cases in file-name order of appearance.
var cases = []string{caseInject, casePresent, caseUnchanged}

// fixture is one generated file.
type fixture struct {
	name string // file name, <object>-<case>.json
	data []byte
}

func main() {
	out := flag.String("out", filepath.Join("..", "testdata", "bench"), "directory the fixtures are written to")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "benchfixtures:", err)
		os.Exit(1)
	}
}

// write generates every fixture into dir.
func write(dir string) error {
	all, err := generate()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	for _, f := range all {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return fmt.Errorf("write fixture: %w", err)
		}
		fmt.Printf("%s\t%d bytes\n", path, len(f.data))
	}
	return nil
}

// kindInfo is what a review says about the kind of its object.
type kindInfo struct {
	group, version, kind, resource string
}

var (
	podKind        = kindInfo{"", "v1", "Pod", "pods"}
	deploymentKind = kindInfo{"apps", "v1", "Deployment", "deployments"}
)

// subject is one of the objects the fixtures admit.
type subject struct {
	name string // fixture name prefix
	kind kindInfo
	// render returns the object for a template, stored (with server-set
	// metadata) or about to be created (stored nil).
	render   func(t podTemplate, stored *persisted) object
	template podTemplate
	objName  string
}

func subjects() []subject {
	small, large, deploy := smallPod(), largePod(), deploymentTemplate()
	return []subject{
		{name: "pod-small", kind: podKind, template: small, objName: "alice-web",
			render: func(t podTemplate, s *persisted) object { return podObject("alice-web", t, s) }},
		{name: "pod-large", kind: podKind, template: large, objName: "analytics-pipeline-0",
			render: func(t podTemplate, s *persisted) object { return podObject("analytics-pipeline-0", t, s) }},
		{name: "deployment", kind: deploymentKind, template: deploy, objName: "web",
			render: func(t podTemplate, s *persisted) object { return deploymentObject("web", 3, t, s) }},
	}
}

// generate builds every fixture, in a fixed order.
func generate() ([]fixture, error) {
	var all []fixture
	for _, s := range subjects() {
		for _, c := range cases {
			name := s.name + "-" + c
			data, err := json.Marshal(review(name, s, c))
			if err != nil {
				return nil, fmt.Errorf("encode %s: %w", name, err)
			}
			all = append(all, fixture{name: name + ".json", data: append(data, '\n')})
		}
	}
	return all, nil
}

// review builds the AdmissionReview of case c for subject s, the way the
// API server sends it to a webhook.
func review(name string, s subject, c string) object {
	t := s.template.clone()
	operation, optionsKind, manager := "CREATE", "CreateOptions", "kubectl-create"
	var stored *persisted
	if c == casePresent || c == caseUnchanged {
		if t.annotations == nil {
			t.annotations = map[string]string{}
		}
		t.annotations[userInfoKey] = userInfoValue
	}
	if c == caseUnchanged {
		operation, optionsKind, manager = "UPDATE", "UpdateOptions", "kubectl-replace"
		stored = &persisted{uid: uuid("object/" + s.name), resourceVersion: "48213"}
	}
	object := s.render(t, stored)
	var oldObject any = null
	if c == caseUnchanged {
		oldObject = object
	}
	gvk := obj("group", s.kind.group, "version", s.kind.version, "kind", s.kind.kind)
	gvr := obj("group", s.kind.group, "version", s.kind.version, "resource", s.kind.resource)
	return obj(
		"kind", "AdmissionReview",
		"apiVersion", "admission.k8s.io/v1",
		"request", obj(
			"uid", uuid("request/"+name),
			"kind", gvk,
			"resource", gvr,
			"requestKind", gvk,
			"requestResource", gvr,
			"name", s.objName,
			"namespace", namespace,
			"operation", operation,
			"userInfo", obj("username", submitter, "uid", "uid-"+submitter, "groups", submitterGroups),
			"object", object,
			"oldObject", oldObject,
			"dryRun", false,
			"options", obj(
				"kind", optionsKind,
				"apiVersion", "meta.k8s.io/v1",
				"fieldManager", manager,
				"fieldValidation", "Strict",
			),
		),
	)
}

// uuid derives a fixed, UUID-shaped (version 4 layout) identifier from
// seed.
func uuid(seed string) string {
	h := sha256.Sum256([]byte(seed))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
