// Package cluster runs a real Kubernetes control plane on 127.0.0.1 for the
// end-to-end tests: etcd, kube-apiserver with static-token users and
// kube-controller-manager with per-controller service account credentials
// (so controller-made objects reach the webhook under the controller's own
// name, as in a production cluster), plus any number of
// `yunikorn-userinfo serve` webhooks with certificates from the cluster's CA.
//
// There is no scheduler and no kubelet: Pods stay Pending, which is all an
// admission test needs.
//
// Every process runs in its own process group and is stopped by pid
// (SIGTERM, then SIGKILL after a bounded wait). The pids are recorded in a
// directory that outlives the run, and Start first ends whatever a crashed
// earlier run left there. Ports are picked free on 127.0.0.1 for every run,
// so a leftover can never answer for a new cluster.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Binary names inside Options.BinDir.
const (
	etcdBinary       = "etcd"
	apiserverBinary  = "kube-apiserver"
	controllerBinary = "kube-controller-manager"
)

// DefaultControllers are the controllers the scenarios need: the workload
// controllers that create Pods, Jobs and ReplicaSets from annotated
// templates (DaemonSets and ReplicationControllers included); serviceaccount for every namespace's "default" ServiceAccount
// (Pod creation needs it); the token, root CA, namespace, garbage collector
// and role aggregation controllers that a real cluster runs next to them.
var DefaultControllers = []string{
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"namespace-controller",
	"garbage-collector-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	"deployment-controller",
	"replicaset-controller",
	"replicationcontroller-controller",
	"daemonset-controller",
	"statefulset-controller",
	"job-controller",
	"cronjob-controller",
}

// User is a static-token user of the API server.
type User struct {
	Name   string
	Groups []string
}

// Options configure Start.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	// Required.
	BinDir string
	// Users get a bearer token each (Cluster.Config). Required.
	Users []User
	// Controllers to run in kube-controller-manager. Default:
	// DefaultControllers.
	Controllers []string
	// SharedControllerCredentials runs kube-controller-manager with
	// --use-service-account-credentials=false: every controller then acts
	// as system:kube-controller-manager, which gets cluster-admin rights
	// (its bootstrap role alone does not let controllers create Pods).
	// Default: false, each controller as its own service account.
	SharedControllerCredentials bool
	// Dir holds the run's PKI, data and logs. Default: a new temporary
	// directory.
	Dir string
	// PidRoot holds the pid directories of all runs. Required: it must be
	// the same for every run so leftovers can be found.
	PidRoot string
	// StartTimeout bounds the start of each component. Default: 90s, for a
	// machine busy with a build.
	StartTimeout time.Duration
	// StopTimeout is how long a component may take to exit after SIGTERM
	// before it is killed. Default: 15s.
	StopTimeout time.Duration
	// AuditUsers are the users whose requests the API server records in
	// an audit log (metadata only), for AuditEvents. Default: none, and no
	// audit log.
	AuditUsers []string
	// AuditRequestUsers are users whose requests are recorded with their
	// bodies (level Request), as an audit that replays what users
	// supplied needs them. Default: none.
	AuditRequestUsers []string
	// APIServerArgs are added to kube-apiserver's flags (feature gates,
	// an admission configuration file). Default: none.
	APIServerArgs []string
	// Log receives progress. Default: discarded.
	Log *slog.Logger
}

