package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/host/fetch"
)

// pushFlags are the flags of `push`.
type pushFlags struct {
	force  bool
	output string
}

func newPushCommand(a *app) *cobra.Command {
	f := &pushFlags{}
	cmd := &cobra.Command{
		Use:   "push MODULE URI",
		Short: "Push a policy module to an OCI registry, like kwctl push",
		Long: `Push MODULE (a local .wasm file; "-" or "" for the embedded policy) to
URI, registry://HOST[:PORT]/REPOSITORY[:TAG] (registry:// may be left out;
the tag defaults to latest), as the artifact kwctl push writes: an OCI
image manifest whose config is {} of media type
application/vnd.wasm.config.v1+json and whose one layer is the module,
application/vnd.wasm.content.layer.v1+wasm, annotated with the module's
single-line metadata annotations. The same module always gives the same
manifest digest. Credentials come from the docker configuration
(--docker-config-json-path); --sources-path names insecure registries and
private certificate authorities.

A module without metadata is refused unless --force is given: annotate it
first, as kwctl requires.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runPush(cmd.Context(), args, f)
		},
	}
	cmd.Flags().BoolVarP(&f.force, "force", "f", false, "push a module without metadata")
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	return cmd
}

func (a *app) runPush(ctx context.Context, args []string, f *pushFlags) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("invalid --output %q: want text or json", f.output)
	}
	module := args[0]
	if module == "-" {
		module = ""
	}
	name, wasm, err := a.readModule(ctx, []string{module})
	if err != nil {
		return err
	}
	art, err := fetch.NewArtifact(wasm, f.force)
	if err != nil {
		return fmt.Errorf("push %s: %w", name, err)
	}
	if len(art.Dropped) > 0 {
		fmt.Fprintf(a.stderr, "warning: annotations spanning several lines are left out of the manifest: %s\n", strings.Join(art.Dropped, ", "))
	}
	fetcher, err := a.fetcher()
	if err != nil {
		return err
	}
	pushed, err := fetcher.Push(ctx, art, args[1])
	if err != nil {
		return err
	}
	if f.output == "json" {
		return json.NewEncoder(a.stdout).Encode(map[string]string{"immutable_ref": pushed.Immutable})
	}
	_, err = fmt.Fprintf(a.stdout, "Policy successfully pushed: %s\n", pushed.Immutable)
	return err
}
