package kubewarden

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

// BenchmarkEvaluation times one evaluation of each benchmark fixture two
// ways in one run: as policy-server does it (a fresh wasmtime instance,
// _start and wapc_init, serde re-serialisation, the crate's diff), and on
// this project's engine with its pool of initialised instances. The ratio
// is what Kubewarden's clean-slate model costs this policy.
func BenchmarkEvaluation(b *testing.B) {
	wasm := policyWasm(b)
	ps, err := New(wasm)
	require.NoError(b, err)
	e, err := engine.New(b.Context(), wasm, engine.Options{MaxInstances: 1})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	// The fixed part: a fresh instance, _start and wapc_init, one call.
	b.Run("mode=kubewarden-fresh-instance-only", func(b *testing.B) {
		for b.Loop() {
			if _, err := ps.invoke("protocol_version", nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	names, err := fixtures.BenchFixtures()
	require.NoError(b, err)
	for _, name := range names {
		payload, err := fixtures.BenchPayload(name)
		require.NoError(b, err)
		request := []byte(gjson.GetBytes(payload, "request").Raw)
		b.Run("mode=kubewarden-fresh/fixture="+name, func(b *testing.B) {
			b.SetBytes(int64(len(request)))
			for b.Loop() {
				if _, err := ps.Validate(request, []byte("{}")); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The test host's own share of the first figure: re-serialising
		// the request and diffing the policy's answer, without the guest.
		answer, err := e.Validate(b.Context(), payload)
		require.NoError(b, err)
		b.Run("mode=kubewarden-host-side-only/fixture="+name, func(b *testing.B) {
			b.SetBytes(int64(len(request)))
			for b.Loop() {
				req, _, err := validatePayload(request, []byte("{}"))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := admissionResponse(req, answer); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("mode=pooled/fixture="+name, func(b *testing.B) {
			b.SetBytes(int64(len(request)))
			for b.Loop() {
				if _, err := e.Validate(b.Context(), payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCapabilities is what the settings that ask the cluster cost
// under policy-server's model, where every evaluation has a fresh instance:
// the queue check parses queues.yaml and compiles its patterns each time.
// Same Pod, with and without the check; capabilities from the fixtures'
// cluster directory.
func BenchmarkCapabilities(b *testing.B) {
	ps, err := New(policyWasm(b))
	require.NoError(b, err)
	cluster := fixturecheck.ClusterHostCalls(b, nil)
	ps.Kubernetes = func(operation string, payload []byte) ([]byte, error) {
		return cluster(b.Context(), "kubewarden", "kubernetes", operation, payload)
	}
	cases, err := fixtures.Load()
	require.NoError(b, err)
	for _, name := range []string{"pod/queue/other-scheduler", "pod/queue/enforce/placed", "pod/queue/enforce/refused",
		"pod/create/present/external-user", "pod/create/present/rbac/granted"} {
		i := slices.IndexFunc(cases, func(c fixtures.Case) bool { return c.Name == name })
		require.GreaterOrEqual(b, i, 0, name)
		c := cases[i]
		b.Run("mode=kubewarden-fresh/case="+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := ps.Validate(c.Request, c.Settings); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
