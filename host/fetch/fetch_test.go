package fetch

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/yunikorn-userinfo/userinfo/host/metadata"
)

func TestParseLocation(t *testing.T) {
	tests := []struct {
		raw, scheme, host, path, ref, err string
	}{
		{raw: "policy.wasm", scheme: "file", path: "policy.wasm"},
		{raw: "file:///tmp/p.wasm", scheme: "file", path: "/tmp/p.wasm"},
		{raw: "https://example.com/p.wasm", scheme: "https", host: "example.com"},
		{raw: "registry://ghcr.io/org/policy:v1", scheme: "registry", host: "ghcr.io", ref: "org/policy:v1"},
		{raw: "registry://127.0.0.1:5000/policy", scheme: "registry", host: "127.0.0.1:5000", ref: "policy:latest"},
		{raw: "registry://ghcr.io/org/policy@sha256:" + strings.Repeat("a", 64), scheme: "registry", host: "ghcr.io", ref: "org/policy@sha256:" + strings.Repeat("a", 64)},
		{raw: "file://", err: "empty path"},
		{raw: "http://example.com/p.wasm", err: "plain http is not accepted"},
		{raw: "ftp://example.com/p.wasm", err: `unsupported scheme "ftp"`},
		{raw: "https://example.com/", err: "want https://HOST/PATH"},
		{raw: "https://../policy.wasm", err: "want https://HOST/PATH"},
		{raw: "https://user:secret@example.com/p.wasm", err: "credentials in the URL"},
		{raw: "registry://ghcr.io", err: "registry://ghcr.io"},
		{raw: "registry://ghcr.io/Upper/Case:v1", err: "invalid reference"},
		{raw: "registry://ghcr.io/org/policy@sha256:short", err: "invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			loc, err := ParseLocation(tc.raw)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.NotContains(t, err.Error(), "secret", "a password in the reference is never echoed")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, Scheme(tc.scheme), loc.Scheme)
			assert.Equal(t, tc.host, loc.Host())
			assert.Equal(t, tc.path, loc.Path)
			if tc.ref != "" {
				assert.Equal(t, tc.ref, refName(loc.Ref))
			}
		})
	}
}

func TestParseSources(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600))

	doc := "insecure_sources: [\"dev.local:5000\"]\nsource_authorities:\n  \"reg.internal\":\n    - type: Path\n      path: " + caFile +
		"\n    - type: Data\n      data: |\n" + indent(string(certPEM), "        ") + "proxies:\n  httpsProxy: http://proxy:3128\n"
	s, err := ParseSources([]byte(doc))
	require.NoError(t, err)
	assert.True(t, s.IsInsecure("dev.local:5000"))
	assert.False(t, s.IsInsecure("dev.local"), "hosts match as written, port included")
	assert.Len(t, s.authority("reg.internal"), 2)
	assert.Empty(t, s.authority("other"))

	tests := []struct{ doc, err string }{
		{"insecure_source: [x]\n", `unknown field "insecure_source"`},
		{"insecure_sources: [\"\"]\n", "insecure_sources[0]: empty host"},
		{"source_authorities:\n  h:\n    - type: File\n      path: /x\n", `source_authorities["h"][0].type: "File" is neither Path nor Data`},
		{"source_authorities:\n  h:\n    - type: Path\n", `source_authorities["h"][0]: type Path needs path and no data`},
		{"source_authorities:\n  h:\n    - type: Path\n      path: /does/not/exist\n", `source_authorities["h"][0].path: open /does/not/exist`},
		{"source_authorities:\n  h:\n    - type: Data\n      data: not a certificate\n", `source_authorities["h"][0]: neither PEM certificates nor a DER certificate`},
		{"source_authorities:\n  h:\n    - type: Data\n      data: |\n        -----BEGIN PRIVATE KEY-----\n        AAAA\n        -----END PRIVATE KEY-----\n", `PEM block "PRIVATE KEY" is not a CERTIFICATE`},
	}
	for _, tc := range tests {
		_, err := ParseSources([]byte(tc.doc))
		if assert.Error(t, err, tc.doc) {
			assert.Contains(t, err.Error(), tc.err)
		}
	}
}

func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

// annotatedModule is the smallest module with a metadata section.
func annotatedModule(t *testing.T, annotations string) []byte {
	t.Helper()
	section := `{"protocolVersion":"v1","rules":[],"mutating":false,"backgroundAudit":false,"contextAwareResources":[],"executionMode":"kubewarden-wapc","policyType":"kubernetes"`
	if annotations != "" {
		section += `,"annotations":` + annotations
	}
	section += "}"
	wasm, err := metadata.SetCustomSection([]byte("\x00asm\x01\x00\x00\x00"), metadata.SectionName, []byte(section))
	require.NoError(t, err)
	return wasm
}

