package main

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3"; otherwise the module version from the
// build info is used.
var version = ""

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this program and of its embedded policy",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(a.stdout, "%s %s\ngo: %s\nwazero: %s\nembedded policy sha256: %x\n",
				binaryName, buildVersion(), runtime.Version(), dependencyVersion("github.com/tetratelabs/wazero"),
				sha256.Sum256(a.policy))
			return err
		},
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

func dependencyVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version
			}
		}
	}
	return "unknown"
}
