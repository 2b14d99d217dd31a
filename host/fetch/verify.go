package fetch

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/yaml"
)

// The cosign signature format Kubewarden verifies: a manifest tagged
// sha256-HEX.sig in the module's repository, each layer a simple-signing
// payload with its base64 signature in an annotation.
const (
	MediaTypeSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
	AnnotationSignature    = "dev.cosignproject.cosign/signature"
)

// Bounds on what a signature manifest may cost to check.
const (
	maxSignatureLayers = 64
	maxPayloadBytes    = 64 << 10
)

// Verification is what a module must be signed with, in the shape of
// Kubewarden's verification config (apiVersion v1): every signature of
// AllOf, and at least MinimumMatches of AnyOf. Only kind pubKey is
// supported: keyless kinds (genericIssuer, githubAction) need Sigstore's
// public Fulcio and Rekor, which this host does not reach.
type Verification struct {
	AllOf []SignatureRule
	AnyOf *AnyOf
}

// AnyOf is the anyOf part of a verification config.
type AnyOf struct {
	MinimumMatches int
	Signatures     []SignatureRule
}

// SignatureRule is one pubKey signature requirement: a signature by Key
// whose payload carries every one of Annotations.
type SignatureRule struct {
	Kind        string            `json:"kind"`
	Owner       string            `json:"owner,omitempty"`
	Key         string            `json:"key"`
	Annotations map[string]string `json:"annotations,omitempty"`

	verifier signature.Verifier
	// name is how messages refer to the rule.
	name string
}

type wireVerification struct {
	APIVersion string          `json:"apiVersion"`
	AllOf      []SignatureRule `json:"allOf"`
	AnyOf      *struct {
		MinimumMatches *int            `json:"minimumMatches"`
		Signatures     []SignatureRule `json:"signatures"`
	} `json:"anyOf"`
}

// ReadVerification reads a verification config file.
func ReadVerification(path string) (*Verification, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read verification config: %w", err)
	}
	v, err := ParseVerification(data)
	if err != nil {
		return nil, fmt.Errorf("verification config %s: %w", path, err)
	}
	return v, nil
}

