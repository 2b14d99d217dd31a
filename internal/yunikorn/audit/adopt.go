package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OwnerPlaceholder stands for the owner's user.info in an adoption
// command: the audit never knows who the owner is.
const OwnerPlaceholder = `{"user":"OWNER","groups":["GROUP"]}`

// legacyUserLabel is the label that named the submitter before the
// annotation (the policy's default userLabelKey).
const legacyUserLabel = "yunikorn.apache.org/username"

// Adoption is how an adopter (the policy's settings.adopters, docs/BEHAVIOUR.md
// §4.13) records the owner of an object that records none: an object made
// before the policy, with no controller whose adoption would cover it.
type Adoption struct {
	// Command is the kubectl command an adopter runs, with
	// OwnerPlaceholder as the value to replace.
	Command string `json:"command"`
	// Patch is the JSON merge patch the command sends.
	Patch string `json:"patch"`
	// OwnerHint says where to find the owner.
	OwnerHint string `json:"ownerHint"`
}

// AdoptionPath is where an adoption writes user.info for a kind: the
// metadata holding the annotations, as member names. The built-in kinds'
// Pods come from their one template; a custom kind's own annotations are
// copied by the policy to every template its workloads entry covers.
func AdoptionPath(group, kind string) []string {
	switch {
	case group == "" && kind == "Pod":
		return []string{"metadata"}
	case group == "batch" && kind == "CronJob":
		return []string{"spec", "jobTemplate", "spec", "template", "metadata"}
	case group == "apps" || group == "batch" || group == "" && kind == "ReplicationController":
		return []string{"spec", "template", "metadata"}
	}
	return []string{"metadata"}
}

// AdoptionPatch is the JSON merge patch writing value as user.info in the
// annotations of the metadata at path.
func AdoptionPatch(value string, path []string) string {
	var v any = map[string]any{"annotations": map[string]string{AnnotationKey: value}}
	for i := len(path) - 1; i >= 0; i-- {
		v = map[string]any{path[i]: v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // nested maps of strings always encode
	}
	return string(b)
}

// AdoptionCommand is the kubectl command that sends the adoption patch
// for the object res: kubectl patch RESOURCE.GROUP NAME -n NAMESPACE
// --type=merge -p 'PATCH', quoted for a POSIX shell.
func AdoptionCommand(res Resource, patch string) string {
	target := strings.ToLower(res.Kind)
	if g := groupOf(res.APIVersion); g != "" {
		target += "." + g
	}
	return KubectlPatch(target, res.Namespace, res.Name, patch)
}

// KubectlPatch is the kubectl command sending a JSON merge patch to the
// object name of resource target (kind.group, as kubectl takes it) in
// namespace ns, quoted for a POSIX shell.
func KubectlPatch(target, ns, name, patch string) string {
	return "kubectl patch " + shellQuote(target) + " " + shellQuote(name) + " -n " + shellQuote(ns) +
		" --type=merge -p " + shellQuote(patch)
}

// groupOf is the API group of an apiVersion ("" for the core group).
func groupOf(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// adoption builds the Adoption of an object that records no owner: its
// metadata meta, and labels, those where a legacy username may be (the
// object's, then its template's).
func adoption(res Resource, meta *metav1.ObjectMeta, labels ...map[string]string) *Adoption {
	a := &Adoption{}
	a.Patch = AdoptionPatch(OwnerPlaceholder, AdoptionPath(groupOf(res.APIVersion), res.Kind))
	a.Command = AdoptionCommand(res, a.Patch)
	label := ""
	for _, l := range labels {
		if u := l[legacyUserLabel]; u != "" && label == "" {
			label = u
		}
	}
	a.OwnerHint = ownerHint(meta, label)
	return a
}

// ownerHint says where the owner can be read: the object names only the
// client that created it (managedFields), not the user; the API server's
// audit log names the user. A legacy username label is shown as what it
// is, a claim: whoever could update the object before the policy guarded
// the label could have written it.
func ownerHint(meta *metav1.ObjectMeta, label string) string {
	var b strings.Builder
	b.WriteString("replace OWNER and GROUP with the owner's user and groups (drop groups to let YuniKorn resolve them): ")
	if label != "" {
		b.WriteString("its label " + legacyUserLabel + " says " + strconv.Quote(label) +
			", which proves nothing (anyone who could update the object could write it); ")
	}
	b.WriteString("the API server's audit log names who created it (the create event's user.username")
	if meta.CreationTimestamp.Time.IsZero() {
		b.WriteString(")")
	} else {
		b.WriteString(", at " + meta.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z") + ")")
	}
	for _, m := range meta.ManagedFields {
		if m.Operation == metav1.ManagedFieldsOperationUpdate || m.Operation == metav1.ManagedFieldsOperationApply {
			b.WriteString("; managedFields name only the client, " + m.Manager)
			break
		}
	}
	b.WriteString("; run the command as an identity of settings.adopters")
	return b.String()
}

// adoptable marks the finding just added about res as one adoption fixes:
// an object recording no owner, with no controller whose adoption would
// cover it.
func (s *scan) adoptable(res Resource, meta *metav1.ObjectMeta, labels ...map[string]string) {
	if metav1.GetControllerOfNoCopy(meta) != nil || len(s.report.Findings) == 0 {
		return
	}
	last := &s.report.Findings[len(s.report.Findings)-1]
	if last.Rule != RuleMissing || last.Resource.UID != res.UID {
		return
	}
	last.Adopt = adoption(res, meta, labels...)
}

// WriteAdoptions writes, for every object adoption fixes, a comment naming
// it and where to find its owner, then the command that adopts it; a
// closing comment counts them.
func (r *Report) WriteAdoptions(w io.Writer) error {
	n := 0
	var b strings.Builder
	for _, f := range r.Findings {
		if f.Adopt == nil {
			continue
		}
		n++
		res := f.Resource
		fmt.Fprintf(&b, "# %s %s/%s: %s\n%s\n", res.Kind, res.Namespace, res.Name, f.Adopt.OwnerHint, f.Adopt.Command)
	}
	switch n {
	case 0:
		b.WriteString("# no object to adopt: every audited object records an owner, or has a controller whose template is reported instead\n")
	default:
		fmt.Fprintf(&b, "# %d objects to adopt\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
