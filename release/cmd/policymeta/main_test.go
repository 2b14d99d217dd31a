package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	// metadataPath is the policy's metadata.yml.
	metadataPath = "../../../metadata.yml"
	// guestPath is the CLI's small TinyGo test guest.
	guestPath = "../../../cmd/yunikorn-userinfo/testdata/guest.wasm"
	// embeddedPath is the annotated policy module the CLI embeds.
	embeddedPath = "../../../cmd/yunikorn-userinfo/policy.wasm"
)

type result struct {
	code   int
	stdout string
	stderr string
}

// runPM runs policymeta in process.
func runPM(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
