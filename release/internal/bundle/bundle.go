// Package bundle assembles a release directory (make release): the
// binaries, the annotated policy module, the image as an OCI layout
// tarball, a CycloneDX SBOM for each binary and for the policy,
// release.json with every digest, and SHA256SUMS. Publishing the files is
// done with the registries' own tools (kwctl push, oras, cosign), as
// docs/INSTALL.md shows.
package bundle

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/yunikorn-userinfo/userinfo/release/internal/image"
	"github.com/yunikorn-userinfo/userinfo/release/internal/sbom"
)

// File names in a release directory.
const (
	ReleaseJSON = "release.json"
	SumsFile    = "SHA256SUMS"
)

// Options describe a release.
type Options struct {
	// Out is the release directory, replaced.
	Out string
	// Version, Revision (commit), Source (repository URL), License (SPDX)
	// and Created (commit time) describe it.
	Version, Revision, Source, License string
	Created                            time.Time
	// Binaries maps OS/ARCH to the static binary built for it.
	Binaries map[string]string
	// Policy is the annotated policy module.
	Policy string
	// ImageLayout is the OCI layout make image wrote.
	ImageLayout string
	// ModuleDir is the product's module (to list the policy's modules).
	ModuleDir string
}

// Release is release.json: what a release holds, by digest.
type Release struct {
	Version  string    `json:"version"`
	Revision string    `json:"revision"`
	Created  time.Time `json:"created"`
	Image    struct {
		File      string            `json:"file"`
		Index     string            `json:"index"`
		Platforms map[string]string `json:"platforms"`
	} `json:"image"`
	Binaries map[string]Artifact `json:"binaries"`
	Policy   Artifact            `json:"policy"`
}

// Artifact is a file of the release and its SBOM.
type Artifact struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	SBOM   string `json:"sbom"`
}

// Assemble writes the release directory.
func Assemble(ctx context.Context, opts Options) (*Release, error) {
	if err := os.RemoveAll(opts.Out); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	rel := &Release{Version: opts.Version, Revision: opts.Revision, Created: opts.Created.UTC(), Binaries: map[string]Artifact{}}
	props := map[string]string{"vcs.revision": opts.Revision, "vcs.source": opts.Source}

	platforms := make([]string, 0, len(opts.Binaries))
	for p := range opts.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	for _, p := range platforms {
		osArch := strings.ReplaceAll(p, "/", "_")
		name := fmt.Sprintf("yunikorn-userinfo_%s_%s", opts.Version, osArch)
		data, err := copyFile(opts.Binaries[p], filepath.Join(opts.Out, name), 0o755)
		if err != nil {
			return nil, err
		}
		bom, err := sbom.Binary(opts.Binaries[p], sbom.Subject{
			Name: "yunikorn-userinfo", Version: opts.Version, Content: data, License: opts.License,
			PURL:        "pkg:golang/github.com/yunikorn-userinfo/userinfo@" + opts.Version + "?os=" + strings.Split(p, "/")[0] + "&arch=" + strings.Split(p, "/")[1],
			Description: "yunikorn-userinfo " + p + " static binary", Properties: maps.Clone(props),
		}, opts.Created)
		if err != nil {
			return nil, err
		}
		if err := writeSBOM(filepath.Join(opts.Out, name+".cdx.json"), bom); err != nil {
			return nil, err
		}
		rel.Binaries[p] = Artifact{File: name, SHA256: sum(data), SBOM: name + ".cdx.json"}
	}

	policyName := fmt.Sprintf("yunikorn-user-info-policy_%s.wasm", opts.Version)
	wasm, err := copyFile(opts.Policy, filepath.Join(opts.Out, policyName), 0o644)
	if err != nil {
		return nil, err
	}
	mods, err := sbom.PolicyModules(ctx, opts.ModuleDir, "./policy")
	if err != nil {
		return nil, err
	}
	policyProps := maps.Clone(props)
	policyProps["build.compiler"] = "tinygo"
	bom := sbom.Policy(sbom.Subject{
		Name: "yunikorn-user-info", Version: opts.Version, Content: wasm, License: opts.License,
		PURL:        "pkg:generic/yunikorn-user-info-policy@" + opts.Version,
		Description: "yunikorn-user-info Kubewarden policy (TinyGo waPC module)", Properties: policyProps,
	}, mods, opts.Created)
	if err := writeSBOM(filepath.Join(opts.Out, policyName+".cdx.json"), bom); err != nil {
		return nil, err
	}
	rel.Policy = Artifact{File: policyName, SHA256: sum(wasm), SBOM: policyName + ".cdx.json"}

	imageName := fmt.Sprintf("yunikorn-userinfo_%s_image.oci.tar", opts.Version)
	idx, platformDigests, err := readImage(opts.ImageLayout)
	if err != nil {
		return nil, err
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, fmt.Errorf("release: image: %w", err)
	}
	if err := tarDir(opts.ImageLayout, filepath.Join(opts.Out, imageName), opts.Created); err != nil {
		return nil, err
	}
	rel.Image.File, rel.Image.Index, rel.Image.Platforms = imageName, d.String(), platformDigests

	js, err := json.MarshalIndent(rel, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if err := os.WriteFile(filepath.Join(opts.Out, ReleaseJSON), append(js, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if err := writeSums(opts.Out); err != nil {
		return nil, err
	}
	return rel, nil
}

// readImage opens the image index of a layout and the digest of each
// platform's manifest.
func readImage(dir string) (v1.ImageIndex, map[string]string, error) {
	idx, err := image.ReadLayout(dir)
	if err != nil {
		return nil, nil, err
	}
	man, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("read the image layout: %w", err)
	}
	platforms := map[string]string{}
	for _, m := range man.Manifests {
		if m.Platform != nil {
			platforms[m.Platform.OS+"/"+m.Platform.Architecture] = m.Digest.String()
		}
	}
	return idx, platforms, nil
}

func copyFile(src, dst string, mode os.FileMode) ([]byte, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	return data, nil
}

func writeSBOM(path string, bom *cdx.BOM) error {
	data, err := sbom.Encode(bom)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	return nil
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tarDir writes dir as a tarball with sorted entries, root ownership and
// one modification time, so the same layout gives the same bytes.
func tarDir(dir, out string, mtime time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release: image tarball: %w", err)
	}
	sort.Strings(paths)
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("release: image tarball: %w", err)
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	tw := tar.NewWriter(bw)
	for _, path := range paths {
		info, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("release: image tarball: %w", err)
		}
		rel, _ := filepath.Rel(dir, path)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime.UTC(), Format: tar.FormatPAX}
		switch {
		case info.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		case info.Mode().IsRegular():
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		default:
			return fmt.Errorf("release: image tarball: %s is neither a file nor a directory", path)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("release: image tarball: %w", err)
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("release: image tarball: %w", err)
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("release: image tarball: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("release: image tarball: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("release: image tarball: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("release: image tarball: %w", err)
	}
	return nil
}

// writeSums writes SHA256SUMS over every other file, in sha256sum's format.
func writeSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == SumsFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		fmt.Fprintf(&b, "%s  %s\n", sum(data), e.Name())
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}
