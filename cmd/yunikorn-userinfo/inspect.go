package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

// inspectFlags are the flags of `inspect`.
type inspectFlags struct {
	output string
}

// errNotAnnotated is returned by inspect for a module without metadata.
var errNotAnnotated = errors.New("no " + metadata.SectionName + " section: the module is not annotated")

func newInspectCommand(a *app) *cobra.Command {
	f := &inspectFlags{}
	cmd := &cobra.Command{
		Use:   "inspect [MODULE]",
		Short: "Print the metadata stored in a module, like kwctl inspect",
		Long: `Print the Kubewarden metadata stored in the io.kubewarden.metadata custom
section of MODULE (the embedded policy without one): as YAML by default, or
with --output json as the raw section content, compact JSON as kwctl wrote it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runInspect(args, f)
		},
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "yaml", "output format: yaml or json")
	return cmd
}

func (a *app) runInspect(args []string, f *inspectFlags) error {
	if f.output != "yaml" && f.output != "json" {
		return fmt.Errorf("invalid --output %q: want yaml or json", f.output)
	}
	name, wasm, err := a.readModule(args)
	if err != nil {
		return err
	}
	section, ok, err := metadata.ReadCustomSection(wasm, metadata.SectionName)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", name, err)
	}
	if !ok {
		return fmt.Errorf("inspect %s: %w", name, errNotAnnotated)
	}
	if f.output == "json" {
		_, err := fmt.Fprintf(a.stdout, "%s\n", section)
		return err
	}
	md, err := metadata.Decode(section)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", name, err)
	}
	out, err := yaml.Marshal(md)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", name, err)
	}
	_, err = a.stdout.Write(out)
	return err
}
