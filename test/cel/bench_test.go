package celtest

import (
	"context"
	"testing"
)

// The cost of judging one Pod CREATE in-process: the generated policies
// in the API server's CEL (mutating, then validating on the result), and
// the policy module on the pooled engine, with what the API server sends
// it. Neither includes the API server's own work nor, for the module, the
// webhook round trip.

func benchIdentity() identity {
	return identity{user: "alice", groups: []string{"dev", "system:authenticated"}}
}

func BenchmarkPodCreate_CEL(b *testing.B) {
	ctx := context.Background()
	ps, err := compileSet(b, []byte(`{"externalUsers":["^livy$"]}`))
	if err != nil {
		b.Fatal(err)
	}
	r, _ := podCreate(benchIdentity())
	for b.Loop() {
		if got := ps.evaluate(ctx, b, r); !got.allowed {
			b.Fatal(got.message)
		}
	}
}

func BenchmarkPodCreate_module(b *testing.B) {
	ctx := context.Background()
	m := newModule(ctx, b)
	_, req := podCreate(benchIdentity())
	settings := []byte(`{"externalUsers":["^livy$"]}`)
	for b.Loop() {
		if v := m.validate(ctx, b, req, settings); !v.accepted {
			b.Fatal(v.message)
		}
	}
}
