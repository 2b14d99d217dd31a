package release

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
	"github.com/yunikorn-userinfo/userinfo/host/fetch"
	"github.com/yunikorn-userinfo/userinfo/host/metadata"
	"github.com/yunikorn-userinfo/userinfo/internal/fixtures"
	"github.com/yunikorn-userinfo/userinfo/release/internal/registry"
)

// The registry every test of this package shares, started by TestMain.
var (
	reg      *registry.Registry
	regCA    *certwatch.CA
	binary   string // the yunikorn-userinfo CLI
	workDir  string
	embedded []byte // the policy the CLI embeds
)

const (
	pushUser     = "releaser"
	pushPassword = "correct horse battery staple"
)

func TestMain(m *testing.M) {
	if os.Getenv(launcherEnv) != "" {
		launch() // the image test's container launcher; never returns
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	if workDir, err = os.MkdirTemp("", "release-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "set up:", err)
		return 1
	}
	defer reg.Stop()
	return m.Run()
}

func setUp(ctx context.Context) error {
	start := time.Now()
	path, cold, err := registry.Ensure(ctx, registry.BuildOptions{ModuleDir: ".", Output: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "registry binary %s (cold build: %v) after %s\n", path, cold, time.Since(start).Round(time.Millisecond))

	binary = os.Getenv("YUNIKORN_USERINFO_BINARY")
	if binary == "" {
		binary = filepath.Join(workDir, "yunikorn-userinfo")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binary, "github.com/yunikorn-userinfo/userinfo/cmd/yunikorn-userinfo")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build the CLI: %w", err)
		}
	}
	if embedded, err = os.ReadFile("../cmd/yunikorn-userinfo/policy.wasm"); err != nil {
		return err
	}

	if regCA, err = certwatch.NewCA("release tests registry CA", time.Hour); err != nil {
		return err
	}
	certPEM, keyPEM, err := regCA.Issue(certwatch.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return err
	}
	dir := filepath.Join(workDir, "registry")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	reg, err = registry.Start(ctx, registry.Options{
		Binary: path, Dir: dir, CertPEM: certPEM, KeyPEM: keyPEM, CAPEM: regCA.CertPEM(),
		Users: map[string]string{pushUser: pushPassword},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "registry on %s ready after %s\n", reg.Host, time.Since(start).Round(time.Millisecond))
	return nil
}

// client is how a test calls the CLI: a docker config with credentials for
// the registry, and a sources file that trusts its CA.
type client struct {
	dockerDir string
	sources   string
	store     string
	cacheDir  string
}

func newClient(t *testing.T, user, password string, sources string) *client {
	t.Helper()
	dir := t.TempDir()
	c := &client{dockerDir: filepath.Join(dir, "docker"), store: filepath.Join(dir, "store"), cacheDir: filepath.Join(dir, "cache")}
	require.NoError(t, os.MkdirAll(c.dockerDir, 0o700))
	auths := map[string]any{}
	if user != "" {
		auths[reg.Host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
	}
	cfg, err := json.Marshal(map[string]any{"auths": auths})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.dockerDir, "config.json"), cfg, 0o600))
	if sources != "" {
		c.sources = filepath.Join(dir, "sources.yaml")
		require.NoError(t, os.WriteFile(c.sources, []byte(sources), 0o600))
	}
	return c
}

// trustingSources trusts the registry's CA, as an operator with a private
// registry writes it.
func trustingSources(t *testing.T) string {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, regCA.CertPEM(), 0o600))
	return fmt.Sprintf("source_authorities:\n  %q:\n    - type: Path\n      path: %s\n", reg.Host, caFile)
}

func (c *client) run(t *testing.T, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	all := []string{"--docker-config-json-path", c.dockerDir, "--store-dir", c.store, "--cache-dir", c.cacheDir}
	if c.sources != "" {
		all = append(all, "--sources-path", c.sources)
	}
	all = append(all, args...)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, all...)
	// Neither the user's sources file nor their docker configuration.
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "DOCKER_CONFIG="+c.dockerDir)
	var out, errOut bytes.Buffer
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = 0
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "run %v: %v", args, err)
		code = exit.ExitCode()
	}
	return out.String(), errOut.String(), code
}

