// Package chartrender renders the repository's Helm chart the way `helm
// template` does, with Helm's own libraries: for the chart tests, and for
// the real-cluster suite, which installs the chart's rendering.
package chartrender

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
)

// Options are the ways a rendering differs from `helm template`'s.
type Options struct {
	// Upgrade renders as `helm upgrade` does (revision 2, .Release.IsUpgrade):
	// the steady state, which deploy/ holds and the real-cluster suite
	// installs.
	Upgrade bool
	// SkipSchema leaves out values.schema.json, as `helm install
	// --skip-schema-validation` does: the chart's own checks must still
	// refuse broken values.
	SkipSchema bool
	// Notes keeps NOTES.txt in RenderFiles' answer.
	Notes bool
}

// RenderWith renders the chart in dir for a release named release in
// namespace, with values over the chart's defaults, as a first install
// (`helm install`, `helm template`) unless o says otherwise. It returns the
// rendered manifests in template order, as one YAML stream, NOTES.txt left
// out.
func RenderWith(dir string, values map[string]any, release, namespace string, o Options) ([]byte, error) {
	out, err := RenderFiles(dir, values, release, namespace, o)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(out)) {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", name, strings.TrimSpace(out[name]))
	}
	return []byte(b.String()), nil
}

// RenderFiles renders the chart as RenderWith does, as Helm's engine
// returns it: the rendering of each template by its path (the input of
// Helm's own manifest and hook sorting), NOTES.txt and empty ones left out.
func RenderFiles(dir string, values map[string]any, release, namespace string, o Options) (map[string]string, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	opts := chartcommon.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	if o.Upgrade {
		opts = chartcommon.ReleaseOptions{Name: release, Namespace: namespace, Revision: 2, IsUpgrade: true}
	}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(chrt, values, opts, chartcommon.DefaultCapabilities.Copy(), o.SkipSchema)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	out, err := engine.Render(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	for name, s := range out {
		if (strings.HasSuffix(name, "NOTES.txt") && !o.Notes) || strings.TrimSpace(s) == "" {
			delete(out, name)
		}
	}
	return out, nil
}
