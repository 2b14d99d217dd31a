// Command release assembles a release directory (make release):
//
//	release assemble -o build/release --version V --revision SHA --created UNIX \
//	  --source URL --license SPDX --policy build/annotated-policy.wasm \
//	  --image build/image --module-dir .. \
//	  --binary linux/amd64=PATH --binary linux/arm64=PATH
//
// Its files are pushed and signed with kwctl, oras and cosign
// (docs/INSTALL.md, "Publishing").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/yunikorn-userinfo/userinfo/release/internal/bundle"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

type kv map[string]string

func (m kv) String() string { return fmt.Sprint(map[string]string(m)) }
func (m kv) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" || val == "" {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	m[k] = val
	return nil
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: assemble")
	}
	if args[0] != "assemble" {
		return fmt.Errorf("unknown subcommand %q: want assemble", args[0])
	}
	return assemble(ctx, args[1:])
}

func assemble(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("assemble", flag.ContinueOnError)
	opts := bundle.Options{Binaries: map[string]string{}}
	var created string
	fs.StringVar(&opts.Out, "o", "build/release", "release directory (replaced)")
	fs.StringVar(&opts.Version, "version", "", "release version")
	fs.StringVar(&opts.Revision, "revision", "", "commit")
	fs.StringVar(&created, "created", "", "commit time, Unix seconds")
	fs.StringVar(&opts.Source, "source", "", "source repository URL")
	fs.StringVar(&opts.License, "license", "", "SPDX license expression")
	fs.StringVar(&opts.Policy, "policy", "", "annotated policy module")
	fs.StringVar(&opts.ImageLayout, "image", "", "image OCI layout (make image)")
	fs.StringVar(&opts.ModuleDir, "module-dir", "..", "the product's module")
	fs.Var(kv(opts.Binaries), "binary", "OS/ARCH=PATH of a static binary, once per platform")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for flagName, v := range map[string]string{"version": opts.Version, "revision": opts.Revision, "created": created, "source": opts.Source, "license": opts.License, "policy": opts.Policy, "image": opts.ImageLayout} {
		if v == "" {
			return fmt.Errorf("assemble: --%s is required", flagName)
		}
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("assemble: --created %q: want Unix seconds", created)
	}
	opts.Created = time.Unix(secs, 0)
	rel, err := bundle.Assemble(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("release %s in %s\n  image index %s\n  policy sha256:%s\n", rel.Version, opts.Out, rel.Image.Index, rel.Policy.SHA256)
	return nil
}
