package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
	"github.com/yunikorn-userinfo/userinfo/release/internal/artifacthub"
)

// artifacthubFlags are the flags of `artifacthub`. --metadata-path,
// --version and --questions-path are spelled as kwctl scaffold artifacthub
// spells them; -o is a directory here, since two files are written.
type artifacthubFlags struct {
	metadataPath  string
	version       string
	questionsPath string
	outputDir     string
	createdAt     string
	ociURL        string
	usagePath     string
	repositoryID  string
}

func newArtifacthubCommand(stdout io.Writer) *cobra.Command {
	f := &artifacthubFlags{}
	cmd := &cobra.Command{
		Use:   "artifacthub -m METADATA [-o DIR] [--version V] [--created-at TIME]",
		Short: "Generate artifacthub-pkg.yml and artifacthub-repo.yml from metadata.yml, like kwctl scaffold artifacthub",
		Long: `Generate the Artifact Hub metadata of a Kubewarden policy from its
metadata.yml, as kwctl scaffold artifacthub does: artifacthub-pkg.yml (one
package version) and artifacthub-repo.yml (the repository's ID and owners).

With -o DIR both files are written to DIR; without it, artifacthub-pkg.yml is
printed on stdout. The version defaults to the io.kubewarden.policy.version
annotation, the OCI repository to io.kubewarden.policy.ociUrl.

createdAt: --created-at (RFC 3339) if given; otherwise, when DIR already holds
an artifacthub-pkg.yml of the same version, its createdAt is kept, so
regenerating an unchanged version gives the same bytes; otherwise the current
time. A new version therefore gets a new createdAt, and nothing else does.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return runArtifacthub(stdout, f, time.Now)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.metadataPath, "metadata-path", "m", "", "metadata.yml of the policy (required)")
	fl.StringVar(&f.version, "version", "", "package version, like 1.2.3 (default: the io.kubewarden.policy.version annotation)")
	fl.StringVarP(&f.questionsPath, "questions-path", "q", "", "Rancher questions-ui.yml, stored as the kubewarden/questions-ui annotation")
	fl.StringVarP(&f.outputDir, "output-dir", "o", "", "write artifacthub-pkg.yml and artifacthub-repo.yml into this directory (default: print artifacthub-pkg.yml)")
	fl.StringVar(&f.createdAt, "created-at", "", "package creation time, RFC 3339 (default: kept from DIR's file for the same version, else now)")
	fl.StringVar(&f.ociURL, "oci-url", "", "OCI repository of the policy, without tag (default: the io.kubewarden.policy.ociUrl annotation)")
	fl.StringVarP(&f.usagePath, "usage-path", "u", "", "file stored as the package readme, usually README.md (default: the io.kubewarden.policy.usage annotation)")
	fl.StringVar(&f.repositoryID, "repository-id", "", "Artifact Hub repository ID, written to artifacthub-repo.yml")
	_ = cmd.MarkFlagRequired("metadata-path")
	return cmd
}

// runArtifacthub generates the files; now is the clock, read only when the
// creation time comes from nowhere else.
func runArtifacthub(stdout io.Writer, f *artifacthubFlags, now func() time.Time) error {
	data, err := os.ReadFile(f.metadataPath)
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	md, err := metadata.Parse(data)
	if err != nil {
		return fmt.Errorf("read metadata %s: %w", f.metadataPath, err)
	}
	if err := md.Validate(); err != nil {
		return fmt.Errorf("invalid metadata %s:\n%w", f.metadataPath, err)
	}
	opts := artifacthub.Options{Version: f.version, OCIURL: f.ociURL, RepositoryID: f.repositoryID}
	if f.usagePath != "" {
		usage, err := os.ReadFile(f.usagePath)
		if err != nil {
			return fmt.Errorf("read usage: %w", err)
		}
		opts.Readme = string(usage)
	}
	if f.questionsPath != "" {
		questions, err := os.ReadFile(f.questionsPath)
		if err != nil {
			return fmt.Errorf("read questions: %w", err)
		}
		opts.QuestionsUI = string(questions)
	}
	if opts.CreatedAt, err = f.creationTime(md, now); err != nil {
		return err
	}

	files, err := artifacthub.Generate(md, opts)
	if err != nil {
		return err
	}
	if f.outputDir == "" {
		_, err := stdout.Write(files.Package)
		return err
	}
	if err := os.MkdirAll(f.outputDir, 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	for _, out := range []struct {
		name string
		data []byte
	}{
		{artifacthub.PackageFile, files.Package},
		{artifacthub.RepositoryFile, files.Repository},
	} {
		if err := writeFileAtomic(filepath.Join(f.outputDir, out.name), out.data); err != nil {
			return fmt.Errorf("write %s: %w", out.name, err)
		}
	}
	return nil
}

// creationTime picks createdAt: the flag, else the existing package file's
// when it has the version being generated, else now.
func (f *artifacthubFlags) creationTime(md *metadata.Metadata, now func() time.Time) (time.Time, error) {
	if f.createdAt != "" {
		t, err := time.Parse(time.RFC3339, f.createdAt)
		if err != nil {
			return time.Time{}, fmt.Errorf("invalid --created-at %q: want RFC 3339, like 2026-01-02T15:04:05Z", f.createdAt)
		}
		return t, nil
	}
	if f.outputDir != "" {
		existing, err := os.ReadFile(filepath.Join(f.outputDir, artifacthub.PackageFile))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return time.Time{}, fmt.Errorf("read existing package: %w", err)
		default:
			version, createdAt, err := artifacthub.ReadStamp(existing)
			if err != nil {
				return time.Time{}, err
			}
			want := f.version
			if want == "" {
				want = md.Annotations[artifacthub.AnnotationVersion]
			}
			if version == want {
				return createdAt, nil
			}
		}
	}
	return now(), nil
}
