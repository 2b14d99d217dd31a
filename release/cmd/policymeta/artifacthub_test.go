package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/release/internal/artifacthub"
)

const (
	// committedArtifacthub is the directory `make artifacthub` writes.
	committedArtifacthub = "../../../artifacthub"
	// policyOCIURL is metadata.yml's io.kubewarden.policy.ociUrl.
	policyOCIURL = "ghcr.io/yunikorn-userinfo/policies/yunikorn-user-info"
)

// TestArtifacthub_committedFilesUpToDate regenerates artifacthub/ from
// metadata.yml the way `make artifacthub` does, so a metadata.yml change
// cannot ship with stale Artifact Hub files.
func TestArtifacthub_committedFilesUpToDate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The committed package file seeds the output directory, as it does in
	// `make artifacthub`: createdAt is kept while the version is unchanged.
	committedPkg, err := os.ReadFile(filepath.Join(committedArtifacthub, artifacthub.PackageFile))
	require.NoError(t, err, "artifacthub/%s is missing: run make artifacthub", artifacthub.PackageFile)
	require.NoError(t, os.WriteFile(filepath.Join(dir, artifacthub.PackageFile), committedPkg, 0o644))

	res := runPM(t, "artifacthub", "-m", metadataPath, "-o", dir)
	require.Equal(t, 0, res.code, res.stderr)

	for _, name := range []string{artifacthub.PackageFile, artifacthub.RepositoryFile} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(committedArtifacthub, name))
		require.NoError(t, err, "artifacthub/%s is missing: run make artifacthub", name)
		assert.Equal(t, string(want), string(got),
			"artifacthub/%s is out of date with metadata.yml: run make artifacthub and commit the result", name)
	}
}

func TestArtifacthub_createdAt(t *testing.T) {
	t.Parallel()
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := time.Date(2027, 6, 7, 8, 9, 10, 0, time.UTC)
	existing := func(version string) string {
		return "version: " + version + "\ncreatedAt: 2026-01-02T03:04:05Z\n"
	}
	tests := []struct {
		name      string
		flags     artifacthubFlags
		existing  string // artifacthub-pkg.yml already in the output directory
		want      time.Time
		wantError string
	}{
		{name: "flag wins", flags: artifacthubFlags{createdAt: "2025-05-05T05:05:05+02:00"}, existing: existing("0.1.0"),
			want: time.Date(2025, 5, 5, 3, 5, 5, 0, time.UTC)},
		{name: "kept for the same version", existing: existing("0.1.0"), want: stamp},
		{name: "kept for the same --version", flags: artifacthubFlags{version: "0.2.0"}, existing: existing("0.2.0"), want: stamp},
		{name: "new version", existing: existing("0.0.9"), want: now},
		{name: "no existing file", want: now},
		{name: "bad flag", flags: artifacthubFlags{createdAt: "2026-01-02"},
			wantError: `invalid --created-at "2026-01-02": want RFC 3339, like 2026-01-02T15:04:05Z`},
		{name: "unreadable existing file", existing: "version: [",
			wantError: "read artifacthub-pkg.yml: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.flags
			f.metadataPath = metadataPath
			f.outputDir = t.TempDir()
			if tc.existing != "" {
				require.NoError(t, os.WriteFile(filepath.Join(f.outputDir, artifacthub.PackageFile), []byte(tc.existing), 0o644))
			}
			err := runArtifacthub(io.Discard, &f, func() time.Time { return now })
			if tc.wantError != "" {
				assert.EqualError(t, err, tc.wantError)
				return
			}
			require.NoError(t, err)
			pkg, err := os.ReadFile(filepath.Join(f.outputDir, artifacthub.PackageFile))
			require.NoError(t, err)
			_, got, err := artifacthub.ReadStamp(pkg)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestArtifacthub_stdout(t *testing.T) {
	t.Parallel()
	res := runPM(t, "artifacthub", "-m", metadataPath, "--version", "9.9.9", "--created-at", "2026-01-02T03:04:05Z")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stderr)
	version, createdAt, err := artifacthub.ReadStamp([]byte(res.stdout))
	require.NoError(t, err)
	assert.Equal(t, "9.9.9", version)
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), createdAt)
	assert.Contains(t, res.stdout, "  image: "+policyOCIURL+":v9.9.9\n")
}

func TestArtifacthub_errors(t *testing.T) {
	t.Parallel()
	invalid := writeFile(t, "metadata.yml", "rules: []\nmutating: true\n")
	noOCI := writeFile(t, "metadata.yml", `rules: [{apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}]
mutating: true
annotations:
  io.kubewarden.policy.title: t
  io.artifacthub.displayName: T
  io.kubewarden.policy.description: d
  io.kubewarden.policy.version: 1.0.0
`)
	tests := []struct {
		name string
		args []string
		want string // the whole stderr
	}{
		{name: "no metadata flag", args: []string{"artifacthub"},
			want: "Error: required flag(s) \"metadata-path\" not set\n"},
		{name: "unreadable metadata", args: []string{"artifacthub", "-m", "testdata/missing.yml"},
			want: "Error: read metadata: open testdata/missing.yml: no such file or directory\n"},
		{name: "invalid metadata", args: []string{"artifacthub", "-m", invalid},
			want: "Error: invalid metadata " + invalid + ":\nrules: at least one rule is required\n"},
		{name: "no OCI URL", args: []string{"artifacthub", "-m", noOCI, "--created-at", "2026-01-02T03:04:05Z"},
			want: "Error: generate artifacthub metadata:\nannotation io.kubewarden.policy.ociUrl: required (or the OCI URL option): the policy's OCI repository, like ghcr.io/org/policies/name\n"},
		{name: "unreadable usage", args: []string{"artifacthub", "-m", metadataPath, "-u", "testdata/missing.md"},
			want: "Error: read usage: open testdata/missing.md: no such file or directory\n"},
		{name: "unreadable questions", args: []string{"artifacthub", "-m", metadataPath, "-q", "testdata/missing.yml"},
			want: "Error: read questions: open testdata/missing.yml: no such file or directory\n"},
		{name: "unreadable output directory", args: []string{"artifacthub", "-m", metadataPath, "-o", "/dev/null/dir"},
			want: "Error: read existing package: open /dev/null/dir/artifacthub-pkg.yml: not a directory\n"},
		{name: "unwritable output directory", args: []string{"artifacthub", "-m", metadataPath, "-o", "/dev/null/dir", "--created-at", "2026-01-02T03:04:05Z"},
			want: "Error: create output directory: mkdir /dev/null: not a directory\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runPM(t, tc.args...)
			assert.Equal(t, 1, res.code)
			assert.Empty(t, res.stdout)
			assert.Equal(t, tc.want, res.stderr)
		})
	}
}
