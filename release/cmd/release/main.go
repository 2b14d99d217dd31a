// Command release assembles a release directory (make release) and
// publishes it (make publish):
//
//	release assemble -o build/release --version V --revision SHA --created UNIX \
//	  --source URL --license SPDX --policy build/annotated-policy.wasm \
//	  --image build/image --module-dir .. \
//	  --binary linux/amd64=PATH --binary linux/arm64=PATH
//	release publish -d build/release --image HOST/ORG/yunikorn-userinfo \
//	  --policy HOST/ORG/policies/yunikorn-user-info [--key cosign.key] [--ca-file ca.pem]
//
// publish reads registry credentials from the docker configuration and the
// key's password from COSIGN_PASSWORD.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/yunikorn-userinfo/userinfo/host/fetch"
	"github.com/yunikorn-userinfo/userinfo/release/internal/bundle"
	"github.com/yunikorn-userinfo/userinfo/release/internal/sign"
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
		return errors.New("want a subcommand: assemble or publish")
	}
	switch args[0] {
	case "assemble":
		return assemble(ctx, args[1:])
	case "publish":
		return publish(ctx, args[1:])
	}
	return fmt.Errorf("unknown subcommand %q: want assemble or publish", args[0])
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
	fmt.Printf("release %s in %s\n  image index %s\n  policy manifest %s\n", rel.Version, opts.Out, rel.Image.Index, rel.Policy.ManifestDigest)
	return nil
}

func publish(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	var opts bundle.PublishOptions
	var keyFile, caFile string
	fs.StringVar(&opts.Dir, "d", "build/release", "release directory")
	fs.StringVar(&opts.Image, "image", "", "image repository, HOST/PATH")
	fs.StringVar(&opts.Policy, "policy", "", "policy repository, HOST/PATH")
	fs.StringVar(&keyFile, "key", "", "cosign private key that signs both (password in COSIGN_PASSWORD); unsigned without")
	fs.StringVar(&caFile, "ca-file", "", "PEM certificate authority of the registry, besides the system's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opts.Image == "" || opts.Policy == "" {
		return errors.New("publish: --image and --policy are required")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("publish: --ca-file %s: no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	opts.Remote = []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithTransport(tr)}
	// The policy goes through the product's own push, with the same docker
	// credentials and the CA as a source authority of its registry.
	var sources *fetch.Sources
	if caFile != "" {
		policyRef, err := name.NewRepository(opts.Policy)
		if err != nil {
			return fmt.Errorf("publish: --policy: %w", err)
		}
		doc := fmt.Sprintf("source_authorities:\n  %q:\n    - type: Path\n      path: %q\n", policyRef.RegistryStr(), caFile)
		if sources, err = fetch.ParseSources([]byte(doc)); err != nil {
			return fmt.Errorf("publish: --ca-file: %w", err)
		}
	}
	policies, err := fetch.New(fetch.Options{Sources: sources})
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	opts.Policies = policies
	if keyFile != "" {
		pem, err := os.ReadFile(keyFile)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		key, err := sign.LoadKey(pem, []byte(os.Getenv("COSIGN_PASSWORD")))
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		opts.Key = key
	}
	out, err := bundle.Publish(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("image  %s\npolicy %s\n", out.Image, out.Policy)
	return nil
}
