package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/yunikorn-userinfo/userinfo/host/fetch"
	"github.com/yunikorn-userinfo/userinfo/release/internal/image"
	"github.com/yunikorn-userinfo/userinfo/release/internal/sbom"
	"github.com/yunikorn-userinfo/userinfo/release/internal/sign"
)

// PublishOptions say where a release goes.
type PublishOptions struct {
	// Dir is the release directory Assemble wrote.
	Dir string
	// Image and Policy are the repositories (HOST/PATH) of the image and of
	// the policy; both are tagged with the release's version (the policy
	// with a leading v, as Kubewarden policies are).
	Image, Policy string
	// Key, if set, signs the image index and the policy manifest.
	Key signature.Signer
	// Remote are the registry options (authentication, transport) of the
	// image, the signatures and the referrers.
	Remote []remote.Option
	// Policies pushes the policy, exactly as `yunikorn-userinfo push` does;
	// it must reach the policy's registry with the same credentials.
	Policies *fetch.Fetcher
}

// Published are the references a publication made.
type Published struct {
	Image, Policy string // by digest
}

// Publish pushes a release.
func Publish(ctx context.Context, opts PublishOptions) (*Published, error) {
	rel, err := ReadRelease(opts.Dir)
	if err != nil {
		return nil, err
	}
	ropts := append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)

	// The image, from its layout tarball.
	layoutDir, err := os.MkdirTemp("", "release-image-")
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	defer os.RemoveAll(layoutDir)
	tarball, err := os.Open(filepath.Join(opts.Dir, rel.Image.File))
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	err = image.Untar(tarball, layoutDir)
	tarball.Close()
	if err != nil {
		return nil, fmt.Errorf("publish: unpack %s: %w", rel.Image.File, err)
	}
	idx, _, err := readImage(layoutDir)
	if err != nil {
		return nil, err
	}
	imageTag, err := name.NewTag(opts.Image + ":" + rel.Version)
	if err != nil {
		return nil, fmt.Errorf("publish: image reference: %w", err)
	}
	if err := remote.WriteIndex(imageTag, idx, ropts...); err != nil {
		return nil, fmt.Errorf("publish: push the image: %w", err)
	}
	imageDigest := imageTag.Context().Digest(rel.Image.Index)

	// The policy, as kwctl push writes it.
	wasm, err := os.ReadFile(filepath.Join(opts.Dir, rel.Policy.File))
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	art, err := fetch.NewArtifact(wasm, false)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	if art.ManifestDescriptor.Digest.String() != rel.Policy.ManifestDigest {
		return nil, fmt.Errorf("publish: the policy's manifest is %s, release.json says %s", art.ManifestDescriptor.Digest, rel.Policy.ManifestDigest)
	}
	policyTag, err := name.NewTag(opts.Policy + ":v" + rel.Version)
	if err != nil {
		return nil, fmt.Errorf("publish: policy reference: %w", err)
	}
	if _, err := opts.Policies.Push(ctx, art, policyTag.String()); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	policyDigest := policyTag.Context().Digest(rel.Policy.ManifestDigest)

	created := rel.Created.Format("2006-01-02T15:04:05Z")
	policySize := art.ManifestDescriptor.Size
	if opts.Key != nil {
		idxSize, err := idx.Size()
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		for _, s := range []struct {
			ref       name.Digest
			mediaType types.MediaType
			size      int64
		}{{imageDigest, types.OCIImageIndex, idxSize}, {policyDigest, types.OCIManifestSchema1, policySize}} {
			// The cosign signature Kubewarden verifies...
			if err := sign.Sign(ctx, s.ref, opts.Key, nil, opts.Remote...); err != nil {
				return nil, fmt.Errorf("publish: %w", err)
			}
			// ...and the same signature as a sigstore bundle referrer.
			doc, err := sign.NewBundle(ctx, opts.Key, s.ref.Context().Name(), s.ref.DigestStr())
			if err != nil {
				return nil, fmt.Errorf("publish: %w", err)
			}
			subject, err := descriptor(s.ref, s.mediaType, s.size)
			if err != nil {
				return nil, fmt.Errorf("publish: %w", err)
			}
			if err := attachReferrer(s.ref.Context(), subject, sign.BundleMediaType, doc, sign.BundleLayerAnnotations, created, ropts); err != nil {
				return nil, fmt.Errorf("publish: attach the sigstore bundle of %s: %w", s.ref, err)
			}
		}
	}

	// Each SBOM as a referrer of the manifest it describes.
	attach := func(subject name.Digest, mediaType types.MediaType, size int64, file string) error {
		doc, err := os.ReadFile(filepath.Join(opts.Dir, file))
		if err != nil {
			return err
		}
		d, err := descriptor(subject, mediaType, size)
		if err != nil {
			return err
		}
		return attachReferrer(subject.Context(), d, sbom.MediaType, doc, nil, created, ropts)
	}
	idxMan, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	for _, m := range idxMan.Manifests {
		if m.Platform == nil {
			continue
		}
		b, ok := rel.Binaries[m.Platform.OS+"/"+m.Platform.Architecture]
		if !ok {
			return nil, fmt.Errorf("publish: no binary SBOM for %s/%s", m.Platform.OS, m.Platform.Architecture)
		}
		if err := attach(imageTag.Context().Digest(m.Digest.String()), m.MediaType, m.Size, b.SBOM); err != nil {
			return nil, fmt.Errorf("publish: attach %s: %w", b.SBOM, err)
		}
	}
	if err := attach(policyDigest, types.OCIManifestSchema1, policySize, rel.Policy.SBOM); err != nil {
		return nil, fmt.Errorf("publish: attach %s: %w", rel.Policy.SBOM, err)
	}
	return &Published{Image: imageDigest.String(), Policy: "registry://" + policyDigest.String()}, nil
}

// rawManifest is a manifest pushed byte for byte.
type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mediaType, nil }

// The empty config of an OCI artifact manifest.
const emptyConfigMediaType = "application/vnd.oci.empty.v1+json"

func descriptor(ref name.Digest, mediaType types.MediaType, size int64) (v1.Descriptor, error) {
	h, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mediaType, Digest: h, Size: size}, nil
}

// attachReferrer pushes an artifact manifest whose subject is the
// described manifest: the given artifactType, one layer of that media
// type holding doc, the empty config. A registry with the referrers API
// lists it under the subject; cosign and oras discover it there.
func attachReferrer(repo name.Repository, subject v1.Descriptor, artifactType string, doc []byte, layerAnnotations map[string]string, created string, ropts []remote.Option) error {
	layer := static.NewLayer(doc, types.MediaType(artifactType))
	cfg := static.NewLayer([]byte("{}"), emptyConfigMediaType)
	for _, l := range []v1.Layer{cfg, layer} {
		if err := remote.WriteLayer(repo, l, ropts...); err != nil {
			return err
		}
	}
	ld, err := descriptorOf(layer, types.MediaType(artifactType))
	if err != nil {
		return err
	}
	ld.Annotations = layerAnnotations
	cd, err := descriptorOf(cfg, emptyConfigMediaType)
	if err != nil {
		return err
	}
	man := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        cd,
		Layers:        []v1.Descriptor{ld},
		Subject:       &subject,
		Annotations:   map[string]string{"org.opencontainers.image.created": created},
	}
	raw, err := json.Marshal(man)
	if err != nil {
		return err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return remote.Put(repo.Digest(h.String()), rawManifest{raw, types.OCIManifestSchema1}, ropts...)
}

func descriptorOf(l v1.Layer, mt types.MediaType) (v1.Descriptor, error) {
	d, err := l.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := l.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Digest: d, Size: size}, nil
}
