// Command yunikorn-userinfo runs Kubewarden waPC policies on wazero, with
// the yunikorn-user-info policy embedded as its default module.
//
// Its verbs follow kwctl where kwctl has the same one: `run` evaluates an
// admission request, `bench` times a policy, `inspect` reads the
// io.kubewarden.metadata custom section (`kwctl annotate` writes it).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the testable main: it executes the command line args with the
// given streams and returns the process exit code. Errors are printed once,
// on stderr, and give exit code 1.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runWith(ctx, args, deps{stdin: stdin, stdout: stdout, stderr: stderr, policy: embeddedPolicy,
		userCacheDir: userCacheDir()})
}

// userCacheDir is yunikorn-userinfo/wazero in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache on Linux), or "" when there is none.
func userCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, binaryName, "wazero")
}

// runWith is run with every dependency given, for tests that share a
// compilation cache.
func runWith(ctx context.Context, args []string, d deps) int {
	stderr := d.stderr
	cmd := newRootCommand(d)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			fmt.Fprintln(stderr, "Error: interrupted")
			return 1
		}
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}
