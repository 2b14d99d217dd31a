package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func TestAudit_argumentErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit"}, "nothing to audit: give --kubeconfig, or --audit-log"},
		{[]string{"audit", "--kubeconfig", "k", "--webhook", "w"}, "--webhook selects refusals in an audit log: give it with --audit-log"},
		{[]string{"audit", "--kubeconfig", "k", "--audit-log", "f"}, "if any flags in the group [audit-log kubeconfig] are set none of the others can be"},
		{[]string{"audit", "--audit-log", "f", "-o", "openreports"}, `invalid --output "openreports" with --audit-log: want table or json`},
		{[]string{"audit", "--audit-log", "/nonexistent/audit.log"}, "audit --audit-log: open /nonexistent/audit.log: no such file or directory"},
		{[]string{"audit", "--audit-log", "-"}, "audit --audit-log -: read the audit log: line 1: not an audit event"},
		{[]string{"audit", "--kubeconfig", "k", "-o", "yaml"}, `invalid --output "yaml": want table, json, adopt, openreports or policyreport`},
		{[]string{"audit", "--kubeconfig", "k", "--apply"}, "--apply writes reports: give it with -o openreports or -o policyreport"},
		{[]string{"audit", "--kubeconfig", "k", "--page-size", "0"}, "invalid --page-size 0: want a positive number"},
		{[]string{"audit", "--kubeconfig", "k", "--yunikorn", "yunikorn-service:9080"}, `invalid --yunikorn: YuniKorn's REST API URL "yunikorn-service:9080": want http:// or https:// and a host`},
		{[]string{"audit", "--kubeconfig", "k", "--completing-timeout", "-1s"}, "invalid --completing-timeout -1s: want a duration of zero or more such as 30s"},
		{[]string{"audit", "extra"}, `unknown command "extra" for "yunikorn-userinfo audit"`},
	} {
		res := runCLIWith(t, nil, "not json", tc.args...)
		assert.Equal(t, 1, res.code, "%v", tc.args)
		assert.Empty(t, res.stdout)
		assert.True(t, strings.HasPrefix(res.stderr, "Error: "+tc.want), "%v: %s", tc.args, res.stderr)
	}
}

// fakeAPIServer answers the audit's lists: Pods in pages of the Limit
// asked for (with Continue tokens), every other kind empty, and records
// PolicyReports written to it.
func fakeAPIServer(t *testing.T, pods []string) (kubeconfig string, written func() map[string]map[string]any, limits func() []string) {
	t.Helper()
	var mu sync.Mutex
	reports := map[string]map[string]any{}
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports" && r.Method == http.MethodPost:
			var obj map[string]any
			require.NoError(t, json.NewDecoder(r.Body).Decode(&obj))
			reports["(cluster)"] = obj
			w.WriteHeader(http.StatusCreated)
			require.NoError(t, json.NewEncoder(w).Encode(obj))
		case r.URL.Path == "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports/yunikorn-userinfo-audit" && r.Method == http.MethodGet && reports["(cluster)"] != nil:
			require.NoError(t, json.NewEncoder(w).Encode(reports["(cluster)"]))
		case r.URL.Path == "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports/yunikorn-userinfo-audit" && r.Method == http.MethodDelete:
			delete(reports, "(cluster)")
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Success"}`)
		case r.URL.Path == "/apis/wgpolicyk8s.io/v1alpha2": // only this report API's CRDs are installed
			fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"wgpolicyk8s.io/v1alpha2","resources":[`+
				`{"name":"policyreports","namespaced":true,"kind":"PolicyReport","verbs":["create","get","list","update","delete"]},`+
				`{"name":"clusterpolicyreports","namespaced":false,"kind":"ClusterPolicyReport","verbs":["create","get","list","update","delete"]}]}`)
		case r.URL.Path == "/apis/example.com/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"example.com/v1","resources":[{"name":"trainers","namespaced":true,"kind":"Trainer","verbs":["list","get"]}]}`)
		case r.URL.Path == "/apis/example.com/v1/trainers":
			fmt.Fprint(w, `{"apiVersion":"example.com/v1","kind":"TrainerList","metadata":{},"items":[`+
				`{"apiVersion":"example.com/v1","kind":"Trainer","metadata":{"namespace":"a","name":"t1","uid":"t1"},"spec":{"workers":[{"template":{}}]}}]}`)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/policyreports"):
			var obj map[string]any
			require.NoError(t, json.NewDecoder(r.Body).Decode(&obj))
			ns := strings.Split(r.URL.Path, "/")[5]
			reports[ns] = obj
			w.WriteHeader(http.StatusCreated)
			require.NoError(t, json.NewEncoder(w).Encode(obj))
		case r.Method == http.MethodGet && r.URL.Path == "/apis/wgpolicyk8s.io/v1alpha2/policyreports":
			items := []map[string]any{}
			for _, rep := range reports {
				items = append(items, rep)
			}
			require.NoError(t, json.NewEncoder(w).Encode(map[string]any{"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReportList", "metadata": map[string]any{}, "items": items}))
		case r.URL.Path == "/api/v1/pods":
			seen = append(seen, r.URL.Query().Get("limit")+"/"+r.URL.Query().Get("continue"))
			var limit, start int
			fmt.Sscan(r.URL.Query().Get("limit"), &limit)
			fmt.Sscan(r.URL.Query().Get("continue"), &start)
			end := min(start+limit, len(pods))
			cont := ""
			if end < len(pods) {
				cont = fmt.Sprint(end)
			}
			fmt.Fprintf(w, `{"apiVersion":"v1","kind":"PodList","metadata":{"continue":%q},"items":[%s]}`, cont, strings.Join(pods[start:end], ","))
		case r.Method == http.MethodGet:
			fmt.Fprint(w, `{"metadata":{},"items":[]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig = writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- {name: fake, cluster: {server: "`+srv.URL+`"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: fake, context: {cluster: fake, user: u}}
current-context: fake
`)
	return kubeconfig, func() map[string]map[string]any {
			mu.Lock()
			defer mu.Unlock()
			return reports
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return seen
		}
}

