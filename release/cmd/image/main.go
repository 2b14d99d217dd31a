// Command image builds the webhook's container image as an OCI image
// layout (make image): one static binary per platform, no base image, user
// 65532:65532, entrypoint serve, OCI annotations, every timestamp the
// commit's. It prints the index digest and the digest of each platform.
//
//	image -o build/image --created 1732300000 --version 0.1.0 --revision SHA \
//	  --source https://github.com/... --license Apache-2.0 \
//	  --platform linux/amd64=build/image-bin/amd64/yunikorn-userinfo \
//	  --platform linux/arm64=build/image-bin/arm64/yunikorn-userinfo
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/yunikorn-userinfo/userinfo/release/internal/image"
)

type platforms []image.Platform

func (p *platforms) String() string { return fmt.Sprint(*p) }

func (p *platforms) Set(v string) error {
	spec, bin, ok := strings.Cut(v, "=")
	if !ok || bin == "" {
		return fmt.Errorf("--platform %q: want OS/ARCH[/VARIANT]=BINARY", v)
	}
	parts := strings.Split(spec, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("--platform %q: want OS/ARCH[/VARIANT]=BINARY", v)
	}
	pl := image.Platform{OS: parts[0], Architecture: parts[1], Binary: bin}
	if len(parts) == 3 {
		pl.Variant = parts[2]
	}
	*p = append(*p, pl)
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var (
		ps                                  platforms
		out, created, version, revision     string
		source, license, title, description string
	)
	fs.Var(&ps, "platform", "OS/ARCH[/VARIANT]=BINARY, once per platform")
	fs.StringVar(&out, "o", "build/image", "OCI image layout to write (replaced)")
	fs.StringVar(&created, "created", "", "creation time, Unix seconds (the commit's: git log -1 --format=%ct)")
	fs.StringVar(&version, "version", "", "org.opencontainers.image.version, and the layout's ref name")
	fs.StringVar(&revision, "revision", "", "org.opencontainers.image.revision (the commit)")
	fs.StringVar(&source, "source", "", "org.opencontainers.image.source")
	fs.StringVar(&license, "license", "", "org.opencontainers.image.licenses (SPDX expression)")
	fs.StringVar(&title, "title", "yunikorn-userinfo", "org.opencontainers.image.title")
	fs.StringVar(&description, "description", "", "org.opencontainers.image.description")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var missing []string
	for name, v := range map[string]string{"created": created, "version": version, "revision": revision, "source": source, "license": license} {
		if v == "" {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return fmt.Errorf("--created %q: want Unix seconds: %w", created, err)
	}
	if len(ps) == 0 {
		return errors.New("no --platform")
	}
	when := time.Unix(secs, 0).UTC()
	annotations := map[string]string{
		"org.opencontainers.image.created":  when.Format(time.RFC3339),
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.licenses": license,
		"org.opencontainers.image.title":    title,
	}
	if description != "" {
		annotations["org.opencontainers.image.description"] = description
	}
	idx, err := image.Build(image.Options{Platforms: ps, Created: when, Annotations: annotations})
	if err != nil {
		return err
	}
	if err := image.WriteLayout(out, idx, version); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	man, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	fmt.Printf("image index %s written to %s\n", digest, out)
	for _, m := range man.Manifests {
		fmt.Printf("  %s/%s %s (%d bytes manifest)\n", m.Platform.OS, m.Platform.Architecture, m.Digest, m.Size)
	}
	return nil
}
