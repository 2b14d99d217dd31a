package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

// The CLI tests use a small TinyGo test guest (testdata/guest, see its doc
// comment) rather than the embedded policy, so they do not depend on the
// policy's rules: settings {"mode": ...} pick its answer.
const (
	guestPath   = "testdata/guest.wasm"
	requestPath = "testdata/request.json"
	requestUID  = "705ab4f5-6393-11e8-b7cc-42010a800002"
)

var (
	acceptedLine = `{"uid":"` + requestUID + `","allowed":true,"auditAnnotations":null,"warnings":null}` + "\n"
	rejectedLine = `{"uid":"` + requestUID + `","allowed":false,"status":{"message":"rejected by test guest","code":403},"auditAnnotations":null,"warnings":null}` + "\n"
)

type result struct {
	code   int
	stdout string
	stderr string
}

// runCLI runs the command in process with the embedded policy.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runCLIWith(t, nil, stdin, args...)
}

// runCLIWith is runCLI with engines sharing cache (nil: none).
func runCLIWith(t *testing.T, cache wazero.CompilationCache, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runWith(t.Context(), args, deps{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr,
		policy: embeddedPolicy, cache: cache})
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestRun_argumentErrors(t *testing.T) {
	t.Parallel()
	notWasm := writeFile(t, "module.wasm", "not wasm")
	yamlList := writeFile(t, "settings.yaml", "- mode: reject\n")
	badYAML := writeFile(t, "settings.yaml", "mode: [unclosed\n")
	dupYAML := writeFile(t, "settings.yaml", "mode: accept\nmode: reject\n")
	notJSONRequest := writeFile(t, "request.json", "uid: x\n")

	tests := []struct {
		name string
		args []string
		want string // the whole stderr line after "Error: ", or a prefix ending in "..."
	}{
		{name: "missing request", args: []string{"run", guestPath},
			want: "want -r REQUEST (an AdmissionRequest or AdmissionReview) or --object FILE --user USER (a manifest and its submitter)"},
		{name: "both settings sources", args: []string{"run", guestPath, "-r", requestPath, "-s", yamlList, "--settings-json", "{}"},
			want: "if any flags in the group [settings-path settings-json] are set none of the others can be; [settings-json settings-path] were all set"},
		{name: "unknown flag", args: []string{"run", "--nope"},
			want: "unknown flag: --nope\nRun 'yunikorn-userinfo run --help' for usage"},
		{name: "too many modules", args: []string{"run", guestPath, guestPath, "-r", requestPath},
			want: "accepts at most 1 arg(s), received 2"},
		{name: "unreadable request", args: []string{"run", guestPath, "-r", "testdata/missing.json"},
			want: "read request: open testdata/missing.json: no such file or directory"},
		{name: "request not JSON", args: []string{"run", guestPath, "-r", notJSONRequest},
			want: "read request " + notJSONRequest + ": decode admission input: ..."},
		{name: "unreadable settings", args: []string{"run", guestPath, "-r", requestPath, "-s", "testdata/missing.yaml"},
			want: "read settings: open testdata/missing.yaml: no such file or directory"},
		{name: "bad JSON settings", args: []string{"run", guestPath, "-r", requestPath, "--settings-json", `{"mode":`},
			want: "read settings --settings-json: invalid JSON: unexpected end of JSON input"},
		{name: "settings not an object", args: []string{"run", guestPath, "-r", requestPath, "--settings-json", `["mode"]`},
			want: "read settings --settings-json: settings must be a JSON object, got an array"},
		{name: "null settings", args: []string{"run", guestPath, "-r", requestPath, "--settings-json", `null`},
			want: "read settings --settings-json: settings must be a JSON object, got null"},
		{name: "settings file not an object", args: []string{"run", guestPath, "-r", requestPath, "-s", yamlList},
			want: "read settings " + yamlList + ": settings must be a JSON object, got an array"},
		{name: "settings file not YAML", args: []string{"run", guestPath, "-r", requestPath, "-s", badYAML},
			want: "read settings " + badYAML + ": neither JSON nor YAML: ..."},
		{name: "settings file with duplicate keys", args: []string{"run", guestPath, "-r", requestPath, "-s", dupYAML},
			want: "read settings " + dupYAML + `: neither JSON nor YAML: ...`},
		{name: "unreadable module", args: []string{"run", "testdata/missing.wasm", "-r", requestPath},
			want: "read module: open testdata/missing.wasm: no such file or directory"},
		{name: "unsupported module scheme", args: []string{"run", "ftp://example.com/p.wasm", "-r", requestPath},
			want: `module "ftp://example.com/p.wasm": unsupported scheme "ftp": want a local path (file:// optional)`},
		{name: "registry module", args: []string{"run", "registry://127.0.0.1:5000/p:v1", "-r", requestPath},
			want: "module \"registry://127.0.0.1:5000/p:v1\": registry:// modules are not fetched here: pull it with " +
				"`kwctl pull registry://127.0.0.1:5000/p:v1 -o policy.wasm` (-k KEY to verify its signature) and pass policy.wasm"},
		{name: "https module", args: []string{"inspect", "https://example.com/p.wasm"},
			want: "module \"https://example.com/p.wasm\": https:// modules are not fetched here: pull it with " +
				"`kwctl pull https://example.com/p.wasm -o policy.wasm` (-k KEY to verify its signature) and pass policy.wasm"},
		{name: "module not wasm", args: []string{"run", notWasm, "-r", requestPath},
			want: "load policy " + notWasm + ": compile module: ..."},
		{name: "zero timeout", args: []string{"run", guestPath, "-r", requestPath, "--timeout", "0s"},
			want: "invalid --timeout 0s: must be positive"},
		{name: "memory limit", args: []string{"run", guestPath, "-r", requestPath, "--memory-limit", "5000"},
			want: "invalid --memory-limit 5000: must be between 1 and 4096 MiB"},
		{name: "log level", args: []string{"run", guestPath, "-r", requestPath, "--log-level", "loud"},
			want: `invalid --log-level "loud": want debug, info, warn or error`},
		{name: "log format", args: []string{"run", guestPath, "-r", requestPath, "--log-format", "xml"},
			want: `invalid --log-format "xml": want text or json`},
		{name: "unknown command", args: []string{"evaluate"},
			want: `unknown command "evaluate" for "yunikorn-userinfo"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runCLI(t, "", tc.args...)
			assert.Equal(t, 1, res.code)
			assert.Empty(t, res.stdout)
			assert.Equal(t, 1, strings.Count(res.stderr, "Error:"), "the error is printed once: %s", res.stderr)
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				assert.True(t, strings.HasPrefix(res.stderr, "Error: "+prefix), "stderr: %s", res.stderr)
				return
			}
			assert.Equal(t, "Error: "+tc.want+"\n", res.stderr)
		})
	}
}

func TestRun_settingsSources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		module string
		args   []string
		want   string
	}{
		{name: "default", module: guestPath, want: acceptedLine},
		{name: "json flag", module: guestPath, args: []string{"--settings-json", `{"mode":"reject"}`}, want: rejectedLine},
		{name: "json file", module: guestPath, args: []string{"-s", writeFile(t, "s.json", `{"mode": "reject"}`)}, want: rejectedLine},
		{name: "yaml file", module: guestPath, args: []string{"--settings-path", writeFile(t, "s.yaml", "# test\nmode: reject\n")}, want: rejectedLine},
		{name: "empty file", module: guestPath, args: []string{"-s", writeFile(t, "s.yaml", "# nothing\n")}, want: acceptedLine},
		{name: "file:// module", module: "file://" + guestPath, args: []string{"--settings-json", `{"mode":"reject"}`}, want: rejectedLine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runCLI(t, "", append([]string{"run", tc.module, "-r", requestPath}, tc.args...)...)
			require.Equal(t, 0, res.code, res.stderr)
			assert.Equal(t, tc.want, res.stdout)
			assert.Empty(t, res.stderr)
		})
	}
}

func TestRun_requestFromStdin(t *testing.T) {
	t.Parallel()
	request, err := os.ReadFile(requestPath)
	require.NoError(t, err)

	res := runCLI(t, string(request), "run", guestPath, "-r", "-", "--settings-json", `{"mode":"reject"}`)
	require.Equal(t, 0, res.code, res.stderr)
	assert.Equal(t, rejectedLine, res.stdout)
}

func TestRun_bareRequestAndReviewAgree(t *testing.T) {
	t.Parallel()
	request, err := os.ReadFile(requestPath)
	require.NoError(t, err)
	review := writeFile(t, "review.json",
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`+string(request)+`}`)

	for _, mode := range []string{"accept", "reject", "mutate"} {
		settings := fmt.Sprintf(`{"mode":%q}`, mode)
		bare := runCLI(t, "", "run", guestPath, "-r", requestPath, "--settings-json", settings)
		full := runCLI(t, "", "run", guestPath, "-r", review, "--settings-json", settings)
		require.Equal(t, 0, bare.code, bare.stderr)
		require.Equal(t, 0, full.code, full.stderr)
		assert.Equal(t, bare.stdout, full.stdout, mode)
		assert.True(t, strings.HasPrefix(full.stdout, `{"uid":"`+requestUID+`"`), full.stdout)
	}
}

func TestRun_mutation(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "run", guestPath, "-r", requestPath, "--settings-json", `{"mode":"mutate"}`)
	require.Equal(t, 0, res.code, res.stderr)

	var resp struct {
		UID       string `json:"uid"`
		Allowed   bool   `json:"allowed"`
		PatchType string `json:"patchType"`
		Patch     string `json:"patch"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &resp))
	patch, err := base64.StdEncoding.DecodeString(resp.Patch)
	require.NoError(t, err)
	assert.Equal(t, requestUID, resp.UID)
	assert.True(t, resp.Allowed)
	assert.Equal(t, "JSONPatch", resp.PatchType)
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/labels","value":{"mutated":"true"}}]`, string(patch))
	assert.Equal(t, 1, strings.Count(res.stdout, "\n"), "one line")
}

func TestRun_evaluationFailureIsAResponse(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "run", guestPath, "-r", requestPath, "--settings-json", `{"mode":"fail"}`)
	assert.Equal(t, 0, res.code, "a failed evaluation is reported in the response, as kwctl does")
	assert.Equal(t, `{"uid":"`+requestUID+`","allowed":false,"status":{"message":"validate: test guest failure","code":500},`+
		`"auditAnnotations":null,"warnings":null}`+"\n", res.stdout)
	// The full error (for a trap, with its Wasm stack trace) is logged.
	assert.Contains(t, res.stderr, `level=WARN msg="evaluation failed"`)
	assert.Contains(t, res.stderr, `error="validate: test guest failure"`)
}

