#!/usr/bin/env bash
# The benchmarks of docs/PERFORMANCE.md (make bench), in order, each result
# saved under $OUT and printed:
#   1. perf       go test -bench ./policy/ ./host/conformance/: native vs wasm evaluation,
#                 fresh vs pooled instances, the fixed cost of a call
#                                                  -> $OUT/perf.txt
#   1b. scaling   BenchmarkScaling in ./policy/, ./host/conformance/ and
#                 ./host/admission/: each workload kind and the built-in
#                 Pod and Deployment grown from 1 to 10,000 templates (or
#                 containers, annotations, ...), native, wasm (a reused
#                 instance, and a fresh one per call) and the host's part;
#                 cpu-ns/op and x/decade (linear: about 10)
#                                                  -> $OUT/scaling.out
#   2. admission  go test -bench in the bench/ module: ours vs YuniKorn's
#                 admission controller             -> $OUT/admission.txt
#   3. load       a local serve under bench/cmd/loadgen at each of RATES, as
#                 hack/load.sh does                -> $OUT/load-<rate>.json
#   4. coldstart  exec to /readyz, without and with the compilation cache
#                                                  -> $OUT/coldstart-{nocache,cache}.json
#   5. scale      e2e/cmd/scalebench: a real kube-apiserver (the e2e build in
#                 ~/.cache/yunikorn-userinfo/e2e) filled with SCALE_PODS Pods
#                 step by step; one serve replica per step with
#                 applicationOwnership and trustPodTokens: RSS, first sync,
#                 Pod watches, review latency at SCALE_RATE
#                                                  -> $OUT/scale.json
#                 then the denial-of-service reproductions against
#                 application ownership (60 label-stuffed gated Pods; one
#                 namespace of SCALE_DOS_PODS Pods): peak RSS under 256 MiB
#                 and no failed review, or the step fails
#                                                  -> $OUT/scale-dos-*.json
#   5b. modes     e2e/cmd/admbench: Pod-create latency through a real
#                 kube-apiserver per deployment mode (none, cel, hybrid,
#                 the webhook pair, its mutating half, a null webhook),
#                 the same Pods interleaved; p50/p99 and what each adds,
#                 from make chart-render's renderings
#                                                  -> $OUT/admission-modes.json
#   6. report     perfkit tables: results.md in $DOCS, from everything in
#                 $OUT (soak*.jsonl of `make soak` included)
# A step whose input does not exist yet is skipped with a note; a step that
# fails is reported and the others still run; the exit status is 1 if any
# failed. The Makefile builds build/yunikorn-userinfo and build/loadgen first
# and sets POLICY_WASM.
#
# Knobs (environment):
#   QUICK=1        everything very briefly, for CI smoke and tooling checks:
#                  COUNT=1 BENCHTIME=100ms RATES="500 2000 0" DURATION=1s
#                  WARMUP=500ms COLDSTART_RUNS=2, scaling sizes up to 100,
#                  SCALE_PODS=500,2000 SCALE_NAMESPACES=20 SCALE_DURATION=2s,
#                  and DOCS=$OUT/tables so that quick numbers never land in
#                  docs/
#   SKIP           steps to leave out, e.g. SKIP="admission load"
#   OUT            results directory                    (build/bench)
#   DOCS           results.md                           (docs/perf)
#   COUNT          go test -count, repeats for medians  (5)
#   BENCHTIME      go test -benchtime                   (go's default, 1s)
#   BENCH          go test -bench regexp                (.)
#   RATES          requests/s, 0 = saturation           ("500 1000 2000 3000 4000 0")
#   DURATION, WARMUP, CONNECTIONS, FIXTURES, INSTANCES, PORT, METRICS_PORT
#                  as in hack/load.sh                   (10s, 2s, 32, the inject mix, nproc, 18443, 19090)
#   COLDSTART_RUNS timed starts per cold start case     (10)
#   SCALING_SIZES  sizes the scaling step times, a regexp alternation
#                                                       (1|10|100|1000|10000; QUICK: 1|10|100)
#   SCALING_BENCHTIME  go test -benchtime of the scaling step (1s; QUICK: 100ms)
#   SCALE_PODS     Pod counts of the scale step         (1000,10000,30000,100000)
#   SCALE_NAMESPACES, SCALE_RATE, SCALE_DURATION
#                  namespaces, reviews/s, measured load per count (1000, 500, 10s)
#   MODES_PODS     measured Pod creates per mode of the modes step (1000; QUICK: 60)
#   BIN, LOADGEN, PERFKIT  executables                  (build/yunikorn-userinfo, build/loadgen, build/perfkit)
#
#   make bench
#   QUICK=1 make bench
#   SKIP="perf admission" RATES="1000 0" make bench
set -uo pipefail

