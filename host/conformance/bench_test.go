package conformance

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkOurHost_validate times one validate of the built module through
// host/engine, on the requests BenchmarkValidate (policy/) times natively.
func BenchmarkOurHost_validate(b *testing.B) {
	wasm := policyWasmB(b)
	e, err := engine.New(b.Context(), wasm, engine.Options{MaxInstances: 1})
	require.NoError(b, err)
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	for _, name := range []string{"requests/review-alice-pod.json", "base/deployment.json"} {
		raw, err := os.ReadFile(filepath.Join(fixtures.Dir(), name))
		require.NoError(b, err)
		req := raw
		if r := gjson.GetBytes(raw, "request"); r.Exists() {
			req = []byte(r.Raw)
		}
		payload := []byte(`{"request":` + string(req) + `,"settings":{}}`)
		b.Run(filepath.Base(name), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Validate(b.Context(), payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func policyWasmB(b *testing.B) []byte {
	path := os.Getenv("POLICY_WASM")
	if path == "" {
		path = filepath.Join(fixtures.Dir(), "..", "build", "policy.wasm")
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Skipf("no policy module at %s: run `make policy`", path)
	}
	return wasm
}
