package perfkit

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// ScaleFile holds the results of the scale step (e2e/cmd/scalebench): one
// serve replica per Pod count of a real API server.
const ScaleFile = "scale.json"

// PlotScale is the memory and latency against the cluster's Pod count.
const PlotScale = "scale.png"

// The scale targets (docs/PERFORMANCE.md).
const (
	targetScaleRSSMiB = 200
	targetScaleP99MS  = 5
)

// ScaleResult is one Pod count's measurements, as scalebench writes them.
type ScaleResult struct {
	Pods        int     `json:"pods"`
	Namespaces  int     `json:"namespaces"`
	PodBytes    int     `json:"pod_bytes"`
	FillSeconds float64 `json:"fill_seconds"`
	ReadyMS     float64 `json:"ready_ms"`
	SyncMS      float64 `json:"sync_ms"`
	RSSReadyMiB float64 `json:"rss_ready_mib"`
	RSSLoadMiB  float64 `json:"rss_load_mib"`
	RSSPeakMiB  float64 `json:"rss_peak_mib"`
	HeapMiB     float64 `json:"heap_mib"`
	CacheMiB    float64 `json:"cache_offheap_mib"`
	GoMemLimit  string  `json:"gomemlimit,omitempty"`
	Watches     int     `json:"watches"`
	Rate        int     `json:"rate"`
	Seconds     float64 `json:"seconds"`
	Sent        int     `json:"sent"`
	Allowed     int     `json:"allowed"`
	Denied      int     `json:"denied"`
	Errors      int     `json:"errors"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
	MaxMS       float64 `json:"max_ms"`
	Denial      string  `json:"first_denial,omitempty"`
	Machine     string  `json:"machine"`
	Replicas    int     `json:"replicas"`
}

// readScale reads ScaleFile in dir, sorted by Pod count; none is nil.
func readScale(dir string) ([]ScaleResult, error) {
	var rs []ScaleResult
	if err := readJSON(filepath.Join(dir, ScaleFile), &rs); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	for i, r := range rs {
		if r.Pods <= 0 || r.Sent <= 0 {
			return nil, fmt.Errorf("read %s: entry %d: no pods or no reviews", ScaleFile, i)
		}
	}
	slices.SortStableFunc(rs, func(a, b ScaleResult) int { return cmp.Compare(a.Pods, b.Pods) })
	return rs, nil
}

// scaleChart is a replica's RSS (after the load, and its peak), Go heap
// and review latency (p50, p99) against the Pods in the cluster, one set
// of lines per GOMEMLIMIT measured, with the targets.
func scaleChart(rs []ScaleResult) (*figure, string) {
	if len(rs) == 0 {
		return nil, "no scale results (" + ScaleFile + ")"
	}
	last := rs[len(rs)-1]
	var limits []string
	for _, r := range rs {
		if !slices.Contains(limits, r.GoMemLimit) {
			limits = append(limits, r.GoMemLimit)
		}
	}
	top := newPlot("serve against a real kube-apiserver: memory by Pods in the cluster",
		fmt.Sprintf("applicationOwnership enforce + trustPodTokens; ~%d B Pods in %d namespaces; %s", last.PodBytes, last.Namespaces, last.Machine),
		"Pods in the cluster", "MiB per replica")
	bottom := newPlot("", fmt.Sprintf("review latency at %d reviews/s, %.0fs measured per point", last.Rate, last.Seconds),
		"Pods in the cluster", "latency (ms)")
	for i, limit := range limits {
		name := "no GOMEMLIMIT"
		if limit != "" {
			name = "GOMEMLIMIT " + limit
		}
		g := []glyph{glyphCircle, glyphSquare, glyphTriangle}[i%3]
		rss := series{name: "RSS after the load, " + name, color: palette[0], glyph: g, dashed: i > 0}
		peak := series{name: "peak RSS (VmHWM), " + name, color: palette[1], glyph: g, dashed: i > 0}
		heap := series{name: "Go heap in use, " + name, color: palette[2], glyph: g, dashed: i > 0}
		cache := series{name: "watch caches off the Go heap, " + name, color: palette[3], glyph: g, dashed: i > 0}
		p50 := series{name: "p50, " + name, color: palette[0], glyph: g, dashed: i > 0}
		p99 := series{name: "p99, " + name, color: palette[1], glyph: g, dashed: i > 0}
		for _, r := range rs {
			if r.GoMemLimit != limit {
				continue
			}
			x := float64(r.Pods)
			rss.points = append(rss.points, plotter.XY{X: x, Y: r.RSSLoadMiB})
			peak.points = append(peak.points, plotter.XY{X: x, Y: r.RSSPeakMiB})
			heap.points = append(heap.points, plotter.XY{X: x, Y: r.HeapMiB})
			if r.CacheMiB > 0 {
				cache.points = append(cache.points, plotter.XY{X: x, Y: r.CacheMiB})
			}
			p50.points = append(p50.points, plotter.XY{X: x, Y: r.P50MS})
			p99.points = append(p99.points, plotter.XY{X: x, Y: r.P99MS})
		}
		for _, s := range []series{rss, peak, heap, cache} {
			if len(s.points) > 0 {
				_ = addSeries(top, s, false)
			}
		}
		_ = addSeries(bottom, p50, false)
		_ = addSeries(bottom, p99, false)
	}
	top.Y.Min, bottom.Y.Min = 0, 0
	addRefs(top, []refLine{{value: targetScaleRSSMiB, color: palette[3], label: "target"}})
	addRefs(bottom, []refLine{{value: targetScaleP99MS, color: palette[3], label: "p99 target"}})
	if rs[0].Pods != last.Pods {
		for _, p := range []*plot.Plot{top, bottom} {
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		}
	}
	return &figure{plots: []*plot.Plot{top, bottom}}, ""
}