QUICK=${QUICK:-0}
if [[ "$QUICK" == 1 ]]; then
  COUNT=${COUNT:-1}
  BENCHTIME=${BENCHTIME:-100ms}
  RATES=${RATES:-"500 2000 0"}
  DURATION=${DURATION:-1s}
  WARMUP=${WARMUP:-500ms}
  COLDSTART_RUNS=${COLDSTART_RUNS:-2}
  SCALING_SIZES=${SCALING_SIZES:-"1|10|100"}
  SCALING_BENCHTIME=${SCALING_BENCHTIME:-100ms}
  SCALE_PODS=${SCALE_PODS:-500,2000}
  SCALE_DOS_PODS=${SCALE_DOS_PODS:-2000}
  SCALE_NAMESPACES=${SCALE_NAMESPACES:-20}
  SCALE_DURATION=${SCALE_DURATION:-2s}
  MODES_PODS=${MODES_PODS:-60}
fi
SCALING_SIZES=${SCALING_SIZES:-"1|10|100|1000|10000"}
SCALING_BENCHTIME=${SCALING_BENCHTIME:-1s}
OUT=${OUT:-build/bench}
if [[ "$QUICK" == 1 ]]; then
  DOCS=${DOCS:-$OUT/tables}
else
  DOCS=${DOCS:-docs/perf}
fi
SKIP=${SKIP:-}
COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-}
BENCH=${BENCH:-.}
RATES=${RATES:-"500 1000 2000 3000 4000 0"}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-32}
FIXTURES=${FIXTURES:-'^(pod|deployment|job)/create/absent/inject$'}
INSTANCES=${INSTANCES:-$(nproc)}
PORT=${PORT:-18443}
METRICS_PORT=${METRICS_PORT:-19090}
COLDSTART_RUNS=${COLDSTART_RUNS:-10}
SCALE_PODS=${SCALE_PODS:-1000,10000,30000,100000}
SCALE_DOS_PODS=${SCALE_DOS_PODS:-20000}
SCALE_NAMESPACES=${SCALE_NAMESPACES:-1000}
SCALE_RATE=${SCALE_RATE:-500}
SCALE_DURATION=${SCALE_DURATION:-10s}
MODES_PODS=${MODES_PODS:-1000}
BIN=${BIN:-build/yunikorn-userinfo}
LOADGEN=${LOADGEN:-build/loadgen}
PERFKIT=${PERFKIT:-build/perfkit}
GO=${GO:-go}
if [[ -z "${POLICY_WASM:-}" && -f build/policy.wasm ]]; then
  POLICY_WASM=$PWD/build/policy.wasm
fi
export POLICY_WASM=${POLICY_WASM:-}

