// Command chartrender writes the rendering of the repository's Helm chart,
// as `helm template` would, without a helm binary:
//
//	chartrender -chart charts/yunikorn-userinfo -release R -namespace N [-values YAML] [-upgrade] -out FILE
//
// make e2e installs the standalone webhook from its output. -upgrade
// renders as `helm upgrade` does: the steady state, without the first
// install's hooks and its registration with failurePolicy Ignore (see the
// chart's docs/INSTALL.md, "Install ordering").
package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/yunikorn-userinfo/userinfo/test/manifests/internal/chartrender"
)

func main() {
	chart := flag.String("chart", "charts/yunikorn-userinfo", "chart directory")
	release := flag.String("release", "yunikorn-userinfo", "release name")
	namespace := flag.String("namespace", "yunikorn-userinfo", "release namespace")
	valuesYAML := flag.String("values", "", "values (inline YAML) over the chart's defaults, e.g. 'mode: kubewarden'")
	out := flag.String("out", "", "output file (required)")
	upgrade := flag.Bool("upgrade", false, "render as helm upgrade (the steady state) rather than as a first install")
	flag.Parse()
	if err := run(*chart, *release, *namespace, *valuesYAML, *out, *upgrade); err != nil {
		fmt.Fprintln(os.Stderr, "chartrender:", err)
		os.Exit(1)
	}
}

func run(chart, release, namespace, valuesYAML, out string, upgrade bool) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	var values map[string]any
	if err := yaml.UnmarshalStrict([]byte(valuesYAML), &values); err != nil {
		return fmt.Errorf("decode -values: %w", err)
	}
	rendered, err := chartrender.RenderWith(chart, values, release, namespace, chartrender.Options{Upgrade: upgrade})
	if err != nil {
		return err
	}
	return os.WriteFile(out, rendered, 0o644)
}
