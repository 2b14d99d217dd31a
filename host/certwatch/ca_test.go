package certwatch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewCA(t *testing.T) {
	t.Parallel()
	ca, err := NewCA("yunikorn-userinfo dev CA", time.Hour)
	require.NoError(t, err)

	c := ca.Certificate()
	assert.True(t, c.IsCA)
	assert.True(t, c.MaxPathLenZero)
	assert.Equal(t, "yunikorn-userinfo dev CA", c.Subject.CommonName)
	assert.NotZero(t, c.KeyUsage&x509.KeyUsageCertSign)
	assert.NotEmpty(t, c.SubjectKeyId)
	assert.WithinDuration(t, time.Now().Add(time.Hour), c.NotAfter, time.Minute)
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	require.True(t, ok)
	assert.Equal(t, elliptic.P256(), pub.Curve)

	// CertPEM is a copy: callers cannot corrupt the CA.
	p := ca.CertPEM()
	p[0] = 'X'
	assert.Equal(t, byte('-'), ca.CertPEM()[0])
}

func TestNewCAErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		validity time.Duration
	}{
		{name: "zero validity", validity: 0},
		{name: "negative validity", validity: -time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewCA("ca", tc.validity)
			assert.ErrorContains(t, err, "new CA: validity")
		})
	}
}

func TestIssue(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	roots := pool(t, ca)

	tests := []struct {
		name       string
		opts       IssueOptions
		wantCN     string
		wantUsages []x509.ExtKeyUsage
	}{
		{
			name:       "server with DNS names and IP",
			opts:       IssueOptions{DNSNames: []string{"userinfo.kube-system.svc", "userinfo"}, IPAddresses: localhost},
			wantCN:     "userinfo.kube-system.svc",
			wantUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		{
			name:       "server with IP only",
			opts:       IssueOptions{IPAddresses: []net.IP{net.ParseIP("::1")}},
			wantCN:     "::1",
			wantUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		{
			name:       "client",
			opts:       IssueOptions{CommonName: "kube-apiserver", Usage: UsageClient},
			wantCN:     "kube-apiserver",
			wantUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			name:       "server and client",
			opts:       IssueOptions{CommonName: "both", DNSNames: []string{"both.example"}, Usage: UsageServer | UsageClient},
			wantCN:     "both",
			wantUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := issue(t, ca, tc.opts)
			leaf := p.leaf(t)

			assert.Equal(t, tc.wantCN, leaf.Subject.CommonName)
			assert.Equal(t, tc.wantUsages, leaf.ExtKeyUsage)
			assert.Equal(t, x509.KeyUsageDigitalSignature, leaf.KeyUsage)
			assert.False(t, leaf.IsCA)
			assert.Equal(t, tc.opts.DNSNames, leaf.DNSNames)
			assert.Equal(t, ca.Certificate().SubjectKeyId, leaf.AuthorityKeyId)
			assert.Equal(t, ca.Certificate().NotAfter, leaf.NotAfter, "default validity ends with the CA")
			pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
			require.True(t, ok)
			assert.Equal(t, elliptic.P256(), pub.Curve)
			// The key file matches the certificate.
			p.tlsCertificate(t)

			for _, usage := range tc.wantUsages {
				_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}})
				assert.NoError(t, err, "verify for usage %v", usage)
			}
			for _, name := range tc.opts.DNSNames {
				assert.NoError(t, leaf.VerifyHostname(name))
			}
			for _, ip := range tc.opts.IPAddresses {
				assert.NoError(t, leaf.VerifyHostname(ip.String()))
			}
		})
	}
}

func TestIssueUsageIsEnforced(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	roots := pool(t, ca)
	tests := []struct {
		name     string
		usage    Usage
		wrongUse x509.ExtKeyUsage
	}{
		{name: "client certificate cannot serve", usage: UsageClient, wrongUse: x509.ExtKeyUsageServerAuth},
		{name: "server certificate cannot be a client", usage: UsageServer, wrongUse: x509.ExtKeyUsageClientAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			leaf := issue(t, ca, IssueOptions{CommonName: "x", IPAddresses: localhost, Usage: tc.usage}).leaf(t)
			_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.wrongUse}})
			assert.Error(t, err)
		})
	}
}

func TestIssueSerialsDiffer(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	a, b := serverPair(t, ca), serverPair(t, ca)
	assert.NotEqual(t, a.serial(t), b.serial(t))
	assert.NotEqual(t, ca.Certificate().SerialNumber, a.serial(t))
	assert.Positive(t, a.serial(t).Sign())
}

func TestIssueErrors(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "test CA")
	tests := []struct {
		name    string
		opts    IssueOptions
		wantErr string
	}{
		{name: "server without names", opts: IssueOptions{CommonName: "nameless"}, wantErr: "needs a DNS name or IP address"},
		{name: "unknown usage", opts: IssueOptions{DNSNames: []string{"a"}, Usage: 8}, wantErr: "unknown usage"},
		{
			name:    "starts after the CA expired",
			opts:    IssueOptions{DNSNames: []string{"a"}, NotBefore: time.Now().Add(2 * time.Hour)},
			wantErr: "validity is not positive",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := ca.Issue(tc.opts)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
