package registration

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParseRefs(t *testing.T) {
	t.Parallel()
	refs, err := ParseRefs("--watch-registration", []string{"mutating/a", "validating/b"})
	require.NoError(t, err)
	assert.Equal(t, []Ref{{KindMutating, "a"}, {KindValidating, "b"}}, refs)
	for in, want := range map[string]string{
		"a":             "want mutating/NAME or validating/NAME",
		"mutating/":     "want mutating/NAME or validating/NAME",
		"webhook/a":     `the kind must be mutating or validating, got "webhook"`,
		"mutating/a/b":  "has no slash",
		"Validating/ab": `got "Validating"`,
	} {
		_, err := ParseRefs("--watch-registration", []string{in})
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
		assert.Contains(t, err.Error(), "invalid --watch-registration", in)
	}
}

func policy(p admissionregistrationv1.FailurePolicyType) *admissionregistrationv1.FailurePolicyType {
	return &p
}

// TestWatcher follows a first install: the configurations registered with
// Ignore, then the registration gate setting Fail, then an uninstall.
func TestWatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "ui"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "user-info.example", FailurePolicy: policy(admissionregistrationv1.Ignore)}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "ui"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "twin.example"}}}, // unset: Fail
	)
	w := New(client, []Ref{{KindMutating, "ui"}, {KindValidating, "ui"}}, 0, nil, "yunikorn_userinfo_")
	reg := prometheus.NewRegistry()
	for _, c := range w.Collectors() {
		require.NoError(t, reg.Register(c))
	}
	w.Poll(ctx)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP yunikorn_userinfo_registration_failure_policy `+helpOf(t, reg, "yunikorn_userinfo_registration_failure_policy")+`
# TYPE yunikorn_userinfo_registration_failure_policy gauge
yunikorn_userinfo_registration_failure_policy{configuration="ui",kind="mutating",policy="Ignore",webhook="user-info.example"} 1
yunikorn_userinfo_registration_failure_policy{configuration="ui",kind="validating",policy="Fail",webhook="twin.example"} 1
`), "yunikorn_userinfo_registration_failure_policy"))

	// The gate sets Fail: the Ignore series goes.
	m, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "ui", metav1.GetOptions{})
	require.NoError(t, err)
	m.Webhooks[0].FailurePolicy = policy(admissionregistrationv1.Fail)
	_, err = client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{})
	require.NoError(t, err)
	w.Poll(ctx)
	assert.Equal(t, 1.0, testutil.ToFloat64(w.policy.WithLabelValues(KindMutating, "ui", "user-info.example", "Fail")))
	assert.Equal(t, 2, testutil.CollectAndCount(w.policy), "no Ignore series left")

	// Uninstalled: no series, and the reads say why.
	require.NoError(t, client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "ui", metav1.DeleteOptions{}))
	w.Poll(ctx)
	assert.Equal(t, 1, testutil.CollectAndCount(w.policy))
	assert.Equal(t, 1.0, testutil.ToFloat64(w.reads.WithLabelValues("not_found")))
	assert.Equal(t, 5.0, testutil.ToFloat64(w.reads.WithLabelValues("ok")))
}

// TestWatcher_boundedSeries: a configuration with many webhooks exports at
// most maxWebhooks series.
func TestWatcher_boundedSeries(t *testing.T) {
	t.Parallel()
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "many"}}
	for i := range 100 {
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: strings.Repeat("w", i+1)})
	}
	w := New(fake.NewClientset(c), []Ref{{KindValidating, "many"}}, 0, nil, "p_")
	w.Poll(context.Background())
	assert.Equal(t, maxWebhooks, testutil.CollectAndCount(w.policy))
}

func helpOf(t *testing.T, reg *prometheus.Registry, name string) string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	t.Fatalf("%s not gathered", name)
	return ""
}
