package fetch

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileRegistry is a registry that lies: it answers the distribution API
// for one repository with whatever the test puts in manifest and blobs.
// A real registry checks what it stores; these tests check that the
// fetcher does not trust a registry that does not.
type hostileRegistry struct {
	manifest    []byte
	contentType string
	blobs       map[digest.Digest][]byte
	// stall, if set, makes blob downloads hang until it is closed.
	stall chan struct{}
}

func (h *hostileRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v2/":
		w.WriteHeader(http.StatusOK)
	case strings.HasPrefix(r.URL.Path, "/v2/policy/manifests/"):
		w.Header().Set("Content-Type", h.contentType)
		w.Header().Set("Docker-Content-Digest", digest.FromBytes(h.manifest).String())
		w.Header().Set("Content-Length", fmt.Sprint(len(h.manifest)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(h.manifest)
		}
	case strings.HasPrefix(r.URL.Path, "/v2/policy/blobs/"):
		d := digest.Digest(strings.TrimPrefix(r.URL.Path, "/v2/policy/blobs/"))
		b, ok := h.blobs[d]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if h.stall != nil {
			// Honest headers and a first byte, then nothing until the test
			// ends: only the fetcher's own deadline can end the download.
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(b[:1])
			w.(http.Flusher).Flush()
			<-h.stall
			return
		}
		_, _ = w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func policyManifest(layerDigest digest.Digest, layerSize int64) []byte {
	return []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",`+
		`"config":{"mediaType":%q,"digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},`+
		`"layers":[{"mediaType":%q,"digest":%q,"size":%d}]}`, MediaTypeWasmConfig, MediaTypeWasmLayer, layerDigest, layerSize))
}

// TestFetch_hostileRegistry: a registry that lies about sizes and digests,
// sends oversized manifests or stalls gets an error, never a module.
func TestFetch_hostileRegistry(t *testing.T) {
	module := annotatedModule(t, "")
	good := digest.FromBytes(module)
	tampered := append([]byte{}, module...)
	tampered[len(tampered)-1] ^= 0xff // same length, other bytes
	tests := []struct {
		name string
		reg  hostileRegistry
		err  string
	}{
		{"honest", hostileRegistry{manifest: policyManifest(good, int64(len(module))), blobs: map[digest.Digest][]byte{good: module}}, ""},
		{"layer bytes do not match the digest", hostileRegistry{manifest: policyManifest(good, int64(len(module))), blobs: map[digest.Digest][]byte{good: tampered}}, "mismatched digest"},
		{"layer longer than declared", hostileRegistry{manifest: policyManifest(good, int64(len(module))-1), blobs: map[digest.Digest][]byte{good: module}}, "mismatch Content-Length"},
		{"layer larger than the limit", hostileRegistry{manifest: policyManifest(good, 1<<40)}, "layers[0].size 1099511627776: want 1 to 1048576 bytes"},
		{"manifest larger than the limit", hostileRegistry{manifest: append(policyManifest(good, 8), make([]byte, maxManifestBytes)...)}, "more than the 4194304 accepted"},
		{"not an image manifest", hostileRegistry{manifest: []byte(`{"schemaVersion":2,"manifests":[]}`), contentType: "application/vnd.oci.image.index.v1+json"}, "media type"},
		{"two layers", hostileRegistry{manifest: []byte(strings.Replace(string(policyManifest(good, 8)), `"layers":[`, `"layers":[{"mediaType":"application/vnd.wasm.content.layer.v1+wasm","digest":"`+good.String()+`","size":8},`, 1))}, "want exactly one layer"},
		{"a non-sha256 layer digest", hostileRegistry{manifest: policyManifest("sha512:"+digest.Digest(strings.Repeat("a", 128)), 8)}, "want a sha256 digest"},
		{"stalled download", hostileRegistry{manifest: policyManifest(good, int64(len(module))), blobs: map[digest.Digest][]byte{good: module}, stall: make(chan struct{})}, "context deadline exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := tc.reg
			if reg.contentType == "" {
				reg.contentType = "application/vnd.oci.image.manifest.v1+json"
			}
			srv := httptest.NewTLSServer(&reg)
			defer srv.Close()
			if reg.stall != nil {
				defer close(reg.stall) // before srv.Close, which waits for handlers
			}
			host := strings.TrimPrefix(srv.URL, "https://")
			certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
			sources, err := ParseSources([]byte("source_authorities:\n  \"" + host + "\":\n    - type: Data\n      data: |\n" + indent(string(certPEM), "        ")))
			require.NoError(t, err)
			f, err := New(Options{StoreDir: t.TempDir(), Sources: sources, DockerConfigDir: t.TempDir(), MaxModuleBytes: 1 << 20, Timeout: 2 * time.Second})
			require.NoError(t, err)
			m, err := f.Fetch(t.Context(), "registry://"+host+"/policy:v1")
			if tc.err == "" {
				require.NoError(t, err)
				assert.Equal(t, module, m.Wasm)
				return
			}
			require.Error(t, err)
			assert.Nil(t, m)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}
