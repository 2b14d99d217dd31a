package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestSchedulingEdits: the edits write their members and keep every other
// byte: a value replaced in place, a member added at the end of its
// object, a map created where absent or null (holding all of its edits),
// and a Pod without metadata edited member by member; one pass and the
// member-by-member edits agree.
func TestSchedulingEdits(t *testing.T) {
	sched := setTo(specPath, "schedulerName", "yunikorn")
	l1, l2 := setTo(labelsPath, "k", "v"), setTo(labelsPath, "k2", "v2")
	a1 := setTo(annotsPath, "a/b", "<&>")
	for _, c := range []struct {
		obj   string
		edits []schedEdit
		want  string
	}{
		{`{"spec":{"a":1,"schedulerName":"x" }}`, []schedEdit{sched}, `{"spec":{"a":1,"schedulerName":"yunikorn" }}`},
		{`{"spec":{ }}`, []schedEdit{sched}, `{"spec":{ "schedulerName":"yunikorn"}}`},
		{`{"spec":{"a":1} }`, []schedEdit{sched}, `{"spec":{"a":1,"schedulerName":"yunikorn"} }`},
		{`{"kind":"Pod"}`, []schedEdit{sched}, `{"kind":"Pod","spec":{"schedulerName":"yunikorn"}}`},
		{`{"metadata":{"labels":null}}`, []schedEdit{l1, l2}, `{"metadata":{"labels":{"k":"v","k2":"v2"}}}`},
		{`{"metadata":{}}`, []schedEdit{l1, a1, l2}, `{"metadata":{"labels":{"k":"v","k2":"v2"},"annotations":{"a/b":"\u003c\u0026\u003e"}}}`},
		{`{"metadata":{"n":1},"spec":{}}`, []schedEdit{sched, l1, a1}, `{"metadata":{"n":1,"labels":{"k":"v"},"annotations":{"a/b":"\u003c\u0026\u003e"}},"spec":{"schedulerName":"yunikorn"}}`},
		{`{"kind":"Pod"}`, []schedEdit{l1, a1}, `{"kind":"Pod","metadata":{"labels":{"k":"v"},"annotations":{"a/b":"\u003c\u0026\u003e"}}}`},
		{`{"metadata":null,"spec":null}`, []schedEdit{sched, l1, a1}, `{"metadata":{"labels":{"k":"v"},"annotations":{"a/b":"\u003c\u0026\u003e"}},"spec":{"schedulerName":"yunikorn"}}`},
		{`{"metadata":{"labels":{"k":"\u0076","x":"y"}}}`, []schedEdit{l2, l1}, `{"metadata":{"labels":{"k":"v","x":"y","k2":"v2"}}}`},
	} {
		got := string(appendEdited(nil, c.obj, c.edits))
		assert.Equal(t, c.want, got, "%s", c.obj)
		require.True(t, json.Valid([]byte(got)), got)
		one := c.obj
		for _, e := range c.edits {
			one = setStringMember(one, e)
		}
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(got), &a))
		require.NoError(t, json.Unmarshal([]byte(one), &b))
		assert.Equal(t, b, a, "one pass and member by member agree on %s", c.obj)
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
