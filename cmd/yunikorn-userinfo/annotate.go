package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/host/engine"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

// annotateFlags are the flags of `annotate`, as kwctl spells them.
type annotateFlags struct {
	metadataPath string
	outputPath   string
	usagePath    string
}

func newAnnotateCommand(a *app) *cobra.Command {
	f := &annotateFlags{}
	cmd := &cobra.Command{
		Use:   "annotate MODULE -m METADATA -o OUTPUT [-u USAGE]",
		Short: "Store policy metadata in a module, like kwctl annotate",
		Long: `Write a copy of MODULE with the metadata of METADATA (metadata.yml) in its
io.kubewarden.metadata custom section, replacing any previous one, as kwctl
annotate does.

The metadata is checked first, and the module is compiled and asked for its
protocol_version, which is recorded as protocolVersion. With -u, the file's
content (usually README.md) is stored as the io.kubewarden.policy.usage
annotation. The output depends only on the inputs: the same inputs give the
same bytes. Only kubewarden-wapc policies can be annotated by this host.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runAnnotate(cmd.Context(), args[0], f)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.metadataPath, "metadata-path", "m", "", "metadata.yml to store (required)")
	fs.StringVarP(&f.outputPath, "output-path", "o", "", "where to write the annotated module (required)")
	fs.StringVarP(&f.usagePath, "usage-path", "u", "", "file stored as the io.kubewarden.policy.usage annotation, usually README.md")
	_ = cmd.MarkFlagRequired("metadata-path")
	_ = cmd.MarkFlagRequired("output-path")
	return cmd
}

func (a *app) runAnnotate(ctx context.Context, module string, f *annotateFlags) error {
	logger, err := a.logger()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(f.metadataPath)
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	md, err := metadata.Parse(data)
	if err != nil {
		return fmt.Errorf("read metadata %s: %w", f.metadataPath, err)
	}
	if md.ExecutionMode != metadata.ExecutionModeKubewardenWapc {
		return fmt.Errorf("read metadata %s: executionMode %q: only %s modules can be annotated by this host",
			f.metadataPath, md.ExecutionMode, metadata.ExecutionModeKubewardenWapc)
	}
	if f.usagePath != "" {
		usage, err := os.ReadFile(f.usagePath)
		if err != nil {
			return fmt.Errorf("read usage: %w", err)
		}
		if md.Annotations == nil {
			md.Annotations = map[string]string{}
		}
		md.Annotations[metadata.AnnotationUsage] = string(usage)
	}
	if err := md.Validate(); err != nil {
		return fmt.Errorf("invalid metadata %s:\n%w", f.metadataPath, err)
	}

	name, wasm, err := a.readModule([]string{module})
	if err != nil {
		return err
	}
	eng, err := a.loadModule(ctx, name, wasm, engine.Options{Logger: logger, MaxInstances: 1})
	if err != nil {
		return err
	}
	defer eng.Close(context.WithoutCancel(ctx))
	if md.ProtocolVersion, err = eng.ProtocolVersion(ctx); err != nil {
		return fmt.Errorf("read protocol version of %s: %w", name, err)
	}

	section, err := md.MarshalJSON()
	if err != nil {
		return err
	}
	annotated, err := metadata.SetCustomSection(wasm, metadata.SectionName, section)
	if err != nil {
		return fmt.Errorf("annotate %s: %w", name, err)
	}
	if err := writeFileAtomic(f.outputPath, annotated); err != nil {
		return fmt.Errorf("write annotated module: %w", err)
	}
	logger.InfoContext(ctx, "module annotated", "module", name, "output", f.outputPath, "bytes", len(annotated))
	return nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so a failed write never leaves a truncated module
// behind, and the output may be the input file itself.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