failed=()
tmp=$(mktemp -d)
# shellcheck source=hack/lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"
cleanup() {
  serve_stop
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

banner() { printf '\n=== %s ===\n' "$*"; }
note() { printf '%s\n' "$*"; }
skipped() { [[ " $SKIP " == *" $1 "* ]]; }
fail() {
  note "FAILED: $*"
  failed+=("$1")
}
benchtime_flag() { [[ -n "$BENCHTIME" ]] && printf -- '-benchtime=%s' "$BENCHTIME"; }

for f in "$BIN" "$LOADGEN"; do
  [[ -x "$f" ]] || { echo "missing $f: run make build loadgen (make bench does)"; exit 1; }
done
build_perfkit || { echo "build perfkit failed"; exit 1; }

mkdir -p "$OUT"
# Results of the steps below only: the soak (make soak) is kept.
rm -f "$OUT"/perf.txt "$OUT"/scaling.out "$OUT"/admission.txt "$OUT"/load-*.json "$OUT"/coldstart-*.json "$OUT"/machine.json "$OUT"/scale.json "$OUT"/admission-modes.json
"$PERFKIT" machine --out "$OUT/machine.json"
echo "$(machine_line), $("$GO" env GOVERSION)"
quick=
[[ "$QUICK" == 1 ]] && quick=" (QUICK=1: brief runs, numbers not for publishing)"
echo "results in $OUT, tables in $DOCS$quick"

# 1. Policy evaluation and instance strategies.
banner "1/6 perf: go test -bench ./policy/ ./host/conformance/ (count $COUNT)"
if skipped perf; then
  note "skipped (SKIP)"
else
  [[ -n "$POLICY_WASM" ]] || note "note: POLICY_WASM is not set (make policy builds build/policy.wasm); wasm benchmarks may skip"
  # Native (policy/) and Wasm (host/conformance) evaluation of the same
  # fixtures, and the instance strategies.
  # shellcheck disable=SC2046 # an empty flag must vanish
  # BenchmarkScaling has its own step below.
  "$GO" test -run '^$' -bench "$BENCH" -skip '^BenchmarkScaling$' -benchmem -count "$COUNT" $(benchtime_flag) ./policy/ ./host/conformance/ 2>&1 | tee "$OUT/perf.txt"
  [[ "${PIPESTATUS[0]}" == 0 ]] || fail perf "go test ./policy/ ./host/conformance/"
fi

# 1b. How the cost grows with the request: once, sizes in decades. Saved as
# .out, not .txt: perfkit's tables pair fixtures, and these are not its.
banner "1b/6 scaling: BenchmarkScaling at n=$SCALING_SIZES, native, wasm, wasm-fresh and host ($SCALING_BENCHTIME each)"
if skipped scaling; then
  note "skipped (SKIP)"
else
  "$GO" test -run '^$' -bench "^BenchmarkScaling\$/./^n=($SCALING_SIZES)\$" -benchmem -count 1 -benchtime "$SCALING_BENCHTIME" \
    ./policy/ ./host/conformance/ ./host/admission/ 2>&1 | tee "$OUT/scaling.out"
  [[ "${PIPESTATUS[0]}" == 0 ]] || fail scaling "go test -bench BenchmarkScaling"
  # shape, impl, then cpu-ns/op per size and the growth per decade.
  awk '/^BenchmarkScaling\// {
      split($1, p, "/"); shape = p[2]; n = p[3]; impl = p[4]; sub(/-[0-9]+$/, "", impl)
      cpu = ""; x = ""
      for (i = 2; i < NF; i++) { if ($(i+1) == "cpu-ns/op") cpu = $i; if ($(i+1) == "x/decade") x = $i }
      printf "%-48s %-12s %-9s %14.0f cpu-ns/op %8s\n", shape, impl, n, cpu, (x == "" ? "" : x "x")
    }' "$OUT/scaling.out"
fi

# 2. The peer: YuniKorn's admission controller, from its own module.
banner "2/6 admission: go test -bench in bench/ (count $COUNT)"
if skipped admission; then
  note "skipped (SKIP)"
elif [[ ! -f bench/go.mod ]] || [[ -z "$(find bench -name '*_test.go' -print -quit)" ]]; then
  note "skipped: the bench/ module has no benchmarks yet"
else
  # shellcheck disable=SC2046
  (cd bench && "$GO" test -run '^$' -bench "$BENCH" -benchmem -count "$COUNT" $(benchtime_flag) ./...) 2>&1 | tee "$OUT/admission.txt"
  [[ "${PIPESTATUS[0]}" == 0 ]] || fail admission "go test in bench/"
fi

# 3. The webhook under load, as hack/load.sh runs it.
banner "3/6 load: serve --instances $INSTANCES, loadgen at rates $RATES ($CONNECTIONS connections, $WARMUP + $DURATION each)"
if skipped load; then
  note "skipped (SKIP)"
else
  if ! serve_start "$tmp"; then
    fail load "serve did not become ready"
  else
    for rate in $RATES; do
      name=$rate
      [[ "$rate" == 0 ]] && name=saturation
      echo
      echo "--- rate $name"
      "$LOADGEN" --url "https://127.0.0.1:$PORT/mutate" --ca-file "$tmp/tls/ca.crt" \
        --connections "$CONNECTIONS" --rate "$rate" --duration "$DURATION" --warmup "$WARMUP" \
        --fixtures "$FIXTURES" --server-pid "$server_pid" --json >"$OUT/load-$name.json"
      rc=$?
      case $rc in
        0) "$PERFKIT" show "$OUT/load-$name.json" ;;
        2) "$PERFKIT" show "$OUT/load-$name.json"; fail "load-$name" "requests failed at rate $name (kept in the report)" ;;
        *) rm -f "$OUT/load-$name.json"; fail "load-$name" "loadgen exited $rc at rate $name" ;;
      esac
      kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/serve.log"; fail load "the server died"; break; }
    done
  fi
  serve_stop