func (o *Options) setDefaults() error {
	if o.BinDir == "" {
		return errors.New("binary directory is required")
	}
	if len(o.Users) == 0 {
		return errors.New("at least one user is required")
	}
	if o.PidRoot == "" {
		return errors.New("pid root directory is required")
	}
	if len(o.Controllers) == 0 {
		o.Controllers = DefaultControllers
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 90 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir holds the PKI (pki/), etcd's data and one log file per process.
	Dir string
	// Server is the API server's URL.
	Server string
	// PKI is the cluster's CA.
	PKI *PKI

	opts   Options
	tokens map[string]string // user name -> bearer token
	procs  *processes

	mu      sync.Mutex
	started []*Process // in start order
}

// Start brings up etcd, kube-apiserver and kube-controller-manager and waits
// until each is healthy. On error, whatever was started is stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if err := killLeftovers(opts.PidRoot, opts.Log); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "yunikorn-userinfo-e2e-")
		if err != nil {
			return nil, fmt.Errorf("create the run directory: %w", err)
		}
		opts.Dir = dir
	}
	procs, err := newProcesses(opts.PidRoot, opts.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, opts: opts, tokens: map[string]string{}, procs: procs}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	var err error
	if c.PKI, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return err
	}
	ports, err := FreePorts(4)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	c.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	began := time.Now()
	if err := c.startEtcd(ctx, etcdClient, etcdPeer); err != nil {
		return err
	}
	c.opts.Log.Info("etcd ready", "took", time.Since(began).Round(time.Millisecond))
	if err := c.startAPIServer(ctx, etcdClient, apiPort); err != nil {
		return err
	}
	c.opts.Log.Info("kube-apiserver ready", "took", time.Since(began).Round(time.Millisecond), "server", c.Server)
	if err := c.startControllerManager(ctx, kcmPort); err != nil {
		return err
	}
	c.opts.Log.Info("kube-controller-manager ready", "took", time.Since(began).Round(time.Millisecond))
	return nil
}

func (c *Cluster) startEtcd(ctx context.Context, clientPort, peerPort int) error {
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	p, err := c.startProcess("etcd", etcdBinary,
		"--name", "e2e",
		"--data-dir", filepath.Join(c.Dir, etcdDataDir),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "e2e="+peer,
		// Test data only: durability buys nothing and costs seconds.
		"--unsafe-no-fsync",
		"--log-level", "warn",
	)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	return c.waitHealthy(ctx, p, "etcd /health", func(ctx context.Context) error {
		return getOK(ctx, hc, client+"/health", "")
	})
}

func (c *Cluster) startAPIServer(ctx context.Context, etcdPort, port int) error {
	certFile, keyFile, err := c.PKI.IssueServing("apiserver",
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	saKey, saPub, err := c.PKI.serviceAccountKeys()
	if err != nil {
		return err
	}
	tokenFile, err := c.writeTokens()
	if err != nil {
		return err
	}
	audit, err := c.auditFlags()
	if err != nil {
		return err
	}
	p, err := c.startProcess("kube-apiserver", apiserverBinary, append([]string{
		"--etcd-servers", "http://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--client-ca-file", c.PKI.CAFile,
		"--token-auth-file", tokenFile,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", saPub, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--authorization-mode", "Node,RBAC",
		"--allow-privileged=true", "--profiling=false",
		// The endpoint reconciler refuses a loopback advertise address and
		// would log an error every 10s; nothing here needs the endpoints
		// of the "kubernetes" Service.
		"--endpoint-reconciler-type", "none",
		"--cert-dir", filepath.Join(c.Dir, "apiserver-certs"),
	}, append(audit, c.opts.APIServerArgs...)...)...,
	)
	if err != nil {
		return err
	}
	hc, err := c.httpClient()
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, p, "kube-apiserver /readyz", func(ctx context.Context) error {
		return getOK(ctx, hc, c.Server+"/readyz", c.tokens[adminTokenUser(c.opts.Users)])
	})
}

func (c *Cluster) startControllerManager(ctx context.Context, port int) error {
	kubeconfig, err := c.writeKubeconfig("kube-controller-manager", kcmUser)
	if err != nil {
		return err
	}
	saKey := filepath.Join(c.PKI.Dir, "sa.key")
	p, err := c.startProcess("kube-controller-manager", controllerBinary,
		"--kubeconfig", kubeconfig,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(c.Dir, "kcm-certs"),
		"--leader-elect=false",
		// By default each controller acts as its own service account in
		// kube-system; shared, every controller is
		// system:kube-controller-manager. The policy's default systemUsers
		// trust both.
		"--use-service-account-credentials="+strconv.FormatBool(!c.opts.SharedControllerCredentials),
		"--service-account-private-key-file", saKey,
		"--root-ca-file", c.PKI.CAFile,
		"--controllers", strings.Join(c.opts.Controllers, ","),
	)
	if err != nil {
		return err
	}
	// kube-controller-manager serves /healthz with a self-signed
	// certificate it makes itself; this loopback health probe is the one
	// place that does not verify.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	return c.waitHealthy(ctx, p, "kube-controller-manager /healthz", func(ctx context.Context) error {
		return getOK(ctx, hc, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", "")
	})
}

