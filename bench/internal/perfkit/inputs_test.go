package perfkit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resultsDir holds small synthetic results, in the layout bench.sh leaves.
const resultsDir = "testdata/results"

func readTestInputs(t *testing.T) *Inputs {
	t.Helper()
	in, err := ReadInputs(resultsDir)
	require.NoError(t, err)
	return in
}

func TestReadInputs(t *testing.T) {
	t.Parallel()
	in := readTestInputs(t)
	// notes.txt has no results and is left out.
	assert.Equal(t, []string{filepath.Join(resultsDir, "admission.txt"), filepath.Join(resultsDir, "perf.txt")}, in.BenchFiles)
	var offered []float64
	for _, r := range in.Load {
		offered = append(offered, r.Rate)
	}
	assert.Equal(t, []float64{500, 1000, 2000, 4000, 0}, offered)
	require.Len(t, in.ColdStarts, 2)
	assert.False(t, in.ColdStarts[0].Cache)
	assert.Equal(t, 250*time.Millisecond, in.ColdStarts[1].Filling)
	assert.Len(t, in.Soak, 61)
	require.NotNil(t, in.Machine)
	assert.Equal(t, 2, in.Machine.CPUs)
	require.Len(t, in.Scale, 2)
	assert.Equal(t, []int{1000, 10000}, []int{in.Scale[0].Pods, in.Scale[1].Pods}, "sorted by Pod count")
}

func TestReadInputs_badFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "load-100.json"), []byte(`{"mode": 1}`), 0o600))
	_, err := ReadInputs(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load-100.json")

	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ScaleFile), []byte(`[{"pods": 10}]`), 0o600))
	_, err = ReadInputs(dir)
	assert.ErrorContains(t, err, ScaleFile+": entry 0: no pods or no reviews")
}
