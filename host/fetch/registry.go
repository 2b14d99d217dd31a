package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// The media types of a Kubewarden policy artifact.
const (
	MediaTypeWasmConfig = "application/vnd.wasm.config.v1+json"
	MediaTypeWasmLayer  = "application/vnd.wasm.content.layer.v1+wasm"
)

// maxManifestBytes bounds a manifest read from a registry.
const maxManifestBytes = 4 << 20

func (f *Fetcher) repository(ref registry.Reference, p protocol) *remote.Repository {
	header := http.Header{}
	header.Set("User-Agent", "yunikorn-userinfo")
	return &remote.Repository{
		Client: &auth.Client{
			Client:     p.client,
			Header:     header,
			Cache:      auth.NewCache(),
			Credential: f.cred,
		},
		Reference:          ref,
		PlainHTTP:          p.plainHTTP,
		ManifestMediaTypes: []string{ocispec.MediaTypeImageManifest},
		MaxMetadataBytes:   maxManifestBytes,
	}
}

// pullPolicy fetches a policy artifact: its manifest (checked against the
// reference's digest, if it has one), then its one Wasm layer, checked
// against the digest and size the manifest names.
func (f *Fetcher) pullPolicy(ctx context.Context, loc Location) (*Module, error) {
	var m *Module
	err := f.withProtocols(ctx, loc.Host(), func(p protocol) error {
		repo := f.repository(loc.Ref, p)
		desc, rc, err := repo.FetchReference(ctx, loc.Ref.Reference)
		if err != nil {
			return explainRegistryError(loc.Ref, err)
		}
		raw, err := readManifest(rc, desc)
		if err != nil {
			return permanent{err}
		}
		layer, err := policyLayer(desc, raw, f.opts.MaxModuleBytes)
		if err != nil {
			return permanent{err}
		}
		if f.opts.Verification != nil {
			// The manifest names the layer by digest, and the layer is
			// checked against it below: a signed manifest covers the module.
			if err := verify(ctx, repo, desc.Digest, f.opts.Verification); err != nil {
				return permanent{err}
			}
		}
		lrc, err := repo.Fetch(ctx, layer)
		if err != nil {
			return explainRegistryError(loc.Ref, err)
		}
		defer lrc.Close()
		wasm, err := content.ReadAll(lrc, layer)
		if err != nil {
			return permanent{fmt.Errorf("read layer %s: %w", layer.Digest, err)}
		}
		m = &Module{Location: loc, Wasm: wasm, Digest: layer.Digest, Manifest: desc.Digest}
		return nil
	})
	return m, err
}

// readManifest reads a manifest the registry described, refusing one
// larger than maxManifestBytes before reading it: content.ReadAll allocates
// the declared size, and oras-go bounds only some manifest reads.
func readManifest(rc io.ReadCloser, desc ocispec.Descriptor) ([]byte, error) {
	defer rc.Close()
	if desc.Size < 0 || desc.Size > maxManifestBytes {
		return nil, fmt.Errorf("manifest %s: %d bytes, more than the %d accepted", desc.Digest, desc.Size, maxManifestBytes)
	}
	raw, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", desc.Digest, err)
	}
	return raw, nil
}

// policyLayer checks that a manifest is a Kubewarden policy artifact and
// returns its Wasm layer.
func policyLayer(desc ocispec.Descriptor, raw []byte, maxBytes int64) (ocispec.Descriptor, error) {
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		return ocispec.Descriptor{}, fmt.Errorf("manifest %s has media type %q: want an OCI image manifest holding a policy", desc.Digest, desc.MediaType)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(raw, &man); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	if man.Config.MediaType != MediaTypeWasmConfig {
		return ocispec.Descriptor{}, fmt.Errorf("manifest %s: config.mediaType is %q, want %q: not a Kubewarden policy (a container image?)", desc.Digest, man.Config.MediaType, MediaTypeWasmConfig)
	}
	var layers []ocispec.Descriptor
	for _, l := range man.Layers {
		if l.MediaType == MediaTypeWasmLayer {
			layers = append(layers, l)
		}
	}
	if len(layers) != 1 || len(man.Layers) != 1 {
		return ocispec.Descriptor{}, fmt.Errorf("manifest %s: layers: want exactly one layer of media type %q, found %d layers", desc.Digest, MediaTypeWasmLayer, len(man.Layers))
	}
	l := layers[0]
	if err := l.Digest.Validate(); err != nil || l.Digest.Algorithm() != digest.SHA256 {
		return ocispec.Descriptor{}, fmt.Errorf("manifest %s: layers[0].digest %q: want a sha256 digest", desc.Digest, l.Digest)
	}
	if l.Size <= 0 || l.Size > maxBytes {
		return ocispec.Descriptor{}, fmt.Errorf("manifest %s: layers[0].size %d: want 1 to %d bytes", desc.Digest, l.Size, maxBytes)
	}
	return l, nil
}

