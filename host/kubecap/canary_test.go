package kubecap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// canarySource is an API server for one namespace of Pods as client-go's
// reflector sees it: a paged list, and a watch that streams the initial
// list (ending with the bookmark that says so) when asked to.
type canarySource struct {
	dynamic.ResourceInterface // only List and Watch are called
	pods                      int

	mu        sync.Mutex
	lists     []metav1.ListOptions
	watches   []metav1.ListOptions
	watchers  []*watch.FakeWatcher
	unsupport bool // declares no watch-list semantics, as fake clients do
}

// IsWatchListSemanticsUnSupported is what client-go's watchlist package
// asks a client.
func (s *canarySource) IsWatchListSemanticsUnSupported() bool { return s.unsupport }

func (s *canarySource) pod(i int) unstructured.Unstructured {
	return unstructured.Unstructured{Object: bigPod("ns", fmt.Sprintf("p-%d", i), map[string]any{"applicationId": "a"}, 64)}
}

func (s *canarySource) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	s.mu.Lock()
	s.lists = append(s.lists, opts)
	s.mu.Unlock()
	l := &unstructured.UnstructuredList{}
	l.SetResourceVersion("100")
	for i := range s.pods {
		l.Items = append(l.Items, s.pod(i))
	}
	return l, nil
}

func (s *canarySource) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFakeWithChanSize(s.pods+2, false)
	s.mu.Lock()
	s.watches = append(s.watches, opts)
	s.watchers = append(s.watchers, w)
	s.mu.Unlock()
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		for i := range s.pods {
			p := s.pod(i)
			w.Add(&p)
		}
		b := &unstructured.Unstructured{}
		b.SetAPIVersion("v1")
		b.SetKind("Pod")
		b.SetResourceVersion("100")
		b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		w.Action(watch.Bookmark, b)
	}
	return w, nil
}

// clientGoVersion is the client-go the module requires (test binaries
// carry no module list).
func clientGoVersion() string {
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err == nil {
		for line := range strings.Lines(string(data)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/client-go" {
				return f[1]
			}
		}
	}
	return "(unknown)"
}

// TestClientGoCanary runs the informer serve builds (scopeInformer) with
// client-go's own reflector and RealFIFO against a source that can stream
// its first list, and checks that the first sync takes the path the
// memory figures depend on: every object written straight into the store
// (firstListWatch, or pagedListWatch for a client without watch-list),
// none carried whole through client-go's queue. A client-go upgrade that
// stops asking for streamed initial events, drops the bookmark, rejects
// the stored markers or bypasses the transform fails here, by name,
// instead of silently doubling the first sync's peak memory.
func TestClientGoCanary(t *testing.T) {
	const pods = 50
	for _, tc := range []struct {
		name      string
		unsupport bool
	}{
		{"streamed first list", false},
		{"paged first list", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &canarySource{pods: pods, unsupport: tc.unsupport}
			store := newObjectStore(newLabelIndex(podSpec.LabelIndex))
			t.Cleanup(store.close)
			inf, direct := scopeInformer(src, src, newKeeper(podResource, podFields), store, "pods in namespace ns")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			done := make(chan struct{})
			go func() { defer close(done); inf.RunWithContext(ctx) }()
			require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced),
				"client-go %s: the informer never synced against a source it could read", clientGoVersion())
			cancel()
			<-done

			src.mu.Lock()
			defer src.mu.Unlock()
			v := clientGoVersion()
			if tc.unsupport {
				require.NotEmpty(t, src.lists, "client-go %s: no list for a client without watch-list semantics", v)
				assert.Equal(t, int64(listPage), src.lists[0].Limit, "client-go %s: the first list is not paged", v)
			} else {
				require.NotEmpty(t, src.watches, "client-go %s: no watch", v)
				first := src.watches[0]
				require.True(t, first.SendInitialEvents != nil && *first.SendInitialEvents,
					"client-go %s no longer streams the first list (WatchListClient default or ToListWatcherWithWatchListSemantics changed): serve's first sync would fall back to lists; see pagedListWatch", v)
				assert.True(t, first.AllowWatchBookmarks, "client-go %s: no bookmarks on the streamed list", v)
				assert.Empty(t, src.lists, "client-go %s listed although it streamed", v)
			}
			assert.Equal(t, pods, store.size(), "client-go %s: every object in the store", v)
			assert.Equal(t, int64(pods), direct.Load(),
				"client-go %s: the first sync carried objects through its queue instead of writing them into the store (stored markers rejected, transform bypassed, or the initial-events bookmark changed)", v)
			raw, found, err := store.get("ns", "p-7")
			require.NoError(t, err)
			require.True(t, found)
			assert.Contains(t, string(raw), `"applicationId":"a"`)
			assert.NotContains(t, string(raw), "managedFields", "pruned to the declaration")
		})
	}
}