func TestNewArtifact(t *testing.T) {
	wasm := annotatedModule(t, `{"io.kubewarden.policy.title":" user-info\n","io.kubewarden.policy.source":"https://example.com/src","io.artifacthub.resources":"a\nb","q":"say \"hi\" \\ bye"}`)
	art, err := NewArtifact(wasm, false)
	require.NoError(t, err)
	want := `{"annotations":{"io.kubewarden.policy.source":"https://example.com/src","io.kubewarden.policy.title":"user-info","org.opencontainers.image.source":"https://example.com/src","q":"say \"hi\" \\ bye"},` +
		`"config":{"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","mediaType":"application/vnd.wasm.config.v1+json","size":2},` +
		`"layers":[{"digest":"` + digest.FromBytes(wasm).String() + `","mediaType":"application/vnd.wasm.content.layer.v1+wasm","size":` + strconv.Itoa(len(wasm)) + `}],"schemaVersion":2}`
	assert.Equal(t, want, string(art.Manifest))
	assert.Equal(t, digest.FromString(want), art.ManifestDescriptor.Digest)
	assert.Equal(t, []string{"io.artifacthub.resources"}, art.Dropped)

	// An OCI source annotation already present is kept.
	art, err = NewArtifact(annotatedModule(t, `{"io.kubewarden.policy.source":"a","org.opencontainers.image.source":"b"}`), false)
	require.NoError(t, err)
	assert.Equal(t, "b", art.Annotations["org.opencontainers.image.source"])

	// Metadata without annotations: no annotations field at all; {} stays {}.
	art, err = NewArtifact(annotatedModule(t, ""), false)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(art.Manifest), `{"config":`), string(art.Manifest))
	art, err = NewArtifact(annotatedModule(t, `{}`), false)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(art.Manifest), `{"annotations":{},"config":`), string(art.Manifest))

	_, err = NewArtifact(annotatedModule(t, `{"k":"tab\there"}`), false)
	assert.ErrorContains(t, err, `metadata annotations["k"]: control character`)

	bare := []byte("\x00asm\x01\x00\x00\x00")
	_, err = NewArtifact(bare, false)
	assert.ErrorIs(t, err, ErrNotAnnotated)
	art, err = NewArtifact(bare, true)
	require.NoError(t, err)
	assert.Nil(t, art.Annotations)

	_, err = NewArtifact([]byte("not wasm"), true)
	assert.ErrorContains(t, err, "read module metadata")
}

func TestLineCount(t *testing.T) {
	for s, want := range map[string]int{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "a\n\n": 2, "\na": 2, "a\r\nb": 2} {
		assert.Equal(t, want, lineCount(s), "%q", s)
	}
}

// TestFetch_https downloads over HTTPS: verified against the source
// authorities, refused without them, allowed unverified for an insecure
// source, bounded in size, and kept in the store.
func TestFetch_https(t *testing.T) {
	module := annotatedModule(t, "")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/policy.wasm":
			_, _ = w.Write(module)
		case "/big.wasm":
			_, _ = w.Write(make([]byte, 2048))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	trusting, err := ParseSources([]byte("source_authorities:\n  \"" + host + "\":\n    - type: Data\n      data: |\n" + indent(string(certPEM), "        ")))
	require.NoError(t, err)
	insecure, err := ParseSources([]byte("insecure_sources: [\"" + host + "\"]\n"))
	require.NoError(t, err)
	noCred := func(t *testing.T, sources *Sources, limit int64) *Fetcher {
		f, err := New(Options{StoreDir: t.TempDir(), Sources: sources, DockerConfigDir: t.TempDir(), MaxModuleBytes: limit})
		require.NoError(t, err)
		return f
	}

	f := noCred(t, trusting, 0)
	m, err := f.Fetch(t.Context(), srv.URL+"/policy.wasm")
	require.NoError(t, err)
	assert.Equal(t, module, m.Wasm)
	assert.Equal(t, digest.FromBytes(module), m.Digest)
	assert.Equal(t, filepath.Join(f.opts.StoreDir, "https", host, "policy.wasm"), m.Path)
	stored, err := os.ReadFile(m.Path)
	require.NoError(t, err)
	assert.Equal(t, module, stored)

	_, err = noCred(t, nil, 0).Fetch(t.Context(), srv.URL+"/policy.wasm")
	assert.ErrorContains(t, err, "certificate signed by unknown authority")

	m, err = noCred(t, insecure, 0).Fetch(t.Context(), srv.URL+"/policy.wasm")
	require.NoError(t, err)
	assert.Equal(t, module, m.Wasm)

	_, err = noCred(t, trusting, 0).Fetch(t.Context(), srv.URL+"/missing.wasm")
	assert.ErrorContains(t, err, "404 Not Found")

	_, err = noCred(t, trusting, 1024).Fetch(t.Context(), srv.URL+"/big.wasm")
	assert.ErrorContains(t, err, "module larger than 1024 bytes")

	// A path that climbs stays in the store.
	path, err := f.storePath(Location{Scheme: SchemeHTTPS, URL: &url.URL{Host: host, Path: "/a/../../../policy.wasm"}})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(f.opts.StoreDir, "https", host, "policy.wasm"), path)
}
