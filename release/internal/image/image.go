// Package image assembles the webhook's container image the way ko and
// crane do, with go-containerregistry and no daemon: for each platform, one
// layer holding the static binary and nothing else, a configuration that
// runs it as 65532:65532 with `serve`, and an OCI image index over the
// platforms. Every timestamp is the one given (the commit's), so the same
// binaries give the same digests on any machine.
package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Defaults of the image.
const (
	// BinaryPath is where the binary sits in the image.
	BinaryPath = "/yunikorn-userinfo"
	// User is the numeric user and group the entrypoint runs as: the
	// "nonroot" identity of distroless images.
	User = "65532:65532"
)

// Platform is one architecture of the image and its binary.
type Platform struct {
	OS, Architecture, Variant string
	// Binary is the path of the static binary built for it.
	Binary string
}

// Options describe the image.
type Options struct {
	Platforms []Platform
	// Created is every timestamp in the image: the commit time.
	Created time.Time
	// Annotations go on the index and every manifest, and become labels of
	// every configuration: org.opencontainers.image.* (source, revision,
	// version, created, licenses...).
	Annotations map[string]string
}

// Build returns the image index.
func Build(opts Options) (v1.ImageIndex, error) {
	if len(opts.Platforms) == 0 {
		return nil, errors.New("build image: no platforms")
	}
	if opts.Created.IsZero() {
		return nil, errors.New("build image: no creation time (use the commit's)")
	}
	created := v1.Time{Time: opts.Created.UTC()}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range opts.Platforms {
		img, err := platformImage(p, created, opts.Annotations)
		if err != nil {
			return nil, fmt.Errorf("build image for %s/%s: %w", p.OS, p.Architecture, err)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant},
			},
		})
	}
	idx = mutate.AppendManifests(idx, adds...)
	ann, ok := mutate.Annotations(idx, opts.Annotations).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("build image: annotating the index did not give an index")
	}
	return ann, nil
}

func platformImage(p Platform, created v1.Time, annotations map[string]string) (v1.Image, error) {
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	layerTar, err := binaryTar(bin, created.Time)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "make image: the static yunikorn-userinfo binary",
			Comment:   "built with go-containerregistry, no base image",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Created = created
	cfg.Config = v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{"serve"},
		Env:        []string{"PATH=/"},
		Labels:     maps.Clone(annotations),
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	ann, ok := mutate.Annotations(img, annotations).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the image did not give an image")
	}
	return ann, nil
}

// binaryTar is the layer: the binary, owned by root, executable by all,
// with the given modification time and no other entry.
func binaryTar(bin []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     BinaryPath[1:],
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  mtime.UTC(),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// ReadLayout opens the image index that an OCI layout written by
// WriteLayout names in its index.json.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read the image layout %s: %w (run make image)", dir, err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("read the image layout %s: %w", dir, err)
	}
	man, err := outer.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read the image layout %s: %w", dir, err)
	}
	if len(man.Manifests) != 1 {
		return nil, fmt.Errorf("read the image layout %s: index.json names %d manifests, want one image index", dir, len(man.Manifests))
	}
	idx, err := outer.ImageIndex(man.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("read the image layout %s: %w", dir, err)
	}
	return idx, nil
}

// WriteLayout writes idx as an OCI image layout at dir (replacing what is
// there), its index.json naming it by refName (org.opencontainers.image.ref.name).
func WriteLayout(dir string, idx v1.ImageIndex, refName string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": refName})); err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	return nil
}

// Untar writes a tarball of directories and regular files (an image's
// flattened file system, or a layout tarball) under dir, keeping file
// modes; entries cannot climb out of dir, and any other entry type is an
// error.
func Untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("untar: %w", err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		mode := os.FileMode(h.Mode) & 0o777
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode|0o700); err != nil {
				return fmt.Errorf("untar: %w", err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return fmt.Errorf("untar: %w", err)
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return fmt.Errorf("untar: %w", err)
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("untar %s: %w", h.Name, err)
			}
		default:
			return fmt.Errorf("untar: %s: entry type %c is neither a file nor a directory", h.Name, h.Typeflag)
		}
	}
}
