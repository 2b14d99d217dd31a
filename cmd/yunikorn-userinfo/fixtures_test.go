package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures/fixturecheck"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

const runGolden = "testdata/golden/run.golden"

// TestRun_fixtures runs `run` with the embedded policy over the whole shared
// case table: every response is checked against the case (the patch is
// applied to the original object by an independent JSONPatch library), and
// the exact output line must match testdata/golden/run.golden. Cases
// alternate between a bare request in a file and a full AdmissionReview on
// stdin: both must print the same line.
func TestRun_fixtures(t *testing.T) {
	cases, err := fixtures.Load()
	require.NoError(t, err)
	cache := compilationCache(t)
	dir := t.TempDir()

	got := make(map[string]string, len(cases))
	for i, c := range cases {
		args := []string{"run", "--settings-json", string(c.Settings), "--context-dir", fixtures.ClusterDir()}
		var stdin []byte
		if i%2 == 0 {
			path := filepath.Join(dir, fmt.Sprintf("request-%d.json", i))
			require.NoError(t, os.WriteFile(path, c.Request, 0o600))
			args = append(args, "-r", path)
		} else {
			stdin = []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":` + string(c.Request) + `}`)
			args = append(args, "-r", "-")
		}
		var stdout, stderr bytes.Buffer
		code := runWith(t.Context(), args, deps{
			stdin: bytes.NewReader(stdin), stdout: &stdout, stderr: &stderr,
			policy: embeddedPolicy, cache: cache,
		})
		ok := t.Run(c.Name, func(t *testing.T) {
			if rest, invalid := strings.CutPrefix(c.Expect.Message, "settings are not valid: "); invalid {
				// Like kwctl, run checks the settings before evaluating and
				// stops: the policy's message, no response.
				assert.Equal(t, 1, code)
				assert.Equal(t, "Error: provided settings are not valid: "+rest+"\n", stderr.String())
				assert.Empty(t, stdout.String())
				return
			}
			require.Equal(t, 0, code, "stderr: %s", stderr.String())
			// Only a remark about the settings (an unanchored pattern), or
			// the policy's warning about a queue or configuration check it
			// skipped or could not make, may reach stderr.
			for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				if line != "" && !strings.Contains(line, `msg="queue check skipped" source=policy`) &&
					!strings.Contains(line, `msg="configuration check skipped" source=policy`) &&
					!strings.Contains(line, `msg="configuration check failed" source=policy`) {
					assert.Contains(t, line, `msg="the policy accepted the settings with a remark" message="warning: settings.`)
				}
			}
			out := stdout.String()
			require.True(t, strings.HasSuffix(out, "\n") && strings.Count(out, "\n") == 1, "one line: %q", out)
			fixturecheck.CheckAdmissionResponse(t, c, []byte(strings.TrimSpace(out)))
		})
		if ok && code == 0 {
			got[c.Name] = strings.TrimSpace(stdout.String())
		}
	}
	if t.Failed() {
		return
	}
	if *update {
		writeGolden(t, got)
		return
	}
	want := readGolden(t)
	for _, name := range fixtures.Names(cases) {
		if g, ok := got[name]; ok {
			assert.Equal(t, want[name], g, "golden output of %s (run `make generate` to accept a change)", name)
		}
	}
	assert.Len(t, want, len(got), "golden file has cases that no longer exist")
}

func readGolden(t *testing.T) map[string]string {
	t.Helper()
	out, err := fixtures.ReadGolden(runGolden)
	require.NoError(t, err)
	return out
}

func writeGolden(t *testing.T, got map[string]string) {
	t.Helper()
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + "\t" + got[n] + "\n")
	}
	require.NoError(t, os.WriteFile(runGolden, []byte(b.String()), 0o644))
}
