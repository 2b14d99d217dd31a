package release

import (
	"archive/tar"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/yunikorn-userinfo/userinfo/host/certwatch"
	"github.com/yunikorn-userinfo/userinfo/internal/syncbuf"
	"github.com/yunikorn-userinfo/userinfo/internal/testnet"
	"github.com/yunikorn-userinfo/userinfo/release/internal/image"
)

// imageLayout is the layout `make image` wrote.
func imageLayout(t *testing.T) v1.ImageIndex {
	t.Helper()
	dir := os.Getenv("YUNIKORN_IMAGE_LAYOUT")
	if dir == "" {
		dir = "../build/image"
	}
	idx, err := image.ReadLayout(dir)
	require.NoError(t, err, "run make image (make test-release does)")
	return idx
}

func TestMain(m *testing.M) {
	if os.Getenv(launcherEnv) != "" {
		launch() // the image test's container launcher; never returns
	}
	os.Exit(m.Run())
}

// TestImage_contentsAndRun reads the image index make image wrote, checks
// what each platform's image holds and says, then unpacks the linux/amd64
// root file system and runs it as its configuration says (the entrypoint
// and command, as the configured user, no capabilities, no new privileges,
// a read-only root), serving HTTPS: /readyz answers and one review is
// answered correctly. Pushing it to a registry is oras's job (docs/INSTALL.md).
func TestImage_contentsAndRun(t *testing.T) {
	t.Parallel()
	idx := imageLayout(t)
	mt, err := idx.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, mt)
	man, err := idx.IndexManifest()
	require.NoError(t, err)
	for _, k := range []string{"source", "revision", "version", "created", "licenses"} {
		assert.NotEmpty(t, man.Annotations["org.opencontainers.image."+k], k)
	}

	var platforms []string
	var amd64 v1.Image
	for _, d := range man.Manifests {
		require.NotNil(t, d.Platform)
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, d.Platform.Architecture, cfg.Architecture)
		assert.Equal(t, "65532:65532", cfg.Config.User)
		assert.Equal(t, []string{"/yunikorn-userinfo"}, cfg.Config.Entrypoint)
		assert.Equal(t, []string{"serve"}, cfg.Config.Cmd)
		created, err := time.Parse(time.RFC3339, man.Annotations["org.opencontainers.image.created"])
		require.NoError(t, err)
		assert.True(t, cfg.Created.Equal(created), "the configuration's time is the commit's")
		layers, err := img.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1)
		entries := tarEntries(t, layers[0])
		assert.Equal(t, []string{"yunikorn-userinfo 0755 0:0"}, entries, "the binary and nothing else (no shell)")
		if d.Platform.Architecture == "amd64" {
			amd64 = img
		}
	}
	assert.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, platforms)
	require.NotNil(t, amd64)
	if runtime.GOARCH != "amd64" {
		t.Skipf("the image's linux/amd64 binary cannot run on %s", runtime.GOARCH)
	}
	runImage(t, amd64)
}

func tarEntries(t *testing.T, l v1.Layer) []string {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var out []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s %04o %d:%d", h.Name, h.Mode, h.Uid, h.Gid))
	}
}

// launcherEnv makes the test binary a launcher: see launch.
const launcherEnv = "RELEASE_TEST_LAUNCH"

// runImage unpacks img and runs it in a mount namespace of its own, with
// the unpacked root bound read-only and chrooted into, the certificates
// mounted at /certs.
func runImage(t *testing.T, img v1.Image) {
	root := filepath.Join(t.TempDir(), "rootfs")
	require.NoError(t, os.MkdirAll(root, 0o755))
	rc := mutate.Extract(img)
	require.NoError(t, image.Untar(rc, root))
	rc.Close()
	// The mount point of the certificate volume, as a runtime creates it.
	require.NoError(t, os.Mkdir(filepath.Join(root, "certs"), 0o755))

	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	uidText, gidText, ok := strings.Cut(cfg.Config.User, ":")
	require.True(t, ok, "user %q", cfg.Config.User)

	ca, err := certwatch.NewCA("image test CA", time.Hour)
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.Issue(certwatch.IssueOptions{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	require.NoError(t, err)
	certs := t.TempDir()
	require.NoError(t, os.Chmod(certs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(certs, "tls.crt"), certPEM, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(certs, "tls.key"), keyPEM, 0o644))

	addrs := testnet.FreeAddrs(t, 2)
	listen, metrics := addrs[0], addrs[1]
	args := append(append([]string{}, cfg.Config.Entrypoint...), cfg.Config.Cmd...)
	args = append(args, "--cert-file", "/certs/tls.crt", "--key-file", "/certs/tls.key",
		"--listen", listen, "--metrics-listen", metrics, "--log-format", "json")
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), launcherEnv+"=1", "LAUNCH_ROOT="+root, "LAUNCH_CERTS="+certs,
		"LAUNCH_UID="+uidText, "LAUNCH_GID="+gidText)
	var stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})

	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	ready := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !ready; {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the image's entrypoint exited: %v\n%s", err, stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := client.Get("https://" + listen + "/readyz")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	require.True(t, ready, "/readyz never answered 200:\n%s", stderr.String())

	status := procStatus(t, cmd.Process.Pid)
	assert.Equal(t, fmt.Sprintf("%s\t%s\t%s\t%s", uidText, uidText, uidText, uidText), status["Uid"])
	assert.Equal(t, fmt.Sprintf("%s\t%s\t%s\t%s", gidText, gidText, gidText, gidText), status["Gid"])
	assert.Equal(t, "", status["Groups"])
	for _, c := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		assert.Equal(t, "0000000000000000", status[c], c)
	}
	assert.Equal(t, "1", status["NoNewPrivs"])
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", cmd.Process.Pid))
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`(?m)^\S+ \S+ \S+ \S+ / ro[, ]`), string(mountinfo), "the root is read-only")

	review, err := os.ReadFile("../testdata/requests/review-alice-pod.json")
	require.NoError(t, err)
	resp, err := client.Post("https://"+listen+"/mutate", "application/json", bytes.NewReader(review))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var out struct {
		Response struct {
			Allowed   bool   `json:"allowed"`
			PatchType string `json:"patchType"`
			Patch     []byte `json:"patch"`
		} `json:"response"`
	}
	require.NoError(t, json.Unmarshal(body, &out), "%s", body)
	assert.True(t, out.Response.Allowed)
	assert.Equal(t, "JSONPatch", out.Response.PatchType)
	assert.JSONEq(t, `[{"op":"add","path":"/metadata/annotations","value":{"yunikorn.apache.org/user.info":"{\"user\":\"alice\",\"groups\":[\"dev\",\"system:authenticated\"]}"}}]`,
		string(out.Response.Patch), "alice's identity, recorded by the image's binary")
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	out := map[string]string{}
	for line := range strings.Lines(string(raw)) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\n"), ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// launch is what the test binary does as a launcher (RELEASE_TEST_LAUNCH):
