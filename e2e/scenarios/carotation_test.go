package scenarios

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/yunikorn-userinfo/userinfo/e2e/internal/cluster"
)

// bundleSettle is how long the CA rotation waits after each caBundle
// change before the next step: the API server loads webhook
// configurations through an informer, so a stored bundle is in force a
// moment later, not at once (in a cluster with several API servers, each
// loads it on its own).
const bundleSettle = 5 * time.Second

// rotationCA is the certificate authority a CA rotation moves serve to, as
// a renewed cert-manager CA or a new CA behind tls.existingSecret: a key
// pair of its own, so nothing it signs verifies against the old CA.
type rotationCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newRotationCA(t *testing.T) *rotationCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err, "generate the new CA's key")
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(t),
		Subject:               pkix.Name{CommonName: "yunikorn-userinfo-e2e-ca-rotated"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err, "sign the new CA")
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err, "parse the new CA")
	return &rotationCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// rotateServing writes a serving certificate from this CA, for the
// addresses and names the replica's first one had, over the files serve
// reads (--cert-file, --key-file), as the kubelet updates a mounted Secret.
func (ca *rotationCA) rotateServing(t *testing.T, wh *cluster.Webhook, ips []net.IP, dnsNames []string) {
	t.Helper()
	certFile, keyFile := flagValue(wh.Process.Args, "cert-file"), flagValue(wh.Process.Args, "key-file")
	require.NotEmpty(t, certFile, "%s runs with --cert-file", wh.Process.Name)
	require.NotEmpty(t, keyFile, "%s runs with --key-file", wh.Process.Name)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err, "generate the serving key")
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(t),
		Subject:      pkix.Name{CommonName: wh.Process.Name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	require.NoError(t, err, "sign the serving certificate")
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err, "encode the serving key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
}

// servesFrom reports whether the replica presents a certificate that
// verifies against this CA alone.
func (ca *rotationCA) servesFrom(ctx context.Context, wh *cluster.Webhook) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", wh.Addr)
	if err != nil {
		return fmt.Errorf("connect to %s trusting the new CA only: %w", wh.Process.Name, err)
	}
	return conn.Close()
}

// probeClient is the balancer's readiness probe client: it trusts both
// CAs, so the probe keeps answering across the CA rotation (a kubelet's
// HTTPS probe verifies no certificate at all).
func probeClient(caPEMs ...[]byte) (*http.Client, error) {
	pool := x509.NewCertPool()
	for _, p := range caPEMs {
		if !pool.AppendCertsFromPEM(p) {
			return nil, errors.New("the probe's CA pool: no certificate found")
		}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}, nil
}

// setCABundle stores bundle as the caBundle of every webhook of the named
// mutating and validating configurations, as `kubectl patch` or a Helm
// upgrade with a new tls.caBundle does.
func setCABundle(ctx context.Context, t *testing.T, mutating, validating string, bundle []byte) {
	t.Helper()
	adm := client(admin).AdmissionregistrationV1()
	mwc, err := adm.MutatingWebhookConfigurations().Get(ctx, mutating, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = bundle
	}
	_, err = adm.MutatingWebhookConfigurations().Update(ctx, mwc, metav1.UpdateOptions{})
	require.NoError(t, err, "store the caBundle of %s", mutating)
	vwc, err := adm.ValidatingWebhookConfigurations().Get(ctx, validating, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = bundle
	}
	_, err = adm.ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{})
	require.NoError(t, err, "store the caBundle of %s", validating)
}

// flagValue is the value of "--name value" in args, or "".
func flagValue(args []string, name string) string {
	for i := range len(args) - 1 {
		if args[i] == "--"+name {
			return args[i+1]
		}
	}
	return ""
}

func randomSerial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	require.NoError(t, err, "a certificate serial")
	return n
}
