package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
)

// BenchmarkValidate times the policy compiled natively on the same requests
// `make bench` gives the Wasm build, for comparison.
func BenchmarkValidate(b *testing.B) {
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
				if _, err := validate(payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
