package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestSchedulingGenerateAppID: the shim's GenerateApplicationID, cuts
// included (fmt's precision counts characters, not bytes).
func TestSchedulingGenerateAppID(t *testing.T) {
	long := strings.Repeat("n", 60)
	for _, c := range []struct {
		ns     string
		unique bool
		uid    string
		want   string
	}{
		{"e2e", false, "", "yunikorn-e2e-autogen"},
		{"e2e", false, "some-uid", "yunikorn-e2e-autogen"},
		{long, false, "", fmt.Sprintf("%.63s", "yunikorn-"+long+"-autogen")},
		{"e2e", true, "", "e2e-uniqueautogen"},
		{long, true, "", long[:26] + "-uniqueautogen"},
		{"e2e", true, "u-1", "e2e-u-1"},
		{long, true, strings.Repeat("u", 50), fmt.Sprintf("%.63s", long[:26]+"-"+strings.Repeat("u", 50))},
		{"ns", true, strings.Repeat("é", 70), fmt.Sprintf("%.63s", "ns-"+strings.Repeat("é", 70))},
	} {
		got := generateAppID(c.ns, c.unique, c.uid)
		assert.Equal(t, c.want, got, "%q unique=%v uid=%q", c.ns, c.unique, c.uid)
	}
	for _, s := range []string{"", "abc", "é\xffx", strings.Repeat("日本", 40), "a\xff\xfe\xfdb"} {
		for n := 0; n < 70; n += 7 {
			assert.Equal(t, fmt.Sprintf("%.*s", n, s), cutRunes(s, n), "%q cut to %d", s, n)
		}
	}
}

// TestSchedulingSetStringMember: an edit writes one member and keeps
// every other byte: a value replaced in place, a member added at the end
// of its object, levels created where absent or null.
func TestSchedulingSetStringMember(t *testing.T) {
	for _, c := range []struct {
		obj  string
		e    schedEdit
		want string
	}{
		{`{"spec":{"a":1,"schedulerName":"x" }}`, schedEdit{specPath, "schedulerName", "yunikorn"}, `{"spec":{"a":1,"schedulerName":"yunikorn" }}`},
		{`{"spec":{ }}`, schedEdit{specPath, "schedulerName", "y"}, `{"spec":{ "schedulerName":"y"}}`},
		{`{"spec":{"a":1} }`, schedEdit{specPath, "schedulerName", "y"}, `{"spec":{"a":1,"schedulerName":"y"} }`},
		{`{"metadata":{"labels":null}}`, schedEdit{labelsPath, "k", "v"}, `{"metadata":{"labels":{"k":"v"}}}`},
		{`{"metadata":{}}`, schedEdit{labelsPath, "k", "v"}, `{"metadata":{"labels":{"k":"v"}}}`},
		{`{"kind":"Pod"}`, schedEdit{annotsPath, "a/b", "<&>"}, `{"kind":"Pod","metadata":{"annotations":{"a/b":"\u003c\u0026\u003e"}}}`},
		{`{"metadata":{"labels":{"k":"\u0076"}}}`, schedEdit{labelsPath, "k", "w"}, `{"metadata":{"labels":{"k":"w"}}}`},
	} {
		assert.Equal(t, c.want, setStringMember(c.obj, c.e), "%s", c.obj)
		assert.True(t, json.Valid([]byte(c.want)))
	}
}

const schedPod = `{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"team-a",` +
	`"userInfo":{"username":"alice","groups":["dev"]},` +
	`"object":{"metadata":{"name":"p","labels":{"x":"y"}},"spec":{"priorityClassName":"high","containers":[]}}}`

func decideScheduling(t *testing.T, settings, request string) decision {
	t.Helper()
	s, err := parseSettings(gjson.Parse(settings))
	require.NoError(t, err)
	return decide(gjson.Parse(request), s)
}

// mutatedObject is the object the decision answers with.
func mutatedObject(t *testing.T, d decision) gjson.Result {
	t.Helper()
	out := d.appendResponse(nil)
	require.True(t, gjson.ValidBytes(out), "%s", out)
	return gjson.GetBytes(out, "mutated_object")
}

