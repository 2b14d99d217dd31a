package audit

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const restrictedQueues = `
partitions:
  - name: default
    placementrules:
      - name: provided
      - name: tag
        value: namespace.parentqueue
    queues:
      - name: root
        submitacl: ' '
        queues:
          - name: batch
            submitacl: alice
          - name: fallback
            submitacl: ' '
            queues:
              - name: team
                submitacl: ' dev'
`

// Pods whose user may submit to no queue they would be placed in, under
// the queues.yaml of yunikorn-configs (over yunikorn-defaults).
func TestRun_queues(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Annotations: map[string]string{annotationParent: "root.fallback.team"}}}
	cms := []runtime.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "yk", Name: "yunikorn-defaults"}, Data: map[string]string{"queues.yaml": "not: [yaml"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "yk", Name: "yunikorn-configs"}, Data: map[string]string{"queues.yaml": restrictedQueues}},
	}
	inQueue := func(p *corev1.Pod, q string) *corev1.Pod {
		p.Labels = map[string]string{"queue": q}
		return p
	}
	objs := append(cms, ns,
		inQueue(pod("team", "alice-batch", ui("alice", "x"), nil, 0), "root.batch"),
		inQueue(pod("team", "bob-batch", ui("bob", "x"), nil, 1), "root.batch"),
		pod("team", "dev-team", ui("dan", "dev"), nil, 2),
		pod("team", "ops-team", ui("olga", "ops"), nil, 3),
		pod("team", "bad-name", ui("bad name", "dev"), nil, 4),
	)
	cs := fake.NewClientset(objs...)
	nsGets := 0
	cs.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		nsGets++
		return false, nil, nil
	})
	part, from, err := LoadQueues(t.Context(), cs, QueueConfig{Namespace: "yk"})
	require.NoError(t, err)
	assert.Equal(t, "yk/yunikorn-configs queues.yaml", from)
	r, err := Run(t.Context(), cs, Options{Queues: part})
	require.NoError(t, err)
	got := map[string]string{}
	for _, f := range r.Findings {
		if f.Rule == RuleQueue {
			got[f.Resource.Name] = f.Message
		}
	}
	require.Len(t, got, 3, "%v", got)
	assert.Contains(t, got["bob-batch"], `user "bob" with groups [x]`)
	assert.Contains(t, got["bob-batch"], `(queue "root.batch" requested)`)
	assert.Contains(t, got["ops-team"], "no placement rule gives a queue it may submit to")
	assert.Contains(t, got["bad-name"], "invalid username")
	assert.Equal(t, 1, nsGets, "the namespace is read once")

	// Without a configuration: YuniKorn's default lets everyone in, but
	// still refuses a user name it cannot use.
	part, from, err = LoadQueues(t.Context(), fake.NewClientset(), QueueConfig{})
	require.NoError(t, err)
	assert.Contains(t, from, "built-in default")
	r, err = Run(t.Context(), cs, Options{Queues: part})
	require.NoError(t, err)
	for _, f := range r.Findings {
		if f.Rule == RuleQueue {
			assert.Equal(t, "bad-name", f.Resource.Name, f.Message)
		}
	}

	// A configuration YuniKorn would refuse is an error, not silence.
	bad := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "yunikorn", Name: "yunikorn-configs"}, Data: map[string]string{"queues.yaml": "partitions: 7"}})
	_, _, err = LoadQueues(t.Context(), bad, QueueConfig{})
	require.ErrorContains(t, err, "the queue configuration (yunikorn/yunikorn-configs queues.yaml) is not one YuniKorn would load")
	_, _, err = LoadQueues(t.Context(), cs, QueueConfig{Namespace: "yk", Partition: "gpu"})
	require.ErrorContains(t, err, `has no partition "gpu"`)

	// binaryData as the shim reads it: a ".gz" key inflated, over data.
	gz := func(text string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		_, err := w.Write([]byte(text))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		return b.Bytes()
	}
	compressed := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "yk", Name: "yunikorn-configs"},
		Data:       map[string]string{"queues.yaml": "partitions: 7"},
		BinaryData: map[string][]byte{"queues.yaml.gz": gz(restrictedQueues)}})
	part, from, err = LoadQueues(t.Context(), compressed, QueueConfig{Namespace: "yk"})
	require.NoError(t, err)
	assert.Equal(t, "yk/yunikorn-configs (binaryData queues.yaml.gz) queues.yaml", from)
	r, err = Run(t.Context(), cs, Options{Queues: part})
	require.NoError(t, err)
	n := 0
	for _, f := range r.Findings {
		if f.Rule == RuleQueue {
			n++
		}
	}
	assert.Equal(t, 3, n, "the compressed configuration is the one applied")
	// One that inflates past the bound is an error naming it.
	bomb := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "yk", Name: "yunikorn-configs"},
		BinaryData: map[string][]byte{"queues.yaml.gz": gz(strings.Repeat("#", 16<<20+1))}})
	_, _, err = LoadQueues(t.Context(), bomb, QueueConfig{Namespace: "yk"})
	require.ErrorContains(t, err, "yk/yunikorn-configs (binaryData queues.yaml.gz): binaryData queues.yaml.gz inflates to more than 16 MiB")
}
