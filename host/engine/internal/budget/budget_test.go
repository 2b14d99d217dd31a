package budget

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The test modules are built from testdata/*.wat with wabt's wat2wasm and
// committed, so the tests need no tools:
//
//	cd host/engine/internal/budget/testdata && for f in *.wat; do wat2wasm "$f" -o "${f%.wat}.wasm"; done
func readModule(t *testing.T, name string) []byte {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
	require.NoError(t, err)
	return wasm
}

// instantiate compiles and instantiates wasm in a fresh runtime without
// wazero's context checks, as the engine runs metered modules.
func instantiate(t *testing.T, wasm []byte) api.Module {
	t.Helper()
	ctx := t.Context()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	mod, err := r.Instantiate(ctx, wasm)
	require.NoError(t, err)
	return mod
}

func call(t *testing.T, mod api.Module, fn string, arg uint64) (uint64, error) {
	t.Helper()
	f := mod.ExportedFunction(fn)
	var params []uint64
	if len(f.Definition().ParamTypes()) == 1 {
		params = append(params, arg)
	}
	res, err := f.Call(t.Context(), params...)
	if err != nil || len(res) == 0 {
		return 0, err
	}
	return res[0], nil
}

func setBudget(t *testing.T, mod api.Module, v uint64) api.MutableGlobal {
	t.Helper()
	g, ok := mod.ExportedGlobal(Export).(api.MutableGlobal)
	require.True(t, ok, "the budget global is exported and mutable")
	g.Set(v)
	return g
}

// TestInstrument_sameResults runs every function of the work module
// before and after instrumentation: the answers must not change, and the
// budget must go down by the number of loop iterations and function
// entries.
func TestInstrument_sameResults(t *testing.T) {
	t.Parallel()
	original := readModule(t, "work")
	metered, err := Instrument(original)
	require.NoError(t, err)

	plain := instantiate(t, original)
	counted := instantiate(t, metered)
	budget := setBudget(t, counted, 1<<40)

	tests := []struct {
		fn  string
		arg uint64
	}{
		{fn: "sum", arg: 0}, {fn: "sum", arg: 1}, {fn: "sum", arg: 100}, {fn: "sum", arg: 1001},
		{fn: "fib", arg: 0}, {fn: "fib", arg: 1}, {fn: "fib", arg: 15},
	}
	for _, tc := range tests {
		want, err := call(t, plain, tc.fn, tc.arg)
		require.NoError(t, err)
		got, err := call(t, counted, tc.fn, tc.arg)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s(%d)", tc.fn, tc.arg)
	}
	assert.Less(t, budget.Get(), uint64(1<<40), "the budget was spent")
	assert.Equal(t, plain.Memory().Size(), counted.Memory().Size())
	b1, _ := plain.Memory().Read(0, 64)
	b2, _ := counted.Memory().Read(0, 64)
	assert.Equal(t, b1, b2, "memory effects are the same")
}

// TestInstrument_countsIterations checks the cost model: sum(n) enters
// the outer loop n+1 times and the inner loop n times; sum is a leaf, so
// its entry is not counted.
func TestInstrument_countsIterations(t *testing.T) {
	t.Parallel()
	metered, err := Instrument(readModule(t, "work"))
	require.NoError(t, err)
	mod := instantiate(t, metered)
	const start = 1 << 30
	budget := setBudget(t, mod, start)
	_, err = call(t, mod, "sum", 1000)
	require.NoError(t, err)
	assert.Equal(t, uint64(start-(1001+1000)), budget.Get())
}

func TestInstrument_stops(t *testing.T) {
	t.Parallel()
	metered, err := Instrument(readModule(t, "work"))
	require.NoError(t, err)
	tests := []struct {
		name   string
		fn     string
		arg    uint64
		budget uint64
	}{
		{name: "endless loop runs out", fn: "spin", budget: 4 * YieldEvery},
		{name: "loop longer than the budget", fn: "sum", arg: 1 << 20, budget: YieldEvery},
		{name: "recursion longer than the budget", fn: "fib", arg: 30, budget: YieldEvery},
		{name: "zeroed budget stops at the next yield point", fn: "spin", budget: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mod := instantiate(t, metered)
			budget := setBudget(t, mod, tc.budget)
			_, err := call(t, mod, tc.fn, tc.arg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "unreachable")
			assert.LessOrEqual(t, int64(budget.Get()), int64(0), "stopped by the budget")
		})
	}
}

func TestInstrument_unsupported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		wasm    []byte
		wantErr string
	}{
		{name: "SIMD", wasm: readModule(t, "simd"), wantErr: "opcode 0xfd"},
		{name: "no memory", wasm: readModule(t, "nomemory"), wantErr: "no memory"},
		{name: "not wasm", wasm: []byte("hello, world"), wantErr: "not a WebAssembly binary"},
		{name: "truncated", wasm: readModule(t, "work")[:100], wantErr: "unexpected end of module"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := Instrument(tc.wasm)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Nil(t, out)
		})
	}
	_, err := Instrument(readModule(t, "simd"))
	assert.ErrorIs(t, err, ErrUnsupported)
}

// TestInstrument_noGlobalOrExportSection adds both sections when the
// module has neither.
func TestInstrument_noGlobalOrExportSection(t *testing.T) {
	t.Parallel()
	// (module (memory 1) (func (loop)))
	wasm := []byte{
		0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 4, 1, 0x60, 0, 0, // type section: () -> ()
		3, 2, 1, 0, // function section
		5, 3, 1, 0, 1, // memory section
		10, 7, 1, 5, 0, 0x03, 0x40, 0x0b, 0x0b, // code: loop end end
	}
	metered, err := Instrument(wasm)
	require.NoError(t, err)
	mod := instantiate(t, metered)
	setBudget(t, mod, 10)
}

func FuzzInstrument(f *testing.F) {
	for _, name := range []string{"work", "simd", "nomemory", "start"} {
		wasm, err := os.ReadFile(filepath.Join("testdata", name+".wasm"))
		require.NoError(f, err)
		f.Add(wasm)
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		// Any input: no panic. A module that wazero accepts must still be
		// accepted once instrumented.
		out, err := Instrument(wasm)
		if err != nil {
			return
		}
		ctx := context.Background()
		r := wazero.NewRuntime(ctx)
		defer r.Close(ctx)
		if _, err := r.CompileModule(ctx, wasm); err != nil {
			return
		}
		_, err = r.CompileModule(ctx, out)
		require.NoError(t, err, "wazero refuses the instrumented module")
	})
}

// TestInstrument_startFunction: a start function runs during
// instantiation, before the host sets a budget, on the initial one.
func TestInstrument_startFunction(t *testing.T) {
	t.Parallel()
	metered, err := Instrument(readModule(t, "start"))
	require.NoError(t, err)
	mod := instantiate(t, metered)
	assert.Equal(t, uint64(200000), mod.ExportedGlobal("n").Get())
	assert.Equal(t, uint64(Initial-200000), mod.ExportedGlobal(Export).Get())
}