// kcmUser is the controller manager's static-token identity. It is not in
// system:masters: with --use-service-account-credentials it only needs to
// create the controllers' tokens, which its bootstrap role allows.
const kcmUser = "system:kube-controller-manager"

// adminTokenUser picks the first user in system:masters, for health checks.
func adminTokenUser(users []User) string {
	for _, u := range users {
		for _, g := range u.Groups {
			if g == "system:masters" {
				return u.Name
			}
		}
	}
	return ""
}

// writeTokens writes the static token file: token,user,uid,"groups".
func (c *Cluster) writeTokens() (string, error) {
	var b strings.Builder
	kcm := User{Name: kcmUser}
	if c.opts.SharedControllerCredentials {
		kcm.Groups = []string{"system:masters"}
	}
	users := append([]User{kcm}, c.opts.Users...)
	for _, u := range users {
		tok := make([]byte, 16)
		_, _ = rand.Read(tok) // never fails since Go 1.24
		c.tokens[u.Name] = hex.EncodeToString(tok)
		fmt.Fprintf(&b, "%s,%s,uid-%s", c.tokens[u.Name], u.Name, strings.ReplaceAll(u.Name, ":", "-"))
		if len(u.Groups) > 0 {
			fmt.Fprintf(&b, ",%q", strings.Join(u.Groups, ","))
		}
		b.WriteByte('\n')
	}
	path := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("write the token file: %w", err)
	}
	return path, nil
}

// writeKubeconfig writes a kubeconfig for one static-token user.
func (c *Cluster) writeKubeconfig(name, user string) (string, error) {
	tok, ok := c.tokens[user]
	if !ok {
		return "", fmt.Errorf("write the kubeconfig of %s: no token for user %q", name, user)
	}
	return c.WriteTokenKubeconfig(name, tok)
}

