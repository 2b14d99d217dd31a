package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

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

func newAnnotateCommand(stderr io.Writer) *cobra.Command {
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
same bytes. Only kubewarden-wapc policies can be annotated.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			return runAnnotate(cmd.Context(), logger, args[0], f)
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

func runAnnotate(ctx context.Context, logger *slog.Logger, module string, f *annotateFlags) error {
	data, err := os.ReadFile(f.metadataPath)
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	md, err := metadata.Parse(data)
	if err != nil {
		return fmt.Errorf("read metadata %s: %w", f.metadataPath, err)
	}
	if md.ExecutionMode != metadata.ExecutionModeKubewardenWapc {
		return fmt.Errorf("read metadata %s: executionMode %q: only %s modules can be annotated",
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

	name := strings.TrimPrefix(module, "file://")
	wasm, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("read module: %w", err)
	}
	eng, err := engine.New(ctx, wasm, engine.Options{Logger: logger, MaxInstances: 1})
	if err != nil {
		return fmt.Errorf("load policy %s: %w", name, err)
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
	return nil
}