func fakePod(ns, name, userInfo string) string {
	ann := ""
	if userInfo != "" {
		ann = fmt.Sprintf(`,"annotations":{"yunikorn.apache.org/user.info":%q}`, userInfo)
	}
	return fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q,"uid":%q,"labels":{"applicationId":"app"}%s},"spec":{"schedulerName":"yunikorn"}}`,
		ns, name, ns+"/"+name, ann)
}

// --completing-timeout: alice's Pod of application app finished 20 s ago,
// so YuniKorn still keeps the application hers for its default 30 s and
// bob's Pod is in it; with 10s, or 0, it is not.
func TestAudit_completingTimeout(t *testing.T) {
	t.Parallel()
	end := time.Now().Add(-20 * time.Second).UTC().Format(time.RFC3339)
	done := strings.Replace(fakePod("a", "p1", `{"user":"alice"}`), `"spec":{"schedulerName":"yunikorn"}`,
		`"spec":{"schedulerName":"yunikorn"},"status":{"phase":"Succeeded","containerStatuses":[{"name":"c","state":{"terminated":{"exitCode":0,"finishedAt":"`+end+`"}}}]}`, 1)
	kubeconfig, _, _ := fakeAPIServer(t, []string{done, fakePod("b", "p2", `{"user":"bob"}`)})
	for _, tc := range []struct {
		flag   string
		shared bool
	}{{"", true}, {"--completing-timeout=1m", true}, {"--completing-timeout=10s", false}, {"--completing-timeout=0", false}} {
		args := []string{"audit", "--kubeconfig", kubeconfig, "-q", "-o", "json"}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		res := runCLIWith(t, nil, "", args...)
		require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
		assert.Equal(t, tc.shared, strings.Contains(res.stdout, `"application-id-shared"`), "%s: %s", tc.flag, res.stdout)
	}
}

// audit against an API server: every output format, paging with
// --page-size, progress on stderr, and PolicyReports written with --apply.
func TestAudit_kubeconfig(t *testing.T) {
	t.Parallel()
	pods := []string{
		fakePod("a", "p1", `{"user":"alice"}`),
		fakePod("a", "p2", ""),
		fakePod("a", "p3", `{"user":"alice","User":"root"}`),
		fakePod("b", "p4", `{"user":"bob"}`),
		fakePod("b", "p5", `{"user":"alice"}`),
	}
	kubeconfig, written, limits := fakeAPIServer(t, pods)

	res := runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-o", "json", "--page-size", "2", "--progress-every", "2")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, []string{"2/", "2/2", "2/4"}, limits())
	var rep struct {
		Findings []struct {
			Rule     string `json:"rule"`
			Resource struct{ Namespace, Name string }
		} `json:"findings"`
		Scanned map[string]int `json:"scanned"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), res.stdout)
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Resource.Namespace+"/"+f.Resource.Name+" "+f.Rule)
	}
	assert.ElementsMatch(t, []string{"a/p2 user-info-missing", "a/p3 user-info-invalid", "b/p4 application-id-shared"}, got)
	assert.Equal(t, 5, rep.Scanned["Pod"])
	assert.Contains(t, res.stderr, "audit: Pod: 2 read, 1 findings so far\n")
	assert.Contains(t, res.stderr, "audit: Pod: 5 read in 3 pages, 5 audited")
	assert.Contains(t, res.stderr, "audit: done in ")
	assert.Contains(t, res.stderr, "audit: queue configuration: YuniKorn's built-in default (no queues.yaml in yunikorn/yunikorn-configs or yunikorn-defaults)\n")

	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-q")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Empty(t, res.stderr)
	assert.Contains(t, res.stdout, "NAMESPACE  KIND")
	assert.Contains(t, res.stdout, "3 findings and 1 cluster-wide; audited")

	// -o adopt: the bare Pod without user.info, with the command that
	// adopts it.
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-q", "-o", "adopt")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	require.Len(t, lines, 3, res.stdout)
	assert.True(t, strings.HasPrefix(lines[0], "# Pod a/p2: replace OWNER and GROUP"), lines[0])
	assert.Equal(t, `kubectl patch pod p2 -n a --type=merge -p '{"metadata":{"annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"OWNER\",\"groups\":[\"GROUP\"]}"}}}'`, lines[1])
	assert.Equal(t, "# 1 objects to adopt", lines[2])

	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-q", "-o", "policyreport")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	docs := strings.Split(strings.TrimPrefix(res.stdout, "---\n"), "---\n")
	require.Len(t, docs, 3, "two namespaces, and application app spans both")
	var a, c map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(docs[0]), &a))
	assert.Equal(t, "PolicyReport", a["kind"])
	assert.Equal(t, map[string]any{"pass": 1.0, "fail": 2.0, "warn": 0.0, "error": 0.0, "skip": 0.0}, a["summary"])
	require.NoError(t, yaml.Unmarshal([]byte(docs[2]), &c))
	assert.Equal(t, "ClusterPolicyReport", c["kind"])
	assert.Equal(t, map[string]any{"pass": 0.0, "fail": 1.0, "warn": 0.0, "error": 0.0, "skip": 0.0}, c["summary"])

	// One namespace: no ClusterPolicyReport.
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-q", "-o", "policyreport", "-n", "a")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.NotContains(t, res.stdout, "ClusterPolicyReport")

	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-q", "-o", "policyreport", "--apply")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, "2 PolicyReports written (yunikorn-userinfo-audit)\nClusterPolicyReport written (yunikorn-userinfo-audit)\n", res.stdout)
	reports := written()
	require.Len(t, reports, 3)
	assert.Equal(t, map[string]any{"pass": 1.0, "fail": 1.0, "warn": 0.0, "error": 0.0, "skip": 0.0}, reports["b"]["summary"])
	assert.Equal(t, "ClusterPolicyReport", reports["(cluster)"]["kind"])

	// OpenReports: printed with their own kinds and source; --apply on a
	// cluster without their CRDs fails before auditing, naming the CRD.
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-q", "-o", "openreports")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stdout, "apiVersion: openreports.io/v1alpha1\nkind: Report\n")
	assert.Contains(t, res.stdout, "kind: ClusterReport\n")
	assert.Contains(t, res.stdout, "\nsource: yunikorn-userinfo\n")
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-q", "-o", "openreports", "--apply")
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stderr, "audit --apply: the cluster does not serve reports.openreports.io (openreports.io/v1alpha1): install the OpenReports CRDs")
	assert.Empty(t, res.stdout)
}

