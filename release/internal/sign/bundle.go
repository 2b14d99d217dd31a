package sign

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/opencontainers/go-digest"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
)

// The sigstore bundle as cosign v3 attaches it to an image: an OCI
// referrer of this artifact type, whose one layer is the bundle, holding a
// DSSE envelope over an in-toto statement naming the manifest digest.
const (
	BundleMediaType   = "application/vnd.dev.sigstore.bundle.v0.3+json"
	StatementType     = "https://in-toto.io/Statement/v1"
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
	InTotoPayloadType = "application/vnd.in-toto+json"
)

// BundleLayerAnnotations are the annotations of the bundle's layer.
var BundleLayerAnnotations = map[string]string{
	"dev.sigstore.bundle.content":       "dsse-envelope",
	"dev.sigstore.bundle.predicateType": SignPredicateType,
}

// keypair lets sigstore-go sign with a cosign key (ECDSA P-256, SHA-256).
type keypair struct {
	sv  signature.Signer
	pub crypto.PublicKey
}

func (k keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (k keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

// GetHint is the key's fingerprint: base64 of the SHA-256 of its PKIX form.
func (k keypair) GetHint() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.pub)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(der)
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

func (k keypair) GetKeyAlgorithm() string          { return "ECDSA" }
func (k keypair) GetPublicKey() crypto.PublicKey   { return k.pub }
func (k keypair) GetPublicKeyPem() (string, error) { return pemOf(k.pub) }

func (k keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sig, err := k.sv.SignMessage(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(data)
	return sig, sum[:], nil
}

func pemOf(pub crypto.PublicKey) (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	return string(b), err
}

// Statement is the in-toto statement a bundle signs: the manifest named by
// repository and sha256 digest, with cosign's signing predicate.
func Statement(repository, manifestDigest string) ([]byte, error) {
	d, err := digest.Parse(manifestDigest)
	if err != nil || d.Algorithm() != digest.SHA256 {
		return nil, fmt.Errorf("statement: %q is not a sha256 digest", manifestDigest)
	}
	return json.Marshal(map[string]any{
		"_type":         StatementType,
		"subject":       []any{map[string]any{"name": repository, "digest": map[string]string{"sha256": d.Encoded()}}},
		"predicateType": SignPredicateType,
		"predicate":     map[string]any{},
	})
}

// NewBundle signs the statement for a manifest with key as a sigstore
// bundle (v0.3, DSSE) and returns its JSON. Without Fulcio, Rekor or a
// timestamp authority (offline), the bundle carries the key's hint as its
// verification material; verifiers check it against the public key.
func NewBundle(ctx context.Context, key signature.Signer, repository, manifestDigest string) ([]byte, error) {
	statement, err := Statement(repository, manifestDigest)
	if err != nil {
		return nil, err
	}
	pub, err := key.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	b, err := sgsign.Bundle(&sgsign.DSSEData{Data: statement, PayloadType: InTotoPayloadType}, keypair{sv: key, pub: pub}, sgsign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("bundle: sign %s: %w", manifestDigest, err)
	}
	out, err := protojson.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return out, nil
}