// WriteTokenKubeconfig writes a kubeconfig named name that authenticates
// with a bearer token (a service account's, say) and returns its path.
func (c *Cluster) WriteTokenKubeconfig(name, tok string) (string, error) {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: %s}
current-context: e2e
`, c.Server, c.PKI.CAFile, name, tok, name)
	path := filepath.Join(c.Dir, name+".kubeconfig")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return "", fmt.Errorf("write the kubeconfig of %s: %w", name, err)
	}
	return path, nil
}

// Config returns a client configuration that authenticates as user.
// Every request is bounded by a 30s timeout.
func (c *Cluster) Config(user string) (*rest.Config, error) {
	tok, ok := c.tokens[user]
	if !ok {
		return nil, fmt.Errorf("client config: no token for user %q", user)
	}
	return &rest.Config{
		Host:            c.Server,
		BearerToken:     tok,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.PKI.CAPEM},
		UserAgent:       "yunikorn-userinfo-e2e",
		QPS:             50,
		Burst:           100,
		Timeout:         30 * time.Second,
	}, nil
}

// CertConfig returns a client configuration that authenticates with a
// client certificate from the cluster's CA: the API server reads the user
// from its Common Name and the groups from its Organizations, which can
// carry what a static token file or an impersonation header cannot
// (quotes, commas, control characters). Every request is bounded by a
// 30s timeout.
func (c *Cluster) CertConfig(user string, groups []string) (*rest.Config, error) {
	certPEM, keyPEM, err := c.PKI.IssueClient(user, groups)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: c.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: c.PKI.CAPEM, CertData: certPEM, KeyData: keyPEM,
		},
		UserAgent: "yunikorn-userinfo-e2e",
		QPS:       50,
		Burst:     100,
		Timeout:   30 * time.Second,
	}, nil
}

// Clientset returns a typed client that authenticates as user.
func (c *Cluster) Clientset(user string) (*kubernetes.Clientset, error) {
	cfg, err := c.Config(user)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", user, err)
	}
	return cs, nil
}

// caPool is the cluster CA as a certificate pool (empty if unparsable).
func (c *Cluster) caPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.PKI.CAPEM)
	return pool
}

// HTTPClient trusts the cluster CA, for plain HTTPS requests (a probe).
func (c *Cluster) HTTPClient() (*http.Client, error) { return c.httpClient() }

// httpClient trusts the cluster CA, for plain HTTPS requests.
func (c *Cluster) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.PKI.CAPEM) {
		return nil, errors.New("load the cluster ca into a pool: no certificate found")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}, nil
}

// startProcess starts one of the cluster binaries with its log in the run
// directory.
// StartProcess starts a program next to the cluster (an operator, say),
// tracked like the cluster's own: its log in the run directory, stopped by
// Stop. env is added to the environment it inherits.
func (c *Cluster) StartProcess(name, path string, args, env []string) (*Process, error) {
	p := c.track(&Process{Name: name, Path: path, Args: args, Env: env})
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (c *Cluster) startProcess(name, binary string, args ...string) (*Process, error) {
	p := c.track(&Process{Name: name, Path: filepath.Join(c.opts.BinDir, binary), Args: args})
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// track makes p one of the cluster's processes: its log goes to the run
// directory, its pid to the registry, and Stop stops it.
func (c *Cluster) track(p *Process) *Process {
	p.LogFile = filepath.Join(c.Dir, p.Name+".log")
	p.reg = c.procs
	c.mu.Lock()
	c.started = append(c.started, p)
	c.mu.Unlock()
	return p
}

// waitHealthy polls check until it succeeds, the process exits or the start
// timeout passes; the error then carries the end of the process's log.
func (c *Cluster) waitHealthy(ctx context.Context, p *Process, what string, check func(context.Context) error) error {
	err := Poll(ctx, c.opts.StartTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if exited, werr := p.Exited(); exited {
			return false, fmt.Errorf("%s exited: %v", p.Name, werr)
		}
		return check(ctx) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s: %w\n--- %s (last lines) ---\n%s", what, err, p.LogFile, tail(p.LogFile, 30))
	}
	return nil
}

// LogTails returns the last n lines of every process's log, for a failing
// test's report.
func (c *Cluster) LogTails(n int) string {
	c.mu.Lock()
	procs := append([]*Process(nil), c.started...)
	c.mu.Unlock()
	var b strings.Builder
	seen := map[string]bool{}
	for _, p := range procs {
		if seen[p.LogFile] {
			continue
		}
		seen[p.LogFile] = true
		fmt.Fprintf(&b, "--- %s (last %d lines of %s) ---\n%s\n", p.Name, n, p.LogFile, tail(p.LogFile, n))
	}
	return b.String()
}

// Stop stops every process the cluster started, webhooks first, in reverse
// start order, and removes the run's pid records and etcd's data (the logs
// and the PKI stay in Dir for a post-mortem).
func (c *Cluster) Stop() error {
	c.mu.Lock()
	procs := append([]*Process(nil), c.started...)
	c.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(c.opts.StopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := c.procs.remove(); err != nil {
			errs = append(errs, fmt.Errorf("remove the pid records: %w", err))
		}
		if err := os.RemoveAll(filepath.Join(c.Dir, etcdDataDir)); err != nil {
			errs = append(errs, fmt.Errorf("remove the etcd data: %w", err))
		}
	}
	return errors.Join(errs...)
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1. All listeners
// are held until all are chosen, so the n ports differ.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// getOK sends a GET and wants 200.
func getOK(ctx context.Context, hc *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// Poll calls cond every interval until it reports done, returns an error,
// or timeout (or ctx) ends the wait. An error from cond ends the wait at
// once: a condition that may fail transiently returns (false, nil) and
// keeps what it saw for its caller's message.
func Poll(ctx context.Context, timeout, interval time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// WriteKubeconfig writes a kubeconfig file that authenticates as user and
// returns its path.
func (c *Cluster) WriteKubeconfig(user string) (string, error) {
	return c.writeKubeconfig("user-"+user, user)
}