func (c *client) push(t *testing.T, module, ref string) string {
	t.Helper()
	stdout, stderr, code := c.run(t, nil, "push", module, ref, "-o", "json")
	require.Equal(t, 0, code, "push: %s", stderr)
	var out struct {
		ImmutableRef string `json:"immutable_ref"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
	return out.ImmutableRef
}

// repository reads the registry independently of the CLI, with oras-go.
func repository(t *testing.T, repo string) *remote.Repository {
	t.Helper()
	r, err := remote.NewRepository(reg.Host + "/" + repo)
	require.NoError(t, err)
	r.Client = &auth.Client{
		Client:     httpsClient(),
		Credential: auth.StaticCredential(reg.Host, auth.Credential{Username: pushUser, Password: pushPassword}),
	}
	return r
}

func httpsClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(regCA.Certificate())
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// TestPolicy_pushAndPull pushes the embedded policy with the CLI, reads the
// artifact back independently, and checks it is what kwctl push writes.
func TestPolicy_pushAndPull(t *testing.T) {
	t.Parallel()
	c := newClient(t, pushUser, pushPassword, trustingSources(t))
	ref := "registry://" + reg.Host + "/policies/user-info:v1"
	immutable := c.push(t, "-", ref)

	art, err := fetch.NewArtifact(embedded, false)
	require.NoError(t, err)
	assert.Equal(t, "registry://"+reg.Host+"/policies/user-info@"+art.ManifestDescriptor.Digest.String(), immutable)

	repo := repository(t, "policies/user-info")
	desc, rc, err := repo.FetchReference(t.Context(), "v1")
	require.NoError(t, err)
	raw, err := content.ReadAll(rc, desc)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, art.ManifestDescriptor.Digest, desc.Digest, "the tag names the manifest push printed")
	assert.Equal(t, ocispec.MediaTypeImageManifest, desc.MediaType)

	var man map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &man))
	assert.NotContains(t, man, "mediaType", "kwctl's manifest has no mediaType field")
	assert.JSONEq(t, `2`, string(man["schemaVersion"]))
	assert.JSONEq(t, `{"mediaType":"application/vnd.wasm.config.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}`, string(man["config"]))
	var layers []ocispec.Descriptor
	require.NoError(t, json.Unmarshal(man["layers"], &layers))
	require.Len(t, layers, 1)
	assert.Equal(t, "application/vnd.wasm.content.layer.v1+wasm", layers[0].MediaType)
	assert.Equal(t, int64(len(embedded)), layers[0].Size)
	var annotations map[string]string
	require.NoError(t, json.Unmarshal(man["annotations"], &annotations))
	section, ok, err := metadata.ReadCustomSection(embedded, metadata.SectionName)
	require.NoError(t, err)
	require.True(t, ok)
	md, err := metadata.Decode(section)
	require.NoError(t, err)
	for k, v := range md.Annotations {
		if strings.Contains(strings.TrimRight(v, "\n"), "\n") {
			assert.NotContains(t, annotations, k, "multi-line annotations stay out of the manifest")
			continue
		}
		assert.Equal(t, strings.TrimSpace(v), annotations[k], k)
	}
	assert.Equal(t, md.Annotations["io.kubewarden.policy.source"], annotations[ocispec.AnnotationSource])

	lrc, err := repo.Fetch(t.Context(), layers[0])
	require.NoError(t, err)
	wasm, err := content.ReadAll(lrc, layers[0])
	lrc.Close()
	require.NoError(t, err)
	assert.Equal(t, embedded, wasm, "the layer is the module, byte for byte")

	// Pushing again changes nothing: the digest is the module's alone.
	assert.Equal(t, immutable, c.push(t, "-", ref))

	// inspect reads it back from the registry, by tag and by digest.
	want, stderr, code := c.run(t, nil, "inspect")
	require.Equal(t, 0, code, stderr)
	for _, r := range []string{ref, immutable} {
		got, stderr, code := c.run(t, nil, "inspect", r)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, want, got, r)
	}
	// bench takes a registry module too.
	stdout, stderr, code := c.run(t, nil, "bench", immutable, "-r", "../testdata/requests/review-alice-pod.json",
		"--warm-up-time", "10ms", "--measurement-time", "50ms", "--num-samples", "5", "--output", "json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"operation": "validate"`)

	stored, err := os.ReadFile(filepath.Join(c.store, "registry", reg.Host, "policies", "user-info:v1"))
	require.NoError(t, err)
	assert.Equal(t, embedded, stored, "the module is kept in the store")
}

// TestPolicy_runFromRegistry runs every shared fixture against the policy
// pulled from the registry: each answer is the embedded policy's answer,
// recorded in the CLI's golden file.
func TestPolicy_runFromRegistry(t *testing.T) {
	t.Parallel()
	c := newClient(t, pushUser, pushPassword, trustingSources(t))
	immutable := c.push(t, "-", reg.Host+"/policies/user-info:run")

	cases, err := fixtures.Load()
	require.NoError(t, err)
	golden, err := fixtures.ReadGolden(fixtures.RunGolden())
	require.NoError(t, err)
	dir := t.TempDir()

	type result struct {
		stdout, stderr string
		code           int
	}
	results := make([]result, len(cases))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 2 {
		wg.Go(func() {
			for i := range work {
				path := filepath.Join(dir, fmt.Sprintf("request-%d.json", i))
				if err := os.WriteFile(path, cases[i].Request, 0o600); err != nil {
					results[i] = result{stderr: err.Error(), code: -1}
					continue
				}
				stdout, stderr, code := c.run(t, nil, "run", immutable, "--settings-json", string(cases[i].Settings), "-r", path,
					"--context-dir", fixtures.ClusterDir())
				results[i] = result{stdout, stderr, code}
			}
		})
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()

	for i, tc := range cases {
		r := results[i]
		if rest, invalid := strings.CutPrefix(tc.Expect.Message, "settings are not valid: "); invalid {
			assert.Equal(t, 1, r.code, tc.Name)
			assert.Contains(t, r.stderr, "Error: provided settings are not valid: "+rest+"\n", tc.Name)
			continue
		}
		if assert.Equal(t, 0, r.code, "%s: %s", tc.Name, r.stderr) {
			assert.Equal(t, golden[tc.Name], strings.TrimSpace(r.stdout), tc.Name)
		}
	}
	t.Logf("%d fixtures answered from %s", len(cases), immutable)
}

// TestPolicy_refusals: each way a pull or push can go wrong ends with an
// error that says what went wrong.
func TestPolicy_refusals(t *testing.T) {
	t.Parallel()
	owner := newClient(t, pushUser, pushPassword, trustingSources(t))
	ref := "registry://" + reg.Host + "/policies/refusals:v1"
	owner.push(t, "-", ref)

	tests := []struct {
		name    string
		client  *client
		args    []string
		message string
	}{
		{"wrong password", newClient(t, pushUser, "wrong", trustingSources(t)),
			[]string{"inspect", ref}, "refused the credentials (401 Unauthorized)"},
		{"no credentials", newClient(t, "", "", trustingSources(t)),
			[]string{"inspect", ref}, "asks for credentials and none are configured for it"},
		{"wrong password on push", newClient(t, pushUser, "wrong", trustingSources(t)),
			[]string{"push", "-", ref}, "refused the credentials (401 Unauthorized)"},
		{"unknown certificate authority", newClient(t, pushUser, pushPassword, ""),
			[]string{"inspect", ref}, "certificate signed by unknown authority"},
		{"missing tag", owner,
			[]string{"inspect", "registry://" + reg.Host + "/policies/refusals:v2"}, "registry " + reg.Host + ": policies/refusals:v2 not found"},
		{"missing digest", owner,
			[]string{"inspect", "registry://" + reg.Host + "/policies/refusals@sha256:" + strings.Repeat("0", 64)}, "policies/refusals@sha256:" + strings.Repeat("0", 64) + " not found"},
		{"unannotated module", owner,
			[]string{"push", "../host/webhook/testdata/hostile.wasm", ref}, "the module is not annotated"},
		{"http scheme", owner,
			[]string{"inspect", "http://" + reg.Host + "/policy.wasm"}, "plain http is not accepted"},
		{"bad sources file", newClient(t, pushUser, pushPassword, "insecure_source: [x]\n"),
			[]string{"inspect", ref}, `unknown field "insecure_source"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := tc.client.run(t, nil, tc.args...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, tc.message)
		})
	}

	t.Run("insecure source", func(t *testing.T) {
		// Listed as insecure, the registry is used without verifying its
		// certificate, as Kubewarden's fetcher does.
		c := newClient(t, pushUser, pushPassword, fmt.Sprintf("insecure_sources: [%q]\n", reg.Host))
		_, stderr, code := c.run(t, nil, "inspect", ref)
		assert.Equal(t, 0, code, stderr)
	})

	t.Run("not a policy", func(t *testing.T) {
		// A container image (any manifest whose config is not the Wasm
		// config) is refused by name, not run.
		repo := repository(t, "images/not-a-policy")
		cfg := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}`)
		cfgDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, cfg)
		require.NoError(t, repo.Push(t.Context(), cfgDesc, bytes.NewReader(cfg)))
		man, err := json.Marshal(ocispec.Manifest{
			Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
			Config: cfgDesc, Layers: []ocispec.Descriptor{},
		})
		require.NoError(t, err)
		manDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, man)
		require.NoError(t, repo.PushReference(t.Context(), manDesc, bytes.NewReader(man), "v1"))
		_, stderr, code := owner.run(t, nil, "inspect", "registry://"+reg.Host+"/images/not-a-policy:v1")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "not a Kubewarden policy")
	})
}
