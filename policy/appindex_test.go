package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
	"github.com/yunikorn-userinfo/userinfo/internal/yunikorn/appindex"
	"github.com/yunikorn-userinfo/userinfo/policy/appowners"
)

// TestValidate_fixturesThroughTheIndex runs the case table with a host
// that keeps the index of application owners for every case's settings
// (as serve and run do) and refuses to list Pods: every ownership decision
// must then come from the index, and be the one the table expects (which
// the list gives under policy-server, TestValidate_fixtures).
func TestValidate_fixturesThroughTheIndex(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	replay, err := kubecap.LoadReplay(fixtures.ClusterDir())
	require.NoError(t, err)
	var specs []kubecap.IndexSpec
	seen := map[string]bool{}
	for _, c := range cases {
		o, on, err := appowners.FromSettings(string(c.Settings))
		if err != nil || !on || seen[o.IndexName()] {
			continue
		}
		seen[o.IndexName()] = true
		specs = append(specs, appindex.Spec(o))
	}
	require.NotEmpty(t, specs)
	h, err := kubecap.HostCalls(kubecap.Options{Backend: replay.WithIndexes(nil, specs...), Resources: podAndFriends(t),
		Next: engine.KubewardenHostCalls(nil)})
	require.NoError(t, err)
	var asked atomic.Int32
	freshInstance(t)
	prev := hostCaller
	hostCaller = func(binding, namespace, operation string, payload []byte) ([]byte, error) {
		if operation == "list_resources_all" && gjson.GetBytes(payload, "kind").String() == "Pod" {
			return nil, errors.New("listed Pods although the host has the index")
		}
		out, err := h(context.Background(), binding, namespace, operation, payload)
		if binding == indexBinding && err == nil {
			asked.Add(1)
		}
		return out, err
	}
	t.Cleanup(func() { hostCaller = prev })
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.Name, func(t *testing.T) {
				t.Parallel()
				out, err := validate(c.Payload())
				require.NoError(t, err)
				fixturecheck.CheckValidationResponse(t, c, out)
			})
		}
	})
	assert.Greater(t, int(asked.Load()), 20, "the ownership cases asked the index")
}

// podAndFriends are the kinds metadata.yml declares.
func podAndFriends(t *testing.T) []kubecap.Resource {
	t.Helper()
	data, err := os.ReadFile("../metadata.yml")
	require.NoError(t, err)
	md, err := metadata.Parse(data)
	require.NoError(t, err)
	return kubecap.ResourcesOf(md.ContextAwareResources)
}

// The host reads the index's options from the settings as the policy
// does: for every settings document of the case tables, the name of the
// index the policy asks for is the name of the index serve keeps.
func TestAppIndexOptionsMatchThePolicy(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	docs := map[string][]byte{}
	for _, c := range cases {
		docs[string(c.Settings)] = c.Settings
	}
	settingsCases, err := fixtures.LoadSettings()
	require.NoError(t, err)
	for _, c := range settingsCases {
		docs[string(c.Document())] = c.Document()
	}
	checked := 0
	for _, doc := range docs {
		if !gjson.ValidBytes(doc) {
			continue // YAML: serve reads it as JSON first
		}
		s, err := parseSettings(gjson.ParseBytes(doc))
		if err != nil {
			continue // refused by validate_settings: serve does not start
		}
		o, on, err := appowners.FromSettings(string(doc))
		require.NoError(t, err, "%s", doc)
		policyOn := s.AppOwnership != nil && s.AppOwnership.mode != queueCheckOff
		assert.Equal(t, policyOn, on, "%s", doc)
		if policyOn {
			checked++
			assert.Equal(t, s.AppOwnership.opts.IndexName(), o.IndexName(), "%s", doc)
		}
	}
	assert.Greater(t, checked, 5)
}

// appOwned asks the index, exactly; an answer it cannot read, or an
// error, sends it to the list of the scheduler's Pods (a fixed field
// selector, escaped).
func TestAppOwned_indexThenList(t *testing.T) {
	s, err := parseSettings(gjson.Parse(`{"applicationOwnership":{"mode":"enforce","schedulerName":"yk,1=a\\b"},"userLabelKey":"u"}`))
	require.NoError(t, err)
	var calls []string
	answer := func(index string, indexErr error) {
		calls = nil
		withHost(t, func(binding, namespace, operation string, payload []byte) ([]byte, error) {
			calls = append(calls, binding+"/"+namespace+"/"+operation+" "+string(payload))
			if binding == indexBinding {
				return []byte(index), indexErr
			}
			return []byte(`{"items":[]}`), nil
		})
	}
	name := s.AppOwnership.opts.IndexName()

	answer(`{"values":["bob"],"more":false}`, nil)
	found, missed, err := appOwned(s.AppOwnership, "etl", "alice", "ns", "p", s)
	assert.False(t, missed)
	require.NoError(t, err)
	assert.True(t, found)
	require.Len(t, calls, 1, "the index answers alone")
	q := gjson.Parse(strings.TrimPrefix(calls[0], "io.yunikorn-userinfo.host/index/values "))
	assert.Equal(t, name, q.Get("index").String())
	assert.JSONEq(t, `{"key":"etl","except":"alice","limit":1,"exclude":{"namespace":"ns","name":"p"}}`,
		`{"key":`+q.Get("key").Raw+`,"except":`+q.Get("except").Raw+`,"limit":`+q.Get("limit").Raw+`,"exclude":`+q.Get("exclude").Raw+`}`)

	answer(`{"values":[],"more":true}`, nil)
	found, _, _ = appOwned(s.AppOwnership, "etl", "alice", "ns", "p", s)
	assert.True(t, found, "more values than the limit: owned")
	answer(`{"values":[],"more":false}`, nil)
	found, _, _ = appOwned(s.AppOwnership, "etl", "alice", "ns", "p", s)
	assert.False(t, found)
	assert.Len(t, calls, 1)

	for _, bad := range []struct {
		answer string
		err    error
		missed bool
	}{
		{"", errors.New("unknown binding"), false}, // a Kubewarden host
		{"", errors.New(`index "` + name + `": no such index`), true},
		{`{"values":"bob"}`, nil, false}, {`not json`, nil, false},
	} {
		answer(bad.answer, bad.err)
		found, missed, err = appOwned(s.AppOwnership, "etl", "alice", "ns", "p", s)
		require.NoError(t, err)
		assert.False(t, found)
		assert.Equal(t, bad.missed, missed, "%v", bad.err)
		require.Len(t, calls, 2, "%q: then the list", bad.answer)
		list := strings.TrimPrefix(calls[1], "kubewarden/kubernetes/list_resources_all ")
		assert.Equal(t, `spec.schedulerName=yk\,1\=a\\b`, gjson.Get(list, "field_selector").String())
		assert.True(t, gjson.Get(list, "field_masks").IsArray())
		assert.False(t, gjson.Get(list, "label_selector").Exists())
	}
}
