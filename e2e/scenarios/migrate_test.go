package scenarios

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// webhookMigrate labels the namespaces of the webhook that runs with the
// settings migrate produced.
const webhookMigrate = "migrate"

// TestYuniKornAdmissionMigrate: an operator of YuniKorn's own admission
// controller converts its configuration, as it is stored in the API server
// (yunikorn-defaults and yunikorn-configs, with YuniKorn's string values
// and a trailing comma), with `migrate --kubeconfig`, and serves the
// result unchanged: the submitter is recorded, the front-end and the group
// that YuniKorn's configuration allows may supply another user's identity,
// anyone else is refused.
func TestYuniKornAdmissionMigrate(t *testing.T) {
	start(t)
	ctx := t.Context()
	admin := client(admin)

	// YuniKorn's ConfigMaps in a namespace of their own: the scheduler's
	// (namespace yunikorn) are left alone.
	ykNS, err := createNamespace(ctx, admin, t.Name()+"-yunikorn", nil)
	require.NoError(t, err)
	configMaps := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-defaults"}, Data: map[string]string{
			"admissionController.accessControl.externalGroups": "^platform-admins$,",
			"admissionController.accessControl.externalUsers":  "^retired-gateway$",
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "yunikorn-configs"}, Data: map[string]string{
			"admissionController.accessControl.bypassAuth":       "false",
			"admissionController.accessControl.trustControllers": "true",
			"admissionController.accessControl.externalUsers":    "^" + livy + "$,",
			"admissionController.filtering.bypassNamespaces":     "^kube-system$",
			"service.policyGroup":                                "queues",
		}},
	}
	for _, cm := range configMaps {
		_, err := admin.CoreV1().ConfigMaps(ykNS).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err, "create ConfigMap %s", cm.Name)
	}

	kubeconfig, err := e2e.cluster.WriteKubeconfig("admin")
	require.NoError(t, err)
	cmdCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(cmdCtx, e2e.serveBinary, "migrate", "--kubeconfig", kubeconfig, "-n", ykNS)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "migrate: %s", stderr.String())
	t.Logf("migrate printed:\n%s\non stderr:\n%s", stdout.String(), stderr.String())

	// The report: a line for every key, with what became of it.
	report := strings.Split(stderr.String(), "\n")
	for _, want := range []string{
		"migrate: " + ykNS + "/yunikorn-defaults and " + ykNS + "/yunikorn-configs",
		`admissionController.accessControl.bypassAuth: mapped: "false" -> bypassAuth: false`,
		`admissionController.accessControl.trustControllers: mapped: "true" -> trustControllers: true`,
		"admissionController.accessControl.systemUsers: differs: not set: ",
		`admissionController.accessControl.externalUsers: mapped: "^livy$," -> externalUsers: ["^livy$"]`,
		"admissionController.accessControl.externalUsers: differs: YuniKorn skips 1 empty piece(s)",
		`admissionController.accessControl.externalGroups: mapped: "^platform-admins$," -> externalGroups: ["^platform-admins$"] (from yunikorn-defaults)`,
		`admissionController.filtering.bypassNamespaces: mapped: "^kube-system$" -> scheduling.bypassNamespaces: ["^kube-system$"]`,
		`service.policyGroup: not mapped: "queues": `,
	} {
		assert.Truef(t, hasLinePrefix(report, want), "no report line starting %q", want)
	}

	// The settings: typed, YuniKorn's comma strings as arrays.
	var migrated map[string]any
	require.NoError(t, yaml.Unmarshal(stdout.Bytes(), &migrated))
	assert.Equal(t, map[string]any{
		"bypassAuth": false, "trustControllers": true,
		"externalUsers": []any{"^livy$"}, "externalGroups": []any{"^platform-admins$"},
		// The filtering keys become scheduling: the policy replaces the
		// admission controller's other jobs too.
		"scheduling": map[string]any{"bypassNamespaces": []any{"^kube-system$"}},
	}, migrated)

	settingsFile := filepath.Join(e2e.cluster.Dir, "settings-migrated.yaml")
	require.NoError(t, os.WriteFile(settingsFile, stdout.Bytes(), 0o600))
	startWebhookFromFile(t, webhookMigrate, webhookMigrate, settingsFile, "")
	ns := newNamespace(t, webhookMigrate)

	carol := `{"user":"carol","groups":["analysts"]}`
	forCarol := map[string]string{annotationKey: carol}
	stored := func(t *testing.T, name string) string {
		p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return p.Annotations[annotationKey]
	}
	t.Run("submitter recorded", func(t *testing.T) {
		_, err := client(alice).CoreV1().Pods(ns).Create(ctx, newPod("alice-own", nil), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, e2e.identity[alice].annotation(), stored(t, "alice-own"))
	})
	t.Run("external user supplies", func(t *testing.T) {
		_, err := client(livy).CoreV1().Pods(ns).Create(ctx, newPod("livy-for-carol", forCarol), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, carol, stored(t, "livy-for-carol"), "the value livy supplied is kept")
	})
	t.Run("external group from yunikorn-defaults supplies", func(t *testing.T) {
		pat := impersonatingClient(t, "pat", "platform-admins", "dev")
		_, err := pat.CoreV1().Pods(ns).Create(ctx, newPod("pat-for-carol", forCarol), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, carol, stored(t, "pat-for-carol"))
	})
	t.Run("others refused", func(t *testing.T) {
		_, err := client(bob).CoreV1().Pods(ns).Create(ctx, newPod("bob-for-carol", forCarol), metav1.CreateOptions{})
		requireRefused(t, err, workloadsWebhook, e2e.identity[bob].notAllowed())
	})
}

func hasLinePrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