// ParseVerification parses a verification config (YAML or JSON).
func ParseVerification(data []byte) (*Verification, error) {
	var w wireVerification
	if err := yaml.UnmarshalStrict(data, &w); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if w.APIVersion != "v1" {
		return nil, fmt.Errorf("apiVersion: %q is not a supported version: want v1", w.APIVersion)
	}
	v := &Verification{}
	var errs []error
	for i := range w.AllOf {
		if err := w.AllOf[i].prepare(fmt.Sprintf("allOf[%d]", i)); err != nil {
			errs = append(errs, err)
		}
	}
	v.AllOf = w.AllOf
	if w.AnyOf != nil {
		v.AnyOf = &AnyOf{MinimumMatches: 1, Signatures: w.AnyOf.Signatures}
		if w.AnyOf.MinimumMatches != nil {
			v.AnyOf.MinimumMatches = *w.AnyOf.MinimumMatches
		}
		if len(v.AnyOf.Signatures) == 0 {
			errs = append(errs, errors.New("anyOf.signatures: empty"))
		}
		if v.AnyOf.MinimumMatches < 1 || v.AnyOf.MinimumMatches > len(v.AnyOf.Signatures) {
			errs = append(errs, fmt.Errorf("anyOf.minimumMatches: %d: want 1 to the number of signatures (%d)", v.AnyOf.MinimumMatches, len(v.AnyOf.Signatures)))
		}
		for i := range v.AnyOf.Signatures {
			if err := v.AnyOf.Signatures[i].prepare(fmt.Sprintf("anyOf.signatures[%d]", i)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(v.AllOf) == 0 && v.AnyOf == nil {
		errs = append(errs, errors.New("neither allOf nor anyOf: a verification config must require at least one signature"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return v, nil
}

// KeysVerification requires a signature by each of the PEM public keys
// (as kwctl's --verification-key does), each carrying annotations.
func KeysVerification(keys map[string][]byte, annotations map[string]string) (*Verification, error) {
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	sort.Strings(names)
	v := &Verification{}
	for _, n := range names {
		r := SignatureRule{Kind: "pubKey", Key: string(keys[n]), Annotations: annotations}
		if err := r.prepare(n); err != nil {
			return nil, err
		}
		v.AllOf = append(v.AllOf, r)
	}
	if len(v.AllOf) == 0 {
		return nil, errors.New("no verification keys")
	}
	return v, nil
}

func (r *SignatureRule) prepare(field string) error {
	r.name = field
	if r.Owner != "" {
		r.name += " (" + r.Owner + ")"
	}
	switch r.Kind {
	case "pubKey":
	case "genericIssuer", "githubAction":
		return fmt.Errorf("%s.kind: %s (keyless) signatures are checked against Sigstore's public Fulcio and Rekor, which this host does not reach: use pubKey", field, r.Kind)
	default:
		return fmt.Errorf("%s.kind: %q: want pubKey", field, r.Kind)
	}
	if strings.TrimSpace(r.Key) == "" {
		return fmt.Errorf("%s.key: empty", field)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(r.Key))
	if err != nil {
		return fmt.Errorf("%s.key: not a PEM public key: %w", field, err)
	}
	if r.verifier, err = signature.LoadVerifier(pub, crypto.SHA256); err != nil {
		return fmt.Errorf("%s.key: %w", field, err)
	}
	return nil
}

// signatureLayer is one signature found for a manifest.
type signatureLayer struct {
	payload     []byte
	signature   []byte
	annotations map[string]any
}

// verify checks the signatures of the manifest with digest d in repo
// against v.
func verify(ctx context.Context, repo *remote.Repository, d digest.Digest, v *Verification) error {
	sigs, err := fetchSignatures(ctx, repo, d)
	if err != nil {
		return err
	}
	satisfied := func(r *SignatureRule) bool {
		for _, s := range sigs {
			if r.verifier.VerifySignature(bytes.NewReader(s.signature), bytes.NewReader(s.payload)) != nil {
				continue
			}
			if annotationsMatch(r.Annotations, s.annotations) {
				return true
			}
		}
		return false
	}
	var missing []string
	for i := range v.AllOf {
		if !satisfied(&v.AllOf[i]) {
			missing = append(missing, v.AllOf[i].name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("signature verification failed for %s: no valid signature (of %d found) satisfies %s", d, len(sigs), strings.Join(missing, ", "))
	}
	if v.AnyOf != nil {
		var got int
		missing = nil
		for i := range v.AnyOf.Signatures {
			if satisfied(&v.AnyOf.Signatures[i]) {
				got++
			} else {
				missing = append(missing, v.AnyOf.Signatures[i].name)
			}
		}
		if got < v.AnyOf.MinimumMatches {
			return fmt.Errorf("signature verification failed for %s: anyOf needs %d matching signatures, got %d; not satisfied: %s", d, v.AnyOf.MinimumMatches, got, strings.Join(missing, ", "))
		}
	}
	return nil
}

func annotationsMatch(want map[string]string, got map[string]any) bool {
	for k, v := range want {
		s, ok := got[k].(string)
		if !ok || s != v {
			return false
		}
	}
	return true
}

// fetchSignatures reads the signatures stored under the cosign tag of d.
// Only payloads that are cosign signatures of exactly d are kept: a valid
// signature of another manifest proves nothing about this one.
func fetchSignatures(ctx context.Context, repo *remote.Repository, d digest.Digest) ([]signatureLayer, error) {
	tag := d.Algorithm().String() + "-" + d.Encoded() + ".sig"
	desc, rc, err := repo.FetchReference(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, fmt.Errorf("signature verification failed for %s: the module is not signed (no signature tag %s)", d, tag)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch the signatures of %s: %w", d, err)
	}
	raw, err := readManifest(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("fetch the signatures of %s: %w", d, err)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(raw, &man); err != nil {
		return nil, fmt.Errorf("signature manifest %s: %w", tag, err)
	}
	if len(man.Layers) > maxSignatureLayers {
		return nil, fmt.Errorf("signature manifest %s: %d layers, more than the %d checked", tag, len(man.Layers), maxSignatureLayers)
	}
	var out []signatureLayer
	for _, l := range man.Layers {
		b64, ok := l.Annotations[AnnotationSignature]
		if l.MediaType != MediaTypeSimpleSigning || !ok {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || l.Size <= 0 || l.Size > maxPayloadBytes {
			continue
		}
		prc, err := repo.Fetch(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("fetch signature payload %s: %w", l.Digest, err)
		}
		body, err := content.ReadAll(prc, l)
		prc.Close()
		if err != nil {
			return nil, fmt.Errorf("fetch signature payload %s: %w", l.Digest, err)
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(body, &p); err != nil {
			continue
		}
		if p.Critical.Type != payload.CosignSignatureType || p.Critical.Image.DockerManifestDigest != d.String() {
			continue
		}
		out = append(out, signatureLayer{payload: body, signature: sig, annotations: p.Optional})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("signature verification failed for %s: the signature tag %s holds no cosign signature of this manifest", d, tag)
	}
	return out, nil
}