// explainRegistryError names what the registry said, keeping transport
// errors (which another protocol may overcome) as they are.
func explainRegistryError(ref registry.Reference, err error) error {
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return permanent{fmt.Errorf("registry %s asks for credentials and none are configured for it: log in with docker login %s, or give the directory of a config.json with --docker-config-json-path: %w", ref.Registry, ref.Registry, err)}
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return permanent{fmt.Errorf("registry %s: %s not found: %w", ref.Registry, refName(ref), err)}
	}
	var resp *errcode.ErrorResponse
	if !errors.As(err, &resp) {
		return err
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return permanent{fmt.Errorf("registry %s refused the credentials (401 Unauthorized): log in with docker login, or check the config.json given with --docker-config-json-path: %w", ref.Registry, err)}
	case http.StatusForbidden:
		return permanent{fmt.Errorf("registry %s: access to %s denied (403 Forbidden): %w", ref.Registry, ref.Repository, err)}
	case http.StatusNotFound:
		return permanent{fmt.Errorf("registry %s: %s not found: %w", ref.Registry, refName(ref), err)}
	}
	return permanent{err}
}

// refName is REPOSITORY:TAG or REPOSITORY@DIGEST.
func refName(ref registry.Reference) string {
	if ref.ValidateReferenceAsDigest() == nil {
		return ref.Repository + "@" + ref.Reference
	}
	return ref.Repository + ":" + ref.Reference
}

// Pushed is the result of a push.
type Pushed struct {
	// Manifest is the manifest's descriptor.
	Manifest ocispec.Descriptor
	// Immutable is the reference by digest: registry://HOST/REPO@DIGEST.
	Immutable string
}

// Push uploads art to the registry reference dest (registry:// optional)
// and tags its manifest.
func (f *Fetcher) Push(ctx context.Context, art *Artifact, dest string) (*Pushed, error) {
	refText, _ := strings.CutPrefix(dest, string(SchemeRegistry)+"://")
	if strings.Contains(refText, "://") {
		return nil, fmt.Errorf("push destination %q: want [registry://]HOST/REPOSITORY[:TAG]", dest)
	}
	ref, err := ParseRegistryReference(refText)
	if err != nil {
		return nil, fmt.Errorf("push destination %q: %w", dest, err)
	}
	if ref.ValidateReferenceAsDigest() == nil {
		return nil, fmt.Errorf("push destination %q: want a tag, not a digest", dest)
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	err = f.withProtocols(ctx, ref.Registry, func(p protocol) error {
		repo := f.repository(ref, p)
		for _, blob := range []struct {
			desc ocispec.Descriptor
			data []byte
		}{{art.ConfigDescriptor, art.Config}, {art.LayerDescriptor, art.Wasm}} {
			exists, err := repo.Blobs().Exists(ctx, blob.desc)
			if err != nil {
				return explainRegistryError(ref, err)
			}
			if exists {
				continue
			}
			if err := repo.Blobs().Push(ctx, blob.desc, bytes.NewReader(blob.data)); err != nil {
				return explainRegistryError(ref, err)
			}
		}
		if err := repo.Manifests().PushReference(ctx, art.ManifestDescriptor, bytes.NewReader(art.Manifest), ref.Reference); err != nil {
			return explainRegistryError(ref, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", dest, err)
	}
	return &Pushed{
		Manifest:  art.ManifestDescriptor,
		Immutable: "registry://" + ref.Registry + "/" + ref.Repository + "@" + art.ManifestDescriptor.Digest.String(),
	}, nil
}