// With the policy's settings, their custom kinds are audited: the
// settings are checked by the embedded policy first, a kind the server
// serves is listed and its templates judged, and one it does not serve is
// reported once and skipped.
func TestAudit_settingsWorkloads(t *testing.T) {
	t.Parallel()
	kubeconfig, written, _ := fakeAPIServer(t, []string{fakePod("a", "p1", `{"user":"alice"}`)})
	settings := `{"workloads":["jobset",{"group":"example.com","version":"v1","kind":"Trainer","resource":"trainers","paths":["spec.workers[*].template.metadata.annotations"]}]}`
	res := runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "--settings-json", settings, "--queue-check=false")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stdout, "a          Trainer  t1    user-info-missing")
	assert.Contains(t, res.stdout, "1 findings; audited")
	assert.Contains(t, res.stdout, "Trainer.example.com 1 of 1")
	assert.Contains(t, res.stdout, "not audited: JobSet.jobset.x-k8s.io (preset jobset): the API server serves jobset.x-k8s.io/v1alpha2 but no kind JobSet in it\n")
	assert.Equal(t, 1, strings.Count(res.stderr, "JobSet.jobset.x-k8s.io (preset jobset): not audited"), res.stderr)

	// A settings file, YAML, as run and serve read it; --apply writes the
	// skipped kind into the ClusterPolicyReport.
	file := writeFile(t, "settings.yaml", "workloads:\n  - jobset\n")
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-s", file, "-q", "--queue-check=false", "-o", "policyreport", "--apply")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, "1 PolicyReports written (yunikorn-userinfo-audit)\nClusterPolicyReport written (yunikorn-userinfo-audit)\n", res.stdout)
	cluster := written()["(cluster)"]
	assert.Equal(t, map[string]any{"pass": 0.0, "fail": 0.0, "warn": 0.0, "error": 0.0, "skip": 1.0}, cluster["summary"])

	// Settings the policy refuses stop the audit with its message.
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "--settings-json", `{"workloads":["nope"]}`)
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stderr, `Error: provided settings are not valid: settings.workloads[0]: unknown preset "nope"`)
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "--settings-json", `[1]`)
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stderr, "Error: read settings --settings-json: settings must be a JSON object, got an array")
	res = runCLIWith(t, nil, "", "audit", "--kubeconfig", kubeconfig, "-s", "x", "--settings-json", `{}`)
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stderr, "[settings-json settings-path] were all set")
}