// what a container runtime does for this image, no more. In a new mount
// namespace it binds the root file system onto itself, mounts the
// certificates, remounts the root read-only, chroots into it, drops every
// capability from the bounding set, sets no_new_privs, takes the image's
// user and group with no supplementary groups, and executes the entrypoint.
// It never returns.
func launch() {
	fail := func(step string, err error) {
		fmt.Fprintf(os.Stderr, "launcher: %s: %v\n", step, err)
		os.Exit(111)
	}
	runtime.LockOSThread()
	root, certs := os.Getenv("LAUNCH_ROOT"), os.Getenv("LAUNCH_CERTS")
	uid, err := strconv.Atoi(os.Getenv("LAUNCH_UID"))
	if err != nil {
		fail("uid", err)
	}
	gid, err := strconv.Atoi(os.Getenv("LAUNCH_GID"))
	if err != nil {
		fail("gid", err)
	}
	var args []string
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-test.") {
			args = append(args, a)
		}
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"unshare the mount namespace", func() error { return unix.Unshare(unix.CLONE_NEWNS) }},
		{"make mounts private", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"bind the root", func() error { return unix.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, "") }},
		{"mount the certificates", func() error {
			return unix.Mount(certs, filepath.Join(root, "certs"), "", unix.MS_BIND|unix.MS_RDONLY, "")
		}},
		{"remount the root read-only", func() error {
			return unix.Mount("", root, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
		}},
		{"chroot", func() error { return unix.Chroot(root) }},
		{"chdir", func() error { return unix.Chdir("/") }},
		{"drop the bounding set", func() error {
			for c := 0; c <= unix.CAP_LAST_CAP; c++ {
				if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
					return fmt.Errorf("capability %d: %w", c, err)
				}
			}
			return nil
		}},
		{"no new privileges", func() error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }},
		{"setgroups", func() error { return syscall.Setgroups(nil) }},
		{"setgid", func() error { return syscall.Setgid(gid) }},
		{"setuid", func() error { return syscall.Setuid(uid) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			fail(s.name, err)
		}
	}
	env := []string{"PATH=/"}
	fail("exec "+args[0], syscall.Exec(args[0], args, env))
}

// TestImage_reproducible builds the image from two clones of the commit in
// different directories, as two machines would: the index digests match.
func TestImage_reproducible(t *testing.T) {
	t.Parallel()
	top, err := exec.Command("git", "-C", "..", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err, "the release tests run in a git checkout")
	var digests []string
	for _, name := range []string{"first", "second-elsewhere"} {
		dir := filepath.Join(t.TempDir(), name)
		out, err := exec.CommandContext(t.Context(), "git", "clone", "--quiet", "--no-hardlinks", strings.TrimSpace(string(top)), dir).CombinedOutput()
		require.NoError(t, err, "%s", out)
		start := time.Now()
		cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "image")
		cmd.Dir = dir
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, "make image in %s:\n%s", dir, out)
		idx, err := image.ReadLayout(filepath.Join(dir, "build", "image"))
		require.NoError(t, err)
		d, err := idx.Digest()
		require.NoError(t, err)
		digests = append(digests, d.String())
		t.Logf("make image in %s: %s in %s", dir, d, time.Since(start).Round(time.Millisecond))
	}
	assert.Equal(t, digests[0], digests[1], "two builds of one commit give one image")
}
