package certwatch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// clockSkew backdates NotBefore so that a certificate issued on one machine
// is already valid on a peer whose clock is slightly behind.
const clockSkew = time.Minute

// CA is a self-signed certificate authority that issues server and client
// certificates. It is meant for tests and developer modes: the key lives
// only in memory.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// NewCA creates a CA valid from now for validity, with an ECDSA P-256 key.
// It may sign end-entity certificates only (path length 0).
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("new CA: validity %s is not positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new CA: generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, fmt.Errorf("new CA: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("new CA: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("new CA: parse certificate: %w", err)
	}
	return &CA{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// CertPEM returns the CA certificate in PEM, for a client's trust pool, a
// webhook configuration's caBundle or a ClientCAFile.
func (ca *CA) CertPEM() []byte {
	return append([]byte(nil), ca.certPEM...)
}

// Certificate returns the parsed CA certificate. It must not be modified.
func (ca *CA) Certificate() *x509.Certificate {
	return ca.cert
}

// Usage is what an issued certificate may be used for.
type Usage int

const (
	// UsageServer is TLS server authentication (ExtKeyUsageServerAuth).
	UsageServer Usage = 1 << iota
	// UsageClient is TLS client authentication (ExtKeyUsageClientAuth).
	UsageClient
)

// IssueOptions describes a certificate for [CA.Issue].
type IssueOptions struct {
	// CommonName is the subject common name. TLS clients ignore it for
	// host name checks; it helps logs. Default: the first DNS name, else
	// the first IP address.
	CommonName string

	// DNSNames and IPAddresses are the subject alternative names. A server
	// certificate needs at least one.
	DNSNames    []string
	IPAddresses []net.IP

	// Usage selects the extended key usages; combine with |.
	// Default: UsageServer.
	Usage Usage

	// NotBefore is the start of validity. Default: one minute ago, to
	// absorb clock skew. Tests set it in the past to make expired
	// certificates.
	NotBefore time.Time

	// Validity is the lifetime from NotBefore. Default: until the CA
	// expires.
	Validity time.Duration
}

func (o *IssueOptions) setDefaults(ca *CA) {
	if o.CommonName == "" {
		switch {
		case len(o.DNSNames) > 0:
			o.CommonName = o.DNSNames[0]
		case len(o.IPAddresses) > 0:
			o.CommonName = o.IPAddresses[0].String()
		}
	}
	if o.Usage == 0 {
		o.Usage = UsageServer
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-clockSkew)
	}
	if o.Validity <= 0 {
		o.Validity = ca.cert.NotAfter.Sub(o.NotBefore)
	}
}

// Issue creates a key pair and a certificate for it signed by ca, both
// PEM-encoded; the key is PKCS #8 ECDSA P-256.
func (ca *CA) Issue(opts IssueOptions) (certPEM, keyPEM []byte, err error) {
	opts.setDefaults(ca)
	if opts.Usage&^(UsageServer|UsageClient) != 0 {
		return nil, nil, fmt.Errorf("issue certificate: unknown usage %#x", int(opts.Usage))
	}
	if opts.Usage&UsageServer != 0 && len(opts.DNSNames) == 0 && len(opts.IPAddresses) == 0 {
		return nil, nil, errors.New("issue certificate: a server certificate needs a DNS name or IP address")
	}
	if opts.Validity <= 0 {
		return nil, nil, errors.New("issue certificate: validity is not positive (the CA has expired)")
	}
	var extUsage []x509.ExtKeyUsage
	if opts.Usage&UsageServer != 0 {
		extUsage = append(extUsage, x509.ExtKeyUsageServerAuth)
	}
	if opts.Usage&UsageClient != 0 {
		extUsage = append(extUsage, x509.ExtKeyUsageClientAuth)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate: generate key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: opts.CommonName},
		NotBefore:    opts.NotBefore,
		NotAfter:     opts.NotBefore.Add(opts.Validity),
		// ECDSA keys sign; they never encipher keys, so no
		// KeyUsageKeyEncipherment.
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           extUsage,
		BasicConstraintsValid: true,
		DNSNames:              opts.DNSNames,
		IPAddresses:           opts.IPAddresses,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate: create: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate: marshal key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}

// randomSerial returns a random positive 128-bit serial number; RFC 5280
// allows up to 20 octets and asks for unpredictability.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil {
		return nil, fmt.Errorf("generate serial: %w", err)
	}
	// Zero is not a valid serial; shift the range to [1, 2^128].
	return n.Add(n, big.NewInt(1)), nil
}
