package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tetratelabs/wazero"
)

// binaryName is the command's name in help and messages.
const binaryName = "yunikorn-userinfo"

// deps is what commands get from the outside world, injected so tests can
// run commands in parallel with buffers.
type deps struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// policy is the module used when no MODULE argument is given.
	policy []byte
	// cache, when set, is the compilation cache of every engine; tests share
	// one so the policy is compiled once. --cache-dir overrides it.
	cache wazero.CompilationCache
	// userCacheDir is where every command but serve keeps compiled modules
	// when --cache-dir is not given: main sets it in the user's cache
	// directory, as kwctl keeps its own; tests leave it empty.
	userCacheDir string
	// onListen, if set, is told the addresses serve listens on (tests
	// listen on port 0).
	onListen func(webhook, metrics net.Addr)
}

// globalFlags are the root's persistent flags, shared by every command.
type globalFlags struct {
	logLevel  string
	logFormat string
	verbose   bool
	cacheDir  string
}

// app is the state one command line execution shares across commands.
type app struct {
	deps
	global globalFlags
	// cacheDirFlag tells whether --cache-dir was given.
	cacheDirFlag *pflag.Flag
}

// newRootCommand builds the command tree.
func newRootCommand(d deps) *cobra.Command {
	a := &app{deps: d}
	root := &cobra.Command{
		Use:   binaryName,
		Short: "Run Kubewarden waPC policies, the yunikorn-user-info policy by default",
		Long: binaryName + ` evaluates Kubewarden waPC policy modules on wazero. Without a
MODULE argument, commands use the embedded yunikorn-user-info policy, which
records the submitting user in the yunikorn.apache.org/user.info annotation.

The run, bench and inspect commands behave like the kwctl commands of the
same name. MODULE is a local file (file:// optional). Annotating a module,
generating its Artifact Hub metadata, and pulling, verifying and pushing
modules in a registry are jobs for kwctl (annotate, scaffold artifacthub,
pull, verify, push), oras and cosign.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(d.stdin)
	root.SetOut(d.stdout)
	root.SetErr(d.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", err, cmd.CommandPath())
	})

	pf := root.PersistentFlags()
	pf.StringVar(&a.global.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	pf.BoolVarP(&a.global.verbose, "verbose", "v", false, "log at debug level, including the policy's own log lines")
	pf.StringVar(&a.global.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&a.global.cacheDir, "cache-dir", "", `keep compiled modules in this directory (wazero compilation cache); "" compiles every time (default: yunikorn-userinfo/wazero in the user's cache directory, except for serve)`)
	a.cacheDirFlag = pf.Lookup("cache-dir")

	root.AddCommand(
		newRunCommand(a),
		newServeCommand(a),
		newBenchCommand(a),
		newInspectCommand(a),
		newVersionCommand(a),
		newMigrateCommand(a),
		newAuditCommand(a),
		newAdoptCommand(a),
		newCELCommand(a),
	)
	return root
}

// logger builds the stderr logger from the global flags. Policy log lines
// (kubewarden/tracing/log) go through it with source=policy.
func (a *app) logger() (*slog.Logger, error) {
	level := slog.LevelDebug
	if !a.global.verbose {
		switch strings.ToLower(a.global.logLevel) {
		case "debug":
		case "info":
			level = slog.LevelInfo
		case "warn", "warning":
			level = slog.LevelWarn
		case "error":
			level = slog.LevelError
		default:
			return nil, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", a.global.logLevel)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(a.global.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(a.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(a.stderr, opts)), nil
	default:
		return nil, fmt.Errorf("invalid --log-format %q: want text or json", a.global.logFormat)
	}
}
