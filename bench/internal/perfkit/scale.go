package perfkit

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// ScaleFile holds the results of the scale step (e2e/cmd/scalebench): one
// serve replica per Pod count of a real API server.
const ScaleFile = "scale.json"

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
