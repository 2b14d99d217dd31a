package peer

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/yunikorn-userinfo/userinfo/host/webhook"
)

// benchImpls builds both implementations once per benchmark function (the
// module compiles once, YuniKorn's configuration loads once).
func benchImpls(b *testing.B, mode logging) []impl {
	b.Helper()
	return []impl{newOurs(b, mode), newYuniKorn(b, mode)}
}

// BenchmarkAdmission is one admission at a time: decode the review, decide,
// encode the answer, with no admission logging on either side.
// Names: BenchmarkAdmission/fixture=<object>-<case>/impl=<ours|yunikorn>.
func BenchmarkAdmission(b *testing.B) {
	runSequential(b, benchImpls(b, quiet))
}

// BenchmarkAdmissionLogged is BenchmarkAdmission with each implementation
// logging as it does by default (into /dev/null), and our metrics on.
func BenchmarkAdmissionLogged(b *testing.B) {
	runSequential(b, benchImpls(b, shipped))
}

func runSequential(b *testing.B, impls []impl) {
	for _, fx := range loadFixtures(b) {
		b.Run("fixture="+fx.name, func(b *testing.B) {
			for _, im := range impls {
				b.Run("impl="+im.name, func(b *testing.B) {
					checkAnswer(b, im, fx)
					b.ReportAllocs()
					for b.Loop() {
						admit(im.handler, fx.body)
					}
				})
			}
		})
	}
}

// BenchmarkAdmissionParallel sends the same admissions from GOMAXPROCS
// goroutines at once (b.RunParallel): throughput on all cores. ns/op is
// wall time divided by admissions; admissions/s is its inverse.
func BenchmarkAdmissionParallel(b *testing.B) {
	impls := benchImpls(b, quiet)
	for _, fx := range loadFixtures(b) {
		b.Run("fixture="+fx.name, func(b *testing.B) {
			for _, im := range impls {
				b.Run("impl="+im.name, func(b *testing.B) {
					checkAnswer(b, im, fx)
					warmUp(im.handler, fx.body)
					b.ReportAllocs()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							admit(im.handler, fx.body)
						}
					})
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "admissions/s")
				})
			}
		})
	}
}

// warmUp sends a few admissions from GOMAXPROCS goroutines, so that our
// engine has created its instances (lazily, on demand) before timing.
func warmUp(h http.Handler, body []byte) {
	n := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for range 4 {
				admit(h, body)
			}
		})
	}
	wg.Wait()
}

// BenchmarkHostSide is what our host costs per admission on its own:
// guest=policy is BenchmarkAdmission's "ours"; guest=noop is the same
// webhook whose policy is a no-op guest: it runs no Wasm and returns a copy
// of the very ValidationResponse the policy gave for the fixture, so the
// host decodes, validates, diffs and encodes exactly the same documents.
// The noop/policy ratio is the host's share of an admission.
func BenchmarkHostSide(b *testing.B) {
	ours := newOurs(b, quiet)
	for _, fx := range loadFixtures(b) {
		b.Run("fixture="+fx.name, func(b *testing.B) {
			noop := newOursWith(b, quiet, func(p webhook.Policy) webhook.Policy { return &replay{policy: p} })
			for _, v := range []struct {
				name string
				im   impl
			}{{"policy", ours}, {"noop", noop}} {
				b.Run("guest="+v.name, func(b *testing.B) {
					checkAnswer(b, v.im, fx) // for noop, also the call it records
					b.ReportAllocs()
					for b.Loop() {
						admit(v.im.handler, fx.body)
					}
				})
			}
		})
	}
}

// replay is a no-op guest: it asks the policy once, then answers every
// call with a copy of that first answer (the engine, too, hands back a
// fresh copy of the guest's response).
type replay struct {
	policy webhook.Policy
	mu     sync.Mutex
	answer []byte
}

func (r *replay) Validate(ctx context.Context, payload []byte) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answer == nil {
		a, err := r.policy.Validate(ctx, payload)
		if err != nil {
			return nil, err
		}
		r.answer = a
	}
	return bytes.Clone(r.answer), nil
}

// BenchmarkHarness is what the measurement itself costs per admission: the
// same httptest request and recorder around a handler that only reads the
// body and writes a fixed answer. Subtract it to compare the
// implementations' own work.
func BenchmarkHarness(b *testing.B) {
	answer := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true}}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	for _, fx := range loadFixtures(b) {
		b.Run("fixture="+fx.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				admit(h, fx.body)
			}
		})
	}
}