func TestRun_invalidSettings(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "run", guestPath, "-r", requestPath, "--settings-json", `{"reject":"mode must be <accept> & co"}`)
	assert.Equal(t, 1, res.code)
	assert.Empty(t, res.stdout)
	assert.Equal(t, "Error: provided settings are not valid: mode must be <accept> & co\n", res.stderr)
}

func TestRun_logs(t *testing.T) {
	t.Parallel()
	t.Run("quiet by default", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "", "run", guestPath, "-r", requestPath)
		require.Equal(t, 0, res.code, res.stderr)
		assert.Empty(t, res.stderr)
	})
	t.Run("verbose shows the policy's log lines", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "", "run", guestPath, "-r", requestPath, "-v")
		require.Equal(t, 0, res.code, res.stderr)
		assert.Equal(t, acceptedLine, res.stdout, "logs never go to stdout")
		assert.Contains(t, res.stderr, `level=INFO msg="guest decision" source=policy mode="" uid=`+requestUID+"\n")
	})
	t.Run("info level and json format", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "", "run", guestPath, "-r", requestPath, "--log-level", "info", "--log-format", "json")
		require.Equal(t, 0, res.code, res.stderr)
		lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
		require.Len(t, lines, 1, res.stderr)
		var record map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[0]), &record))
		delete(record, "time")
		assert.Equal(t, map[string]any{"level": "INFO", "msg": "guest decision", "source": "policy", "mode": "", "uid": requestUID}, record)
	})
}

