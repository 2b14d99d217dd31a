package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is the throwaway certificate authority of one cluster run. Everything
// that serves TLS to a client of the cluster (the API server, each webhook)
// gets a certificate from it, so one CA bundle verifies them all.
type PKI struct {
	// Dir holds the PEM files.
	Dir string
	// CAFile is the CA certificate (PEM); CAPEM its content, which is also
	// the caBundle of the webhook configurations.
	CAFile string
	CAPEM  []byte

	caCert *x509.Certificate
	caKey  crypto.Signer
}

// certValidity covers any test run with room to spare.
const certValidity = 24 * time.Hour

// newPKI creates a CA in dir.
func newPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the pki directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the ca key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "yunikorn-userinfo-e2e-ca"},
		NotBefore:             now.Add(-time.Hour), // tolerate clock skew between processes
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign the ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse the ca certificate: %w", err)
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.crt"), caCert: cert, caKey: key}
	p.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(p.CAFile, p.CAPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write the ca certificate: %w", err)
	}
	return p, nil
}

// IssueServing writes a serving certificate and key for the given IPs and
// DNS names as <name>.crt and <name>.key and returns their paths.
func (p *PKI) IssueServing(name string, ips []net.IP, dnsNames []string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate the %s key: %w", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return "", "", fmt.Errorf("sign the %s certificate: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encode the %s key: %w", name, err)
	}
	certFile = filepath.Join(p.Dir, name+".crt")
	keyFile = filepath.Join(p.Dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", fmt.Errorf("write the %s certificate: %w", name, err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("write the %s key: %w", name, err)
	}
	return certFile, keyFile, nil
}

// IssueClient returns a client certificate and its key (PEM) for user
// (the Common Name) in groups (the Organizations), as the API server's
// x509 authenticator reads them. Names that are not PrintableString are
// encoded as UTF8String, so any valid UTF-8 fits; the TLS handshake bounds
// the certificate's size (64 KiB).
func (p *PKI) IssueClient(user string, groups []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the client key of %q: %w", user, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the client certificate of %q: %w", user, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the client key of %q: %w", user, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// serviceAccountKeys writes the RSA key pair that signs and verifies
// service account tokens (sa.key, sa.pub); RSA, as kubeadm makes it.
func (p *PKI) serviceAccountKeys() (privFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generate the service account key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", fmt.Errorf("encode the service account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", fmt.Errorf("encode the service account public key: %w", err)
	}
	privFile = filepath.Join(p.Dir, "sa.key")
	pubFile = filepath.Join(p.Dir, "sa.pub")
	if err := os.WriteFile(privFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("write the service account key: %w", err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("write the service account public key: %w", err)
	}
	return privFile, pubFile, nil
}

// serial returns a random 127-bit certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on Linux; a fixed serial is still valid.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