// TestAudit_auditLog: audit --audit-log lists, from an API server audit
// log, the requests monitor mode admitted that the webhook would have
// refused (the events are internal/auditlog's fixture, shaped as
// kube-apiserver writes them).
func TestAudit_auditLog(t *testing.T) {
	t.Parallel()
	const log = "../../internal/auditlog/testdata/audit.log"
	res := runCLIWith(t, nil, "", "audit", "--audit-log", log, "-n", "team-a")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Equal(t, "audit: 6 lines, 1 would-be refusals admitted in monitor mode (1 persisted; the others were dry runs or failed later)\n"+
		"audit: 0 stored requests that supplied user.info asked again of the policy, 0 refused (forged, or not provable from a log)\n", res.stderr,
		"level Metadata: no request object to replay")
	assert.Equal(t, `TIME                  VERB    RESOURCE  NAMESPACE  NAME            USER   CODE  RULE
2026-11-27T09:14:02Z  create  pods      team-a     alice-as-carol  alice  201   create: present, submitter not allowed
`, res.stdout)

	data, err := os.ReadFile(log)
	require.NoError(t, err)
	res = runCLIWith(t, nil, string(data), "audit", "--audit-log", "-", "-o", "json", "-q")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stderr)
	var out struct {
		Admissions []struct {
			Verb, Resource, Namespace, Name, User, Webhook, Rule, Claimed string
			Code                                                          int
			DryRun                                                        bool
		}
		Lines int
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	assert.Equal(t, 6, out.Lines)
	require.Len(t, out.Admissions, 3)
	assert.Equal(t, `{"user":"carol","groups":["analysts"]}`, out.Admissions[1].Claimed)
	assert.Equal(t, "workloads.validate.user-info.yunikorn.apache.org", out.Admissions[2].Webhook)
	assert.True(t, out.Admissions[2].DryRun)
}

// TestAudit_auditLogReplay: audit --audit-log asks the embedded policy
// again about every stored create the log holds at level Request: bob's
// Pod carrying alice's record, made while no policy ran, is listed with
// the policy's own rule and message; alice's own value, a dry run, a
// refused create and a Pod that supplied nothing are not. The update
// whose before and after the log does not hold is counted, not judged.
// The settings given are the policy's: with livy an external user, its
// value for carol stands.
func TestAudit_auditLogReplay(t *testing.T) {
	t.Parallel()
	const log = "../../internal/auditlog/testdata/replay.log"
	res := runCLIWith(t, nil, "", "audit", "--audit-log", log, "-o", "json")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stderr, "audit: 3 stored requests that supplied user.info asked again of the policy, 2 refused")
	assert.Contains(t, res.stderr, "audit: 1 updates that may change user.info not judged")
	var out struct {
		Admissions []struct {
			Source, Verb, Name, User, Rule, Claimed, Message string
			Code                                             int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &out))
	require.Len(t, out.Admissions, 2, res.stdout)
	forged := out.Admissions[0]
	assert.Equal(t, "replay", forged.Source)
	assert.Equal(t, "bob-as-alice", forged.Name)
	assert.Equal(t, "bob", forged.User)
	assert.Equal(t, "create: present, submitter not allowed", forged.Rule)
	assert.Equal(t, `{"user":"alice","groups":["dev","system:authenticated"]}`, forged.Claimed)
	assert.Contains(t, forged.Message, "user bob with groups [ops,system:authenticated] is not allowed to set user annotation")
	assert.Equal(t, 201, forged.Code)
	assert.Equal(t, "for-carol", out.Admissions[1].Name, "livy is not trusted by the default settings")

	res = runCLIWith(t, nil, "", "audit", "--audit-log", log, "--settings-json", `{"externalUsers":["^livy$"]}`)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Equal(t, `TIME                  VERB             RESOURCE  NAMESPACE  NAME          USER  CODE  RULE
2026-11-27T09:30:01Z  create (replay)  pods      team-a     bob-as-alice  bob   201   create: present, submitter not allowed
`, res.stdout)
}