func TestRun_embeddedPolicy(t *testing.T) {
	t.Parallel()
	// Whatever module is embedded, it evaluates the request and answers for it.
	res := runCLI(t, "", "run", "-r", requestPath)
	require.Equal(t, 0, res.code, res.stderr)
	var resp map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &resp), res.stdout)
	assert.Equal(t, requestUID, resp["uid"])
	assert.Contains(t, resp, "allowed")
}

func TestVersion(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "version")
	require.Equal(t, 0, res.code, res.stderr)
	assert.True(t, strings.HasPrefix(res.stdout, "yunikorn-userinfo "), res.stdout)
	assert.Contains(t, res.stdout, fmt.Sprintf("embedded policy sha256: %x\n", sha256.Sum256(embeddedPolicy)))
	assert.Contains(t, res.stdout, "wazero: v1.12.0\n")
}

// TestRun_monitor: with --monitor a refusal is printed as an admission of
// the unchanged object with a warning, and logged; an accepted mutation
// is printed as without it.
func TestRun_monitor(t *testing.T) {
	t.Parallel()
	t.Run("a refusal is admitted", func(t *testing.T) {
		t.Parallel()
		res := runCLI(t, "", "run", guestPath, "-r", requestPath, "--settings-json", `{"mode":"reject"}`, "--monitor")
		require.Equal(t, 0, res.code, res.stderr)
		assert.Equal(t, `{"uid":"`+requestUID+`","allowed":true,"auditAnnotations":{"monitor":"would be refused"},`+
			`"warnings":["monitor mode: would be refused: rejected by test guest (code 403)"]}`+"\n", res.stdout)
		assert.Contains(t, res.stderr, `level=WARN msg="monitor mode: would be refused"`)
		assert.Contains(t, res.stderr, `user=alice`)
	})
	t.Run("an accepted mutation is kept", func(t *testing.T) {
		t.Parallel()
		plain := runCLI(t, "", "run", guestPath, "-r", requestPath, "--settings-json", `{"mode":"mutate"}`)
		monitored := runCLI(t, "", "run", guestPath, "-r", requestPath, "--settings-json", `{"mode":"mutate"}`, "--monitor")
		require.Equal(t, 0, monitored.code, monitored.stderr)
		assert.Equal(t, plain.stdout, monitored.stdout)
		assert.Contains(t, monitored.stdout, `"patch":`)
		assert.Empty(t, monitored.stderr)
	})
	t.Run("the policy's forged claim, with its rule and claim logged", func(t *testing.T) {
		t.Parallel()
		forged := writeFile(t, "forged.json", `{"uid":"f1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE",`+
			`"namespace":"default","userInfo":{"username":"alice","groups":["devs"]},"object":{"apiVersion":"v1","kind":"Pod",`+
			`"metadata":{"name":"p","annotations":{"yunikorn.apache.org/user.info":"{\"user\":\"bob\"}"}},"spec":{}}}`)
		enforced := runCLI(t, "", "run", "-r", forged)
		require.Equal(t, 0, enforced.code, enforced.stderr)
		assert.Contains(t, enforced.stdout, `"allowed":false`)
		res := runCLI(t, "", "run", "-r", forged, "--monitor", "--log-format", "json")
		require.Equal(t, 0, res.code, res.stderr)
		var resp struct {
			Allowed          bool              `json:"allowed"`
			Patch            *string           `json:"patch"`
			AuditAnnotations map[string]string `json:"auditAnnotations"`
			Warnings         []string          `json:"warnings"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &resp), res.stdout)
		assert.True(t, resp.Allowed)
		assert.Nil(t, resp.Patch)
		assert.Equal(t, map[string]string{"rule": "create: present, submitter not allowed", "claimed": `{"user":"bob"}`,
			"monitor": "would be refused"}, resp.AuditAnnotations)
		assert.Equal(t, []string{"monitor mode: would be refused: user alice with groups [devs] is not allowed to set user annotation; " +
			`the value is not exactly your record; it would be {"user":"alice","groups":["devs"]} (code 403)`}, resp.Warnings)
		var line map[string]any
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(res.stderr)), &line), res.stderr)
		assert.Equal(t, "monitor mode: would be refused", line["msg"])
		assert.Equal(t, "alice", line["user"])
		assert.Equal(t, `{"user":"bob"}`, line["claimed"])
		assert.Equal(t, "create: present, submitter not allowed", line["rule"])
	})
}
