package scenarios

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// monitorAuditUser submits TestMonitorAuditLog's Pods; the API server's
// audit policy records its requests (level Metadata).
const monitorAuditUser = "monitor-audit"

// webhookMonitorAudit labels TestMonitorAuditLog's namespace.
const webhookMonitorAudit = "monitor-audit"

// TestMonitorAuditLog: a webhook in monitor mode admits a Pod that claims
// someone else's identity; kube-apiserver records the webhook's audit
// annotations in its audit log, and `audit --audit-log` finds the Pod
// there, with its user, verb, the answer and the rule, beside a dry run
// and without the Pod the webhook admitted as it should.
func TestMonitorAuditLog(t *testing.T) {
	start(t)
	ctx := t.Context()
	ns, err := createNamespace(ctx, client(admin), t.Name(), map[string]string{webhookLabel: webhookMonitorAudit})
	require.NoError(t, err)
	settings := filepath.Join(e2e.cluster.Dir, "settings-monitor-audit.yaml")
	require.NoError(t, os.WriteFile(settings, []byte("{}\n"), 0o600))
	wh, err := e2e.cluster.StartWebhook(ctx, cluster.WebhookOptions{
		Name: "serve-monitor-audit", Binary: e2e.serveBinary, SettingsFile: settings, ExtraArgs: []string{"--monitor"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, wh.Stop()) })
	mwc, err := e2e.registerWebhook(ctx, "yunikorn-userinfo-e2e-monitor-audit", wh, webhookMonitorAudit)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client(admin).AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), mwc.Name, metav1.DeleteOptions{})
	})
	waitCalled(t, wh, ns)

	forCarol := map[string]string{annotationKey: `{"user":"carol","groups":["dev"]}`}
	cs := client(monitorAuditUser)
	p, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("as-carol", forCarol), metav1.CreateOptions{})
	require.NoError(t, err, "monitor mode admits what it would refuse")
	assert.Equal(t, forCarol[annotationKey], p.Annotations[annotationKey], "admitted as sent")
	_, err = cs.CoreV1().Pods(ns).Create(ctx, newPod("as-carol-dry", forCarol), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	own, err := cs.CoreV1().Pods(ns).Create(ctx, newPod("own", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Contains(t, own.Annotations[annotationKey], `"user":"`+monitorAuditUser+`"`, "recorded, not a refusal")

	// The audit log is written in blocking mode: each event is on disk
	// before the request is answered.
	out, progress := runCLI(t, "audit", "--audit-log", e2e.cluster.AuditLogPath(), "-n", ns, "-o", "json")
	t.Logf("audit --audit-log:\n%s\n%s", out, progress)
	var res struct {
		Admissions []struct {
			Verb, Resource, Namespace, Name, User, Webhook, Rule, Claimed string
			Code                                                          int
			DryRun                                                        bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Admissions, 2, "the forged Pod and its dry run, not the user's own Pod")
	for i, name := range []string{"as-carol", "as-carol-dry"} {
		a := res.Admissions[i]
		assert.Equal(t, "create", a.Verb)
		assert.Equal(t, "pods", a.Resource)
		assert.Equal(t, ns, a.Namespace)
		assert.Equal(t, name, a.Name)
		assert.Equal(t, monitorAuditUser, a.User)
		assert.Equal(t, forCarol[annotationKey], a.Claimed)
		assert.Equal(t, "create: present, submitter not allowed", a.Rule)
		assert.Equal(t, 201, a.Code)
		assert.Equal(t, i == 1, a.DryRun)
		assert.NotEmpty(t, a.Webhook)
	}
}