// TestSchedulingReadFailures: a Namespace that cannot be read is decided
// by the lists, a PriorityClass that cannot be read allows preemption, as
// the admission controller's caches answer for what they do not hold; each
// says so in a warning.
func TestSchedulingReadFailures(t *testing.T) {
	var asked []string
	withHost(t, func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		asked = append(asked, gjson.GetBytes(payload, "kind").String()+" "+gjson.GetBytes(payload, "name").String())
		return nil, errors.New("connection refused")
	})
	d := decideScheduling(t, `{"scheduling":{"noLabelNamespaces":["^other$"]}}`, schedPod)
	require.True(t, d.accepted, d.message)
	assert.Equal(t, []string{"Namespace team-a", "PriorityClass high"}, asked)
	assert.Equal(t, []string{
		"scheduling: Namespace team-a could not be read: connection refused; its annotations yunikorn.apache.org/namespace.enableYuniKorn and " +
			"yunikorn.apache.org/namespace.generateAppId were not read, the namespace lists decided",
		"scheduling: PriorityClass high could not be read: connection refused; yunikorn.apache.org/allow-preemption was set to \"true\", " +
			"as YuniKorn does for a PriorityClass it does not know",
	}, d.warnings)
	obj := mutatedObject(t, d)
	assert.Equal(t, "yunikorn", obj.Get("spec.schedulerName").String())
	assert.Equal(t, "yunikorn-team-a-autogen", obj.Get(`metadata.labels.applicationId`).String())
	assert.Equal(t, "true", obj.Get(`metadata.annotations.yunikorn\.apache\.org/allow-preemption`).String())
	assert.Equal(t, "create: absent, inject; scheduling: processed, labelled", d.rule)
}

// TestSchedulingNoReads: with namespaceAnnotations and preemption off,
// the jobs ask the host nothing.
func TestSchedulingNoReads(t *testing.T) {
	withHost(t, func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		t.Errorf("unexpected host call %s", payload)
		return nil, errors.New("no")
	})
	d := decideScheduling(t, `{"scheduling":{"namespaceAnnotations":false,"preemption":false}}`, schedPod)
	require.True(t, d.accepted, d.message)
	assert.Empty(t, d.warnings)
	obj := mutatedObject(t, d)
	assert.False(t, obj.Get(`metadata.annotations.yunikorn\.apache\.org/allow-preemption`).Exists())
	assert.Equal(t, `{"x":"y","yunikorn.apache.org/app-id":"yunikorn-team-a-autogen","applicationId":"yunikorn-team-a-autogen"}`, obj.Get("metadata.labels").Raw)
}

// TestSchedulingMalformed: a Pod whose members the jobs read have the
// wrong type is refused as malformed, never edited blindly.
func TestSchedulingMalformed(t *testing.T) {
	withHost(t, func(string, string, string, []byte) ([]byte, error) { return nil, errors.New("Cannot find it") })
	for _, c := range []struct{ object, msg string }{
		{`{"metadata":{},"spec":"x"}`, "request.object.spec: must be an object, got string"},
		{`{"metadata":{},"spec":{"schedulerName":1}}`, "request.object.spec.schedulerName: must be a string, got number"},
		{`{"metadata":{"labels":{"app":1}},"spec":{}}`, "request.object.metadata.labels.app: must be a string, got number"},
		{`{"metadata":{"uid":false},"spec":{}}`, "request.object.metadata.uid: must be a string, got boolean"},
		{`{"metadata":{},"spec":{"priorityClassName":[]}}`, "request.object.spec.priorityClassName: must be a string, got array"},
	} {
		req := strings.Replace(schedPod, `{"metadata":{"name":"p","labels":{"x":"y"}},"spec":{"priorityClassName":"high","containers":[]}}`, c.object, 1)
		d := decideScheduling(t, `{"scheduling":{}}`, req)
		assert.False(t, d.accepted, c.object)
		assert.Equal(t, c.msg, d.message, c.object)
		assert.Nil(t, d.sched)
	}
}