fi

# 4. Cold start, with no server running.
banner "4/6 coldstart: $COLDSTART_RUNS starts without, then with, the compilation cache"
if skipped coldstart; then
  note "skipped (SKIP)"
else
  "$PERFKIT" coldstart --binary "$BIN" --runs "$COLDSTART_RUNS" --out "$OUT/coldstart-nocache.json" ||
    fail coldstart-nocache "perfkit coldstart"
  echo
  "$PERFKIT" coldstart --binary "$BIN" --runs "$COLDSTART_RUNS" --cache-dir "$tmp/cache" \
    --out "$OUT/coldstart-cache.json" || fail coldstart-cache "perfkit coldstart --cache-dir"
fi

# 5. A real API server with many Pods.
banner "5/6 scale: serve against kube-apiserver with $SCALE_PODS Pods in $SCALE_NAMESPACES namespaces, $SCALE_RATE reviews/s"
if skipped scale; then
  note "skipped (SKIP)"
else
  bin_abs=$(realpath "$BIN")
  out_abs=$(realpath "$OUT")
  (cd e2e && CGO_ENABLED=0 "$GO" run ./cmd/scalebench -pods "$SCALE_PODS" -namespaces "$SCALE_NAMESPACES" \
    -rate "$SCALE_RATE" -duration "$SCALE_DURATION" -serve "$bin_abs" -out "$out_abs/scale.json") ||
    fail scale "e2e/cmd/scalebench"
  # The denial-of-service reproductions against application ownership: 60
  # gated Pods stuffed with 16,000 labels, then a namespace of 20,000 Pods
  # (QUICK: 2,000), a third of the reviews Pods without an ID there. Each
  # must stay under the chart's 256 MiB and fail no review.
  (cd e2e && CGO_ENABLED=0 "$GO" run ./cmd/scalebench -pods 2000 -namespaces 20 -fat-pods 60 -idless \
    -rate "$SCALE_RATE" -duration "$SCALE_DURATION" -serve "$bin_abs" -max-rss-mib 256 -no-errors \
    -out "$out_abs/scale-dos-fat.json") || fail scale-dos "e2e/cmd/scalebench -fat-pods 60"
  (cd e2e && CGO_ENABLED=0 "$GO" run ./cmd/scalebench -pods "$SCALE_DOS_PODS" -namespaces 1 -idless \
    -rate "$SCALE_RATE" -duration "$SCALE_DURATION" -serve "$bin_abs" -max-rss-mib 256 -no-errors \
    -out "$out_abs/scale-dos-namespace.json") || fail scale-dos "e2e/cmd/scalebench -namespaces 1"
fi

# 5b. Each deployment mode's cost to a Pod create through the API server.
banner "5b/6 modes: Pod create through kube-apiserver, $MODES_PODS Pods per mode: none, cel, hybrid, the webhook pair"
if skipped modes; then
  note "skipped (SKIP)"
elif [[ ! -f build/chart/cel.yaml ]]; then
  note "skipped: no build/chart/cel.yaml (make chart-render; make bench runs it)"
else
  bin_abs=$(realpath "$BIN")
  out_abs=$(realpath "$OUT")
  (cd e2e && CGO_ENABLED=0 "$GO" run ./cmd/admbench -pods "$MODES_PODS" -serve "$bin_abs" -chart ../build/chart \
    -out "$out_abs/admission-modes.json") || fail modes "e2e/cmd/admbench"
fi

# 6. Tables from everything in $OUT.
banner "6/6 report: perfkit tables into $DOCS"
"$PERFKIT" tables --in "$OUT" --out "$DOCS/results.md" || fail tables "perfkit tables"
[[ -f "$DOCS/results.md" ]] && { echo; cat "$DOCS/results.md"; }

if ((${#failed[@]} > 0)); then
  echo
  echo "bench: failed steps: ${failed[*]}"
  exit 1
fi
