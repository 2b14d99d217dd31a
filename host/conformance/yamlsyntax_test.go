package conformance

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/sjson"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/kubecap"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/yamltypos"
)

// The module parses queues.yaml texts from two places: the stored
// yunikorn-configs ConfigMap (queueCheck, on every Pod CREATE) and the
// edited ConfigMap (configValidation). yaml.v3 reports a syntax error by
// a panic, which traps a TinyGo module; these tests feed syntax-broken
// texts through the built module and fail on any trap.

// fuzzNamespace is where the test's host serves yunikorn-configs with the
// text under test; every other call goes to the fixtures' cluster.
const fuzzNamespace = "yunikorn-fuzz"

// yamlHarness evaluates texts in the module through both paths.
type yamlHarness struct {
	e                *engine.Engine
	calls            engine.HostCallHandler
	text             *string // served as yunikorn-configs in fuzzNamespace
	podWarn, podEnf  []byte
	configMapPayload []byte
	// reads of yunikorn-configs: whole, and masked to its resourceVersion
	fullReads, maskedReads int
	versions               map[string]int
}

// version is the resourceVersion of the text served: one per text.
func (h *yamlHarness) version() string {
	v, ok := h.versions[*h.text]
	if !ok {
		v = len(h.versions) + 1
		h.versions[*h.text] = v
	}
	return strconv.Itoa(v)
}

func newYAMLHarness(t testing.TB, timeout time.Duration) *yamlHarness {
	t.Helper()
	wasm := policyWasm(t)
	h := &yamlHarness{text: new(string), versions: map[string]int{}}
	cluster := fixturecheck.ClusterHostCalls(t, nil)
	calls := func(ctx context.Context, binding, namespace, operation string, payload []byte) ([]byte, error) {
		var req kubecap.GetRequest
		if operation == kubecap.OpGetResource && json.Unmarshal(payload, &req) == nil && req.Namespace != nil && *req.Namespace == fuzzNamespace && req.Name == "yunikorn-configs" {
			// The text's resourceVersion changes with the text, as the
			// API server's does; field masks are honoured as serve's
			// cache honours them.
			meta := map[string]any{"name": req.Name, "namespace": req.Namespace, "resourceVersion": h.version()}
			if len(req.FieldMasks) > 0 {
				h.maskedReads++
				return json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": meta["resourceVersion"]}})
			}
			h.fullReads++
			return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
				"data": map[string]string{"queues.yaml": *h.text}})
		}
		return cluster(ctx, binding, namespace, operation, payload)
	}
	h.calls = calls
	e, err := engine.New(t.Context(), wasm, engine.Options{CompilationCache: moduleCache, MaxInstances: 1, HostCalls: calls, Timeout: timeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	h.e = e

	cases, err := fixtures.Load()
	require.NoError(t, err)
	byName := map[string]fixtures.Case{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	pod, ok := byName["pod/queue/enforce/yaml-syntax-error"]
	require.True(t, ok, "the queue check's syntax fixture")
	h.podEnf, err = sjson.SetBytes(pod.Payload(), "settings.queueCheck.namespace", fuzzNamespace)
	require.NoError(t, err)
	h.podWarn, err = sjson.SetBytes(h.podEnf, "settings.queueCheck.mode", "warn")
	require.NoError(t, err)
	cm, ok := byName["config-validation/refused/yaml-syntax"]
	require.True(t, ok, "configValidation's syntax fixture")
	h.configMapPayload = cm.Payload()
	return h
}

type moduleAnswer struct {
	Accepted bool   `json:"accepted"`
	Code     int    `json:"code"`
	Message  string `json:"message"`
}

// check evaluates text through queueCheck (warn, enforce) and
// configValidation; it fails on a trap and on an answer the policy must
// not give.
func (h *yamlHarness) check(t testing.TB, text string) {
	t.Helper()
	*h.text = text
	eval := func(what string, payload []byte) moduleAnswer {
		out, err := h.e.Validate(t.Context(), payload)
		require.NoError(t, err, "%s: the module answers %q", what, text)
		var a moduleAnswer
		require.NoError(t, json.Unmarshal(out, &a), "%s", out)
		return a
	}
	a := eval("queueCheck warn", h.podWarn)
	assert.True(t, a.Accepted, "queueCheck warn never refuses: %+v for %q", a, text)
	a = eval("queueCheck enforce", h.podEnf)
	if !a.Accepted {
		assert.True(t, strings.HasPrefix(a.Message, "queue check: YuniKorn will reject"), "enforce refuses only a pod YuniKorn would reject: %+v for %q", a, text)
	}
	cm, err := sjson.SetBytes(h.configMapPayload, "request.object.data", map[string]string{"queues.yaml": text})
	require.NoError(t, err)
	a = eval("configValidation", cm)
	if !a.Accepted {
		assert.Equal(t, 403, a.Code, "configValidation refuses with 403: %+v for %q", a, text)
	}
	assert.Zero(t, h.e.Stats().Replacements, "no instance trapped")
}

// TestOurHost_queuesYAMLNeverTraps: syntax-broken mutations of valid
// texts, through both checks in the built module: no trap, warn never
// refuses, and a refusal of a text yaml.v3 cannot parse names the line.
func TestOurHost_queuesYAMLNeverTraps(t *testing.T) {
	h := newYAMLHarness(t, 0)
	r := rand.New(rand.NewPCG(20261127, 11))
	n := 1500
	if testing.Short() {
		n = 150
	}
	for i := range n {
		text := yamltypos.Seeds[i%len(yamltypos.Seeds)]
		if i >= len(yamltypos.Seeds) {
			text = yamltypos.Break(r, text)
		}
		h.check(t, text)
		if t.Failed() {
			return
		}
	}

	// The live case: a typo in the stored configuration.
	*h.text = "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*\n"
	out, err := h.e.Validate(t.Context(), h.podEnf)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"accepted":true`)
	assert.Contains(t, string(out), "queue check skipped: the YuniKorn queue configuration (queues.yaml) is not one YuniKorn would load: yaml: line 5: found unexpected end of stream")
}

// FuzzModuleQueuesYAML is the same check driven by Go's fuzzer:
//
//	POLICY_WASM=$PWD/build/policy.wasm go test ./host/conformance -run '^$' -fuzz FuzzModuleQueuesYAML -fuzztime 60s
func FuzzModuleQueuesYAML(f *testing.F) {
	for _, s := range yamltypos.Seeds {
		f.Add(s)
	}
	h := newYAMLHarness(f, 0)
	f.Fuzz(func(t *testing.T, text string) {
		h.check(t, text)
	})
}
