package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
)

// queuesOfSize writes a valid queues.yaml of about n bytes: queues under
// root written out with an ACL and resources (250 KiB is some 2,000), and
// a tag rule that places the Pod under root.
func queuesOfSize(n int) string {
	var b strings.Builder
	b.WriteString("partitions:\n  - name: default\n    placementrules:\n      - name: tag\n        value: namespace\n        create: true\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n")
	for i := 0; b.Len() < n-64; i++ {
		fmt.Fprintf(&b, "          - name: q%05d\n            submitacl: 'alice,bob dev'\n            resources:\n              max: {memory: 10G, vcore: 10}\n", i)
	}
	return b.String()
}

// BenchmarkQueueCheck is the per-Pod cost of queueCheck (enforce) in the
// pooled engine with one instance, the stored configuration unchanged
// between Pods (the same resourceVersion): 1 KiB and 250 KiB of
// queues.yaml, just under the 256 KiB the check reads.
//
//	POLICY_WASM=$PWD/build/policy.wasm go test ./host/conformance -run '^$' -bench QueueCheck -benchtime 20x
func BenchmarkQueueCheck(b *testing.B) {
	// A generous deadline: the first Pod parses the configuration.
	h := newYAMLHarness(b, 30*time.Second)
	for _, size := range []int{1 << 10, 250 << 10} {
		text := queuesOfSize(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			*h.text = text
			out, err := h.e.Validate(b.Context(), h.podEnf)
			if err != nil || !strings.Contains(string(out), `"accepted":true`) || strings.Contains(string(out), "skipped") {
				b.Fatalf("the check must place the Pod: %v %.300s", err, out)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.e.Validate(b.Context(), h.podEnf); err != nil {
					b.Fatal(err)
				}
			}
			st := h.e.Stats()
			b.ReportMetric(float64(st.Replacements), "replacements")
			b.ReportMetric(float64(st.Recycled), "recycled")
		})
	}
}

// TestOurHost_queueConfigurationKept: in a pooled engine with serve's
// defaults, a 250 KiB queues.yaml is read whole and parsed for the first
// Pod only; later Pods ask for the ConfigMaps' resourceVersions, and the
// instance holding the parsed configuration is kept, not recycled.
func TestOurHost_queueConfigurationKept(t *testing.T) {
	h := newYAMLHarness(t, time.Minute)
	*h.text = queuesOfSize(250 << 10)
	for range 4 {
		out, err := h.e.Validate(t.Context(), h.podEnf)
		require.NoError(t, err)
		require.Contains(t, string(out), `"accepted":true`)
		require.NotContains(t, string(out), "skipped")
	}
	assert.Equal(t, 1, h.fullReads, "read whole once")
	assert.Equal(t, 3, h.maskedReads, "then its resourceVersion once a Pod")
	assert.Zero(t, h.e.Stats().Recycled, "the instance keeps its parsed configuration")

	*h.text = queuesOfSize(1 << 10)
	out, err := h.e.Validate(t.Context(), h.podEnf)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"accepted":true`)
	assert.Equal(t, 2, h.fullReads, "a new resourceVersion is read whole")
}

// BenchmarkQueueCheckFreshInstance is the same per-Pod cost with a fresh
// instance per evaluation, as policy-server runs a module: every Pod reads
// and parses the configuration.
func BenchmarkQueueCheckFreshInstance(b *testing.B) {
	h := newYAMLHarness(b, 30*time.Second)
	e, err := engine.New(b.Context(), policyWasm(b), engine.Options{MaxInstances: 1, SingleUse: true, HostCalls: h.calls, Timeout: 30 * time.Second})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	for _, size := range []int{1 << 10, 250 << 10} {
		text := queuesOfSize(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			*h.text = text
			for b.Loop() {
				if _, err := e.Validate(b.Context(), h.podEnf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
