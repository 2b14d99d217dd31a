package kubecap

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// TestObjectStore_churn: random adds, updates (to a size that may need a
// chunk of its own) and deletes, with compactions along the way. After
// every step each object reads back as last written, lists by namespace
// and by indexed label return exactly the matching objects, a slice read
// before is unchanged by what follows, and the arena holds what is in use
// plus at most half of it in waste (or less than its threshold).
func TestObjectStore_churn(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := newObjectStore(newLabelIndex([]string{"app"}))
	type obj struct {
		ns, name, app string
		raw           string
	}
	model := map[string]obj{}
	make := func(ns, name, app string) obj {
		size := 200 + rng.IntN(800)
		if rng.IntN(200) == 0 {
			size = arenaOwnChunk + rng.IntN(arenaOwnChunk)
		}
		raw := fmt.Sprintf(`{"metadata":{"name":%q,"namespace":%q,"labels":{"app":%q}},"pad":%q}`, name, ns, app, strings.Repeat("x", size))
		return obj{ns, name, app, raw}
	}
	type held struct {
		raw  []byte
		want string
	}
	var reads []held
	for step := range 60000 {
		ns, name := fmt.Sprintf("ns-%d", rng.IntN(5)), fmt.Sprintf("p-%d", rng.IntN(3000))
		key := ns + "/" + name
		switch rng.IntN(3) {
		case 0, 1:
			o := make(ns, name, fmt.Sprintf("a-%d", rng.IntN(50)))
			require.NoError(t, s.Update(&cachedObject{namespace: ns, name: name, raw: []byte(o.raw)}))
			model[key] = o
		case 2:
			require.NoError(t, s.Delete(cache.DeletedFinalStateUnknown{Key: key}))
			delete(model, key)
		}
		if step%97 == 0 {
			if o, ok := model[key]; ok {
				raw, found, err := s.get(ns, name)
				require.NoError(t, err)
				require.True(t, found)
				reads = append(reads, held{raw, o.raw})
			}
		}
		if step%1000 != 999 {
			continue
		}
		require.Equal(t, len(model), s.size())
		used := 0
		for key, o := range model {
			raw, ok, err := s.get(o.ns, o.name)
			require.NoError(t, err)
			require.True(t, ok, key)
			require.Equal(t, o.raw, string(raw), key)
			used += len(o.raw)
		}
		require.Equal(t, used, s.arena.used)
		assert.True(t, s.arena.waste <= max(arenaMinWaste, used/2), "waste %d of %d in use", s.arena.waste, used)
		held := 0
		for _, c := range s.arena.chunks {
			if c != nil {
				held += len(c.buf)
			}
		}
		require.Equal(t, used+s.arena.waste, held)
		if offHeap {
			mapped := 0
			for _, c := range s.arena.chunks {
				if c != nil && c.mapped {
					mapped += cap(c.buf)
				}
			}
			require.Equal(t, int64(mapped), s.arena.mapped, "the chunks mapped are counted")
		}
		for _, r := range reads {
			require.Equal(t, r.want, string(r.raw), "a slice read earlier changed")
		}
		app := fmt.Sprintf("a-%d", rng.IntN(50))
		for _, q := range []struct {
			ns  string
			sel string
		}{{"", "app=" + app}, {"ns-1", ""}, {"ns-2", "app in (" + app + ",a-0)"}, {"", "app!=" + app}} {
			l, err := labels.Parse(q.sel)
			require.NoError(t, err)
			got, err := s.list(q.ns, l, fields.Everything())
			require.NoError(t, err)
			var want, gotS []string
			for _, o := range model {
				if (q.ns == "" || o.ns == q.ns) && l.Matches(labels.Set{"app": o.app}) {
					want = append(want, o.raw)
				}
			}
			for _, g := range got {
				gotS = append(gotS, string(g))
			}
			slices.Sort(want)
			slices.Sort(gotS)
			require.Equal(t, want, gotS, "%+v", q)
		}
	}
	assert.Positive(t, s.arena.compactions)
	// Everything deleted: no chunk but the current one, no set left.
	for key := range model {
		require.NoError(t, s.Delete(cache.DeletedFinalStateUnknown{Key: key}))
	}
	assert.Equal(t, 0, s.size())
	assert.Equal(t, 0, s.arena.used)
	assert.Empty(t, s.spaces)
	assert.Empty(t, s.byLabel)
	live := 0
	for _, c := range s.arena.chunks {
		if c != nil {
			live++
		}
	}
	assert.LessOrEqual(t, live, 1)
	// Closed: the memory is given back, and reads fail rather than find
	// nothing.
	require.NoError(t, s.Add(&cachedObject{namespace: "ns", name: "p", raw: []byte(`{}`)}))
	s.close()
	assert.Zero(t, s.arena.mapped)
	_, _, err := s.get("ns", "p")
	assert.ErrorIs(t, err, errStoreClosed)
	_, err = s.list("", labels.Everything(), fields.Everything())
	assert.ErrorIs(t, err, errStoreClosed)
	require.NoError(t, s.Add(&cachedObject{namespace: "ns", name: "q", raw: []byte(`{}`)}))
	assert.Zero(t, s.arena.mapped)
}

// TestObjectStore_updateOfFieldsNotKept: an update whose kept JSON is the
// same writes nothing.
func TestObjectStore_updateOfFieldsNotKept(t *testing.T) {
	s := newObjectStore(nil)
	raw := []byte(`{"metadata":{"name":"p","namespace":"ns"}}`)
	require.NoError(t, s.Add(&cachedObject{namespace: "ns", name: "p", raw: raw}))
	before := s.arena.used + s.arena.waste
	require.NoError(t, s.Update(&cachedObject{namespace: "ns", name: "p", raw: slices.Clone(raw)}))
	assert.Equal(t, before, s.arena.used+s.arena.waste)
	got, ok, err := s.GetByKey("ns/p")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, string(raw), string(got.(*cachedObject).raw))
	assert.Equal(t, []string{"ns/p"}, s.ListKeys())
	require.NoError(t, s.Replace(nil, ""))
	assert.Equal(t, 0, s.size())
}

// TestObjectStore_unreachableGivesBack: a store nobody refers to gives its
// chunks back (a Cluster dropped after Close); Replace gives back the
// chunks it replaces.
func TestObjectStore_unreachableGivesBack(t *testing.T) {
	if !offHeap {
		t.Skip("chunks are on the Go heap here")
	}
	var a *arena
	func() {
		s := newObjectStore(nil)
		a = s.arena
		for i := range 2000 {
			raw := fmt.Sprintf(`{"metadata":{"name":"p-%d"},"pad":%q}`, i, strings.Repeat("x", 500))
			require.NoError(t, s.Add(&cachedObject{namespace: "ns", name: fmt.Sprintf("p-%d", i), raw: []byte(raw)}))
		}
		require.Greater(t, s.arena.mapped, int64(2*arenaChunkSize))
		require.NoError(t, s.Replace([]any{&cachedObject{namespace: "ns", name: "q", raw: []byte(`{"metadata":{"name":"q"}}`)}}, ""))
		assert.Equal(t, int64(arenaChunkSize), s.arena.mapped, "one chunk left after Replace")
		raw, ok, err := s.get("ns", "q")
		require.NoError(t, err)
		require.True(t, ok)
		assert.JSONEq(t, `{"metadata":{"name":"q"}}`, string(raw))
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		return a.released.Load()
	}, 5*time.Second, 10*time.Millisecond)
}
