// Package sign signs images and policy artifacts in a registry with a key
// pair, in the cosign signature format Kubewarden verifies: a
// simple-signing payload naming the manifest digest, signed with the key,
// stored as a layer of the manifest tagged sha256-HEX.sig. cosign's own
// libraries write it, so cosign verify and Kubewarden read it.
package sign

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// GenerateKeyPair makes a cosign key pair: the private key encrypted with
// password, as cosign generate-key-pair writes it, and the PEM public key.
func GenerateKeyPair(password []byte) (privatePEM, publicPEM []byte, err error) {
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, nil, fmt.Errorf("generate key pair: %w", err)
	}
	return keys.PrivateBytes, keys.PublicBytes, nil
}

// LoadKey decrypts a cosign private key.
func LoadKey(privatePEM, password []byte) (signature.SignerVerifier, error) {
	sv, err := cosign.LoadPrivateKey(privatePEM, password, nil)
	if err != nil {
		return nil, fmt.Errorf("load the signing key: %w", err)
	}
	return sv, nil
}

// Sign signs the manifest ref names (by digest) with key and annotations,
// adding the signature to those already stored for it.
func Sign(ctx context.Context, ref name.Digest, key signature.Signer, annotations map[string]any, opts ...remote.Option) error {
	body, err := payload.Cosign{Image: ref, Annotations: annotations}.MarshalJSON()
	if err != nil {
		return fmt.Errorf("sign %s: payload: %w", ref, err)
	}
	sig, err := key.SignMessage(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("sign %s: %w", ref, err)
	}
	ociSig, err := static.NewSignature(body, base64.StdEncoding.EncodeToString(sig))
	if err != nil {
		return fmt.Errorf("sign %s: %w", ref, err)
	}
	ropts := []ociremote.Option{ociremote.WithRemoteOptions(append([]remote.Option{remote.WithContext(ctx)}, opts...)...)}
	entity, err := ociremote.SignedEntity(ref, ropts...)
	if err != nil {
		return fmt.Errorf("sign %s: read the manifest: %w", ref, err)
	}
	signed, err := mutate.AttachSignatureToEntity(entity, ociSig)
	if err != nil {
		return fmt.Errorf("sign %s: %w", ref, err)
	}
	if err := ociremote.WriteSignatures(ref.Repository, signed, ropts...); err != nil {
		return fmt.Errorf("sign %s: write the signature: %w", ref, err)
	}
	return nil
}
