// Command loadgen puts load on the yunikorn-userinfo admission webhook (or
// any AdmissionReview v1 webhook) over HTTPS keep-alive connections, posting
// the shared fixtures, and reports throughput, latency percentiles, errors
// by class and CPU and memory use. It is a development tool of the bench
// module (cd bench && go run ./cmd/loadgen): the fixtures are read from the
// repository's testdata/.
//
// Exit status: 0 when every request was answered as expected, 1 when the
// run could not start or was interrupted, 2 when requests failed (unless
// --tolerate-errors).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/yunikorn-userinfo/userinfo/bench/internal/loadgen"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1 // bad flags, unreadable inputs, interrupted
	exitFailed = 2 // the run completed but requests failed
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// flags are the command line, bound by cobra.
type flags struct {
	url            string
	caFile         string
	insecure       bool
	clientCert     string
	clientKey      string
	connections    int
	rate           float64
	duration       time.Duration
	warmup         time.Duration
	timeout        time.Duration
	fixtures       string
	request        string
	noVerdict      bool
	serverPID      int
	json           bool
	tolerateErrors bool
}

// errRequestsFailed reports a run whose requests failed; its report is
// already printed.
var errRequestsFailed = errors.New("requests failed")

// run is the testable main: it runs the command line args and returns the
// exit code. Errors are printed once, on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "loadgen [flags]",
		Short: "Put load on an AdmissionReview v1 webhook and report throughput, latency and CPU use",
		Long: `loadgen POSTs AdmissionReview v1 bodies to a webhook over HTTP/1.1 keep-alive
connections, at most --connections of them, and checks every answer: status
200, an AdmissionReview v1 with a response, response.uid equal to the uid
sent (each request gets a fresh one) and, for fixtures run with default
settings, the expected response.allowed.

With --rate, requests are due at fixed times (open loop) and latency counts
from the due time, so time spent waiting for a free connection is included.
Without it, each connection sends as soon as it has its previous answer
(saturation). Requests in --warmup are checked but not measured.

The payloads are the shared fixture cases (testdata/cases.json), or those
whose name matches --fixtures, or the one file --request.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLoad(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetArgs(args)
	fs := cmd.Flags()
	fs.StringVar(&f.url, "url", "https://127.0.0.1:8443/mutate", "webhook URL; ?timeout= is added like kube-apiserver does, unless present")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM file of the CA certificates to trust (default: system roots)")
	fs.BoolVar(&f.insecure, "insecure-skip-verify", false, "do not verify the server certificate")
	fs.StringVar(&f.clientCert, "client-cert", "", "PEM client certificate, for mTLS (with --client-key)")
	fs.StringVar(&f.clientKey, "client-key", "", "PEM client key, for mTLS (with --client-cert)")
	fs.IntVar(&f.connections, "connections", 32, "keep-alive connections, and requests in flight")
	fs.Float64Var(&f.rate, "rate", 0, "requests per second, open loop; 0 = saturation")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&f.warmup, "warmup", 2*time.Second, "time before the measured time, requests checked but not counted")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "per request timeout")
	fs.StringVar(&f.fixtures, "fixtures", "", "regexp on fixture case names (default: every case)")
	fs.StringVar(&f.request, "request", "", "post this AdmissionReview (or AdmissionRequest) file instead of the fixtures")
	fs.BoolVar(&f.noVerdict, "no-verdict", false, "do not check response.allowed (for a server with non-default settings)")
	fs.IntVar(&f.serverPID, "server-pid", 0, "server process to read CPU time and RSS of, from /proc")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON")
	fs.BoolVar(&f.tolerateErrors, "tolerate-errors", false, "exit 0 even when requests failed")

	err := cmd.ExecuteContext(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errRequestsFailed):
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitFailed
	default:
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitError
	}
}

func runLoad(ctx context.Context, f *flags, stdout io.Writer) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	res, err := loadgen.Run(ctx, opts)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = loadgen.WriteText(stdout, res)
	}
	if err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	switch {
	case res.Interrupted:
		return errors.New("interrupted")
	case res.Failed() > 0 && !f.tolerateErrors:
		return fmt.Errorf("%w: %d of %d", errRequestsFailed, res.Failed(),
			res.Sent+res.Errors.Late+res.WarmupCounts.Sent+res.WarmupCounts.Errors.Late)
	}
	return nil
}

// options checks the flags and turns them into loadgen.Options.
func (f *flags) options() (loadgen.Options, error) {
	switch {
	case f.connections < 1 || f.connections > loadgen.MaxConnections:
		return loadgen.Options{}, fmt.Errorf("invalid --connections %d: want 1 to %d", f.connections, loadgen.MaxConnections)
	case f.rate < 0:
		return loadgen.Options{}, fmt.Errorf("invalid --rate %g: must not be negative", f.rate)
	case f.duration <= 0 || f.timeout <= 0 || f.warmup < 0:
		return loadgen.Options{}, errors.New("invalid --duration, --timeout or --warmup: must be positive (--warmup may be 0)")
	case f.serverPID < 0:
		return loadgen.Options{}, fmt.Errorf("invalid --server-pid %d", f.serverPID)
	case f.request != "" && f.fixtures != "":
		return loadgen.Options{}, errors.New("--request and --fixtures exclude each other")
	}
	tlsConfig, err := f.tlsConfig()
	if err != nil {
		return loadgen.Options{}, err
	}
	var payloads []loadgen.Payload
	if f.request != "" {
		p, err := loadgen.LoadFile(f.request)
		if err != nil {
			return loadgen.Options{}, err
		}
		payloads = []loadgen.Payload{p}
	} else {
		var match *regexp.Regexp
		if f.fixtures != "" {
			if match, err = regexp.Compile(f.fixtures); err != nil {
				return loadgen.Options{}, fmt.Errorf("parse --fixtures: %w", err)
			}
		}
		if payloads, err = loadgen.LoadFixtures(match); err != nil {
			return loadgen.Options{}, err
		}
	}
	if f.noVerdict {
		for i := range payloads {
			payloads[i].Expect = nil
		}
	}
	return loadgen.Options{
		URL:         f.url,
		TLSConfig:   tlsConfig,
		Payloads:    payloads,
		Connections: f.connections,
		Rate:        f.rate,
		Duration:    f.duration,
		Warmup:      f.warmup,
		Timeout:     f.timeout,
		ServerPID:   f.serverPID,
	}, nil
}

func (f *flags) tlsConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case f.caFile != "" && f.insecure:
		return nil, errors.New("--ca-file and --insecure-skip-verify exclude each other")
	case f.insecure:
		c.InsecureSkipVerify = true // #nosec G402 -- asked for, for self-signed test servers
	case f.caFile != "":
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("read --ca-file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("read --ca-file %s: no PEM certificate", f.caFile)
		}
	}
	if (f.clientCert == "") != (f.clientKey == "") {
		return nil, errors.New("--client-cert and --client-key go together")
	}
	if f.clientCert != "" {
		cert, err := tls.LoadX509KeyPair(f.clientCert, f.clientKey)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
