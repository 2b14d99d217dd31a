// Command policymeta does the two packaging jobs the project's build needs
// from policy metadata, the way kwctl does them (make annotated, make
// artifacthub; this build runs without kwctl):
//
//	policymeta annotate build/policy.wasm -m metadata.yml -o build/annotated-policy.wasm
//	policymeta artifacthub -m metadata.yml -o artifacthub
//
// Kubewarden users run `kwctl annotate` and `kwctl scaffold artifacthub`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the testable main: errors are printed once, on stderr, and give
// exit code 1.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "policymeta",
		Short:         "Annotate a policy module and generate its Artifact Hub metadata, like kwctl",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A build tool: no shell completion script to offer.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newAnnotateCommand(stderr), newArtifacthubCommand(stdout))
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so a failed write never leaves a truncated file
// behind, and the output may be the input file itself.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
