package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// results are the synthetic results of the library's tests.
const results = "../../internal/perfkit/testdata/results"

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRun(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	unknown := filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(unknown, []byte(`{"a": 1}`), 0o600))
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{name: "tables of a missing directory", args: []string{"tables", "--in", filepath.Join(empty, "nope"), "--out", "-"},
			code: exitError, stderr: "read results directory"},
		{name: "tables to stdout", args: []string{"tables", "--in", results, "--out", "-"}, code: exitOK,
			stdout: []string{"### Machine", "### Webhook under load", "| saturation | 5,230 |"}},
		{name: "show a load report", args: []string{"show", results + "/load-2000.json"}, code: exitOK,
			stdout: []string{"fixed rate 2000/s", "p99 3.900"}},
		{name: "show cold start and soak", args: []string{"show", results + "/coldstart-cache.json", results + "/soak.jsonl"},
			code: exitOK, stdout: []string{"filling the cache: 250 ms", "verdict: flat"}},
		{name: "show something else", args: []string{"show", unknown}, code: exitError,
			stderr: "neither a loadgen report nor a coldstart result"},
		{name: "soak needs a pid", args: []string{"soak"}, code: exitError, stderr: `required flag(s) "pid" not set`},
		{name: "machine", args: []string{"machine"}, code: exitOK, stdout: []string{`"cpus": `, `"go_version": "go`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI(t, tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			for _, s := range tc.stdout {
				assert.Contains(t, stdout, s)
			}
			if tc.stderr != "" {
				assert.Contains(t, stderr, tc.stderr)
			}
		})
	}
}

func TestRun_tablesFile(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "perf", "results.md")
	code, stdout, stderr := runCLI(t, "tables", "--in", results, "--out", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "wrote "+out+"\n", stdout)
	md, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(md), "### Policy evaluation: native Go vs Wasm in our host")
}

func TestRun_soak(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jsonl, csvFile := filepath.Join(dir, "soak.jsonl"), filepath.Join(dir, "soak.csv")
	code, stdout, stderr := runCLI(t, "soak", "--pid", strconv.Itoa(os.Getpid()),
		"--interval", "10ms", "--duration", "30ms", "--out", jsonl, "--csv", csvFile, "--json")
	require.Equal(t, exitOK, code, stderr)

	var sum struct {
		Samples int `json:"samples"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum))
	require.GreaterOrEqual(t, sum.Samples, 2)
	lines, err := os.ReadFile(jsonl)
	require.NoError(t, err)
	assert.Equal(t, sum.Samples, strings.Count(string(lines), "\n"))
	rows, err := os.ReadFile(csvFile)
	require.NoError(t, err)
	assert.Equal(t, sum.Samples+1, strings.Count(string(rows), "\n"), "a header and a row per sample")
	assert.True(t, strings.HasPrefix(string(rows), "elapsed_s,time,rss_bytes,"))
}
