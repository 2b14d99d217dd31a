package monitoring

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// prometheusOwn are the series Prometheus makes itself for every target,
// not exported by serve: up (whether the scrape succeeded).
var prometheusOwn = map[string]bool{"up": true}

// renderedChart reads the documents of MONITORING_CHART.
func renderedChart(t *testing.T) []map[string]any {
	t.Helper()
	path := os.Getenv("MONITORING_CHART")
	if path == "" {
		t.Fatal("MONITORING_CHART is not set: run make test-monitoring (it renders the chart with the monitoring values)")
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var docs []map[string]any
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		var m map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(d), &m))
		if m != nil {
			docs = append(docs, m)
		}
	}
	return docs
}

func find(t *testing.T, docs []map[string]any, kind, nameSuffix string) map[string]any {
	t.Helper()
	for _, d := range docs {
		md, _ := d["metadata"].(map[string]any)
		if d["kind"] == kind && strings.HasSuffix(fmt.Sprint(md["name"]), nameSuffix) {
			return d
		}
	}
	t.Fatalf("the rendered chart has no %s named *%s", kind, nameSuffix)
	return nil
}

// ruleExprs loads the PrometheusRule's spec with rulefmt, as promtool
// check rules does (a rule file is what a PrometheusRule's spec is), and
// returns its expressions by alert name.
func ruleExprs(t *testing.T, docs []map[string]any) map[string]string {
	t.Helper()
	spec, err := yaml.Marshal(find(t, docs, "PrometheusRule", "")["spec"])
	require.NoError(t, err)
	// Legacy name validation, the strictest: the rules then load in any
	// Prometheus, 2.x included.
	groups, errs := rulefmt.Parse(spec, false, model.LegacyValidation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "rulefmt: %v", errs)
	out := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "every rule is an alert")
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// dashboardExprs returns the dashboard's queries (panels and template
// variables' label_values metrics), by panel title, with Grafana's
// variables replaced by values PromQL accepts.
func dashboardExprs(t *testing.T, docs []map[string]any) map[string]string {
	t.Helper()
	data := find(t, docs, "ConfigMap", "-dashboard")["data"].(map[string]any)
	require.Len(t, data, 1)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query any
			}
		}
	}
	for _, v := range data {
		require.NoError(t, json.Unmarshal([]byte(v.(string)), &dash))
	}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "${datasource}", "x")
	out := map[string]string{}
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for i, tg := range p.Targets {
			out[fmt.Sprintf("panel %q query %d", p.Title, i)] = grafana.Replace(tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *\w+\)$`)
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue
		}
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		require.NotNil(t, m, "variable %s: label_values(METRIC, LABEL)", v.Name)
		out["variable "+v.Name] = m[1]
	}
	require.NotEmpty(t, out)
	return out
}

// metricNames parses expr with Prometheus's PromQL parser and returns the
// metric names its selectors name; a selector without a name fails.
func metricNames(t *testing.T, what, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	require.NoError(t, err, "%s: %s", what, expr)
	var names []string
	for _, path := range parser.ExtractSelectors(e) {
		name := ""
		for _, m := range path {
			if m.Name == "__name__" {
				name = m.Value
			}
		}
		require.NotEmpty(t, name, "%s: every selector names its metric: %s", what, expr)
		names = append(names, name)
	}
	require.NotEmpty(t, names, "%s: %s", what, expr)
	return names
}

func TestRulesAndDashboardNameExportedMetrics(t *testing.T) {
	docs := renderedChart(t)
	exported := serveMetrics(t)
	check := func(kind string, exprs map[string]string) {
		for what, expr := range exprs {
			for _, name := range metricNames(t, what, expr) {
				assert.True(t, exported[name] || prometheusOwn[name], "%s %s: serve exports no metric %s", kind, what, name)
			}
		}
	}
	rules := ruleExprs(t, docs)
	for _, alert := range []string{"YunikornUserinfoDown", "YunikornUserinfoNotReady", "YunikornUserinfoSettingsRefused",
		"YunikornUserinfoSettingsDiffer", "YunikornUserinfoRefusalRate",
		"YunikornUserinfoWouldRefuse", "YunikornUserinfoCertificateExpiry", "YunikornUserinfoCacheNotSynced",
		"YunikornUserinfoGuestTraps", "YunikornUserinfoRegisteredFailOpen"} {
		assert.Contains(t, rules, alert)
	}
	check("alert", rules)
	check("dashboard", dashboardExprs(t, docs))
}

// TestMetricNamesFailOnARename: the check itself catches a name serve
// does not export.
func TestMetricNamesFailOnARename(t *testing.T) {
	names := metricNames(t, "x", `sum(rate(yunikorn_userinfo_admission_total{stage="mutate"}[5m])) / on() group_left up`)
	sort.Strings(names)
	assert.Equal(t, []string{"up", "yunikorn_userinfo_admission_total"}, names)
	exported := map[string]bool{"yunikorn_userinfo_admissions_total": true}
	assert.False(t, exported[names[1]])
}

// serveMetrics runs serve (YUNIKORN_USERINFO_BINARY) on 127.0.0.1, makes
// it export every metric family (admissions at both stages, a refusal in
// monitor mode, a host capability call, a settings and a TLS reload, its
// webhook configurations read from a fake API server), and returns the
// names of the samples on its /metrics.
func serveMetrics(t *testing.T) map[string]bool {
	t.Helper()
	binary := os.Getenv("YUNIKORN_USERINFO_BINARY")
	if binary == "" {
		t.Fatal("YUNIKORN_USERINFO_BINARY is not set: run make test-monitoring (it builds serve)")
	}
	dir := t.TempDir()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/mutatingwebhookconfigurations/ui") {
			fmt.Fprint(w, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"ui"},`+
				`"webhooks":[{"name":"workloads.user-info.yunikorn.apache.org","failurePolicy":"Ignore"}]}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(api.Close)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`{"apiVersion":"v1","kind":"Config",`+
		`"clusters":[{"name":"c","cluster":{"server":"`+api.URL+`"}}],"users":[{"name":"u","user":{}}],`+
		`"contexts":[{"name":"c","context":{"cluster":"c","user":"u"}}],"current-context":"c"}`), 0o600))
	settingsFile := filepath.Join(dir, "settings.json")
	require.NoError(t, os.WriteFile(settingsFile, []byte(`{"trustRBAC":true}`), 0o600))
	contextDir := filepath.Join(dir, "cluster")
	require.NoError(t, os.Mkdir(contextDir, 0o700))
	certDir := filepath.Join(dir, "tls")
	listen, metricsListen := freePort(t), freePort(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "serve", "--self-signed", "--self-signed-dir", certDir,
		"--listen", listen, "--metrics-listen", metricsListen, "--log-level", "debug",
		"--settings-path", settingsFile, "--settings-reload-interval", "100ms", "--cert-reload-interval", "100ms",
		"--context-dir", contextDir, "--monitor", "--kubeconfig", kubeconfig,
		"--watch-registration", "mutating/ui,validating/ui", "--registration-interval", "100ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	page := func() string {
		resp, err := http.Get("http://" + metricsListen + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	require.Eventually(t, func() bool { return strings.Contains(page(), "\nyunikorn_userinfo_ready 1\n") },
		time.Minute, 50*time.Millisecond, "serve ready; stderr: %s", &stderr)

	ca, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	// alice claims bob: with trustRBAC the policy asks the cluster (a host
	// call) and refuses; monitor mode admits it.
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"operation":"CREATE","namespace":"ns","name":"p","userInfo":{"username":"alice"},"object":{"apiVersion":"v1","kind":"Pod",` +
		`"metadata":{"name":"p","namespace":"ns","annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"bob\"}"}},` +
		`"spec":{"containers":[{"name":"c","image":"i"}]}}}}`
	for _, path := range []string{"/mutate", "/validate"} {
		resp, err := client.Post("https://"+listen+path, "application/json", strings.NewReader(review))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Contains(t, string(body), `"allowed":true`, "monitor mode admits: %s", body)
	}
	require.NoError(t, os.WriteFile(settingsFile, []byte(`{"trustRBAC":false}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(certDir, "tls.crt"), []byte("not a certificate"), 0o600))

	want := []string{"yunikorn_userinfo_admissions_total", "yunikorn_userinfo_monitor_would_refuse_total",
		"yunikorn_userinfo_host_calls_total", "yunikorn_userinfo_settings_reloads_total", "yunikorn_userinfo_tls_reloads_total",
		"yunikorn_userinfo_registration_failure_policy", "yunikorn_userinfo_policy_log_lines_total"}
	names := map[string]bool{}
	require.Eventually(t, func() bool {
		names = sampleNames(page())
		return !slices.ContainsFunc(want, func(n string) bool { return !names[n] })
	}, 30*time.Second, 50*time.Millisecond, "every family exported; stderr: %s", &stderr)
	return names
}

// sampleNames are the names of the samples of an exposition page, as a
// query names them (histograms as NAME_bucket, NAME_sum, NAME_count).
func sampleNames(page string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(page, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
