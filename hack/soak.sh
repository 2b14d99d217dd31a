#!/usr/bin/env bash
# Soak (make soak): a local serve under bench/cmd/loadgen at a fixed RATE for
# DURATION, while `perfkit soak` samples its memory and goroutines every
# INTERVAL (VmRSS and VmHWM from /proc, go_goroutines,
# process_resident_memory_bytes and go_memstats_heap_inuse_bytes from
# /metrics) and judges their trend over the second half. loadgen runs
# WARMUP + DURATION and sampling starts with it, so every sample is taken
# under load; the warmup falls in the first half, which the verdict leaves
# out.
#
# Results in $OUT, picked up by the next `make bench` (tables):
#   soak.jsonl   samples, one JSON object a line     soak.csv  the same, CSV
#   soak.txt     the summary and verdict             soak-load.json  loadgen's report
#
# Knobs (environment):
#   QUICK=1         a short run for checks: DURATION=20s INTERVAL=1s WARMUP=2s
#   RATE            requests/s                          (1000)
#   DURATION        sampled time                        (10m)
#   INTERVAL        time between samples                (10s)
#   WARMUP          loadgen warmup, also sampled        (10s)
#   FAIL_ON_GROWTH=1  exit 3 when RSS or goroutines grow
#   OUT, CONNECTIONS, FIXTURES, INSTANCES, PORT, METRICS_PORT, BIN, LOADGEN, PERFKIT
#                   as in hack/bench.sh
set -euo pipefail

if [[ "${QUICK:-0}" == 1 ]]; then
  DURATION=${DURATION:-20s}
  INTERVAL=${INTERVAL:-1s}
  WARMUP=${WARMUP:-2s}
fi
RATE=${RATE:-1000}
DURATION=${DURATION:-10m}
INTERVAL=${INTERVAL:-10s}
WARMUP=${WARMUP:-10s}
FAIL_ON_GROWTH=${FAIL_ON_GROWTH:-0}
OUT=${OUT:-build/bench}
CONNECTIONS=${CONNECTIONS:-32}
FIXTURES=${FIXTURES:-'^(pod|deployment|job)/create/absent/inject$'}
INSTANCES=${INSTANCES:-$(nproc)}
PORT=${PORT:-18443}
METRICS_PORT=${METRICS_PORT:-19090}
BIN=${BIN:-build/yunikorn-userinfo}
LOADGEN=${LOADGEN:-build/loadgen}
PERFKIT=${PERFKIT:-build/perfkit}
GO=${GO:-go}

for f in "$BIN" "$LOADGEN"; do
  [[ -x "$f" ]] || { echo "missing $f: run make build loadgen (make soak does)"; exit 1; }
done

# shellcheck source=hack/lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"
build_perfkit

tmp=$(mktemp -d)
loadgen_pid=
cleanup() {
  if [[ -n "$loadgen_pid" ]] && kill -0 "$loadgen_pid" 2>/dev/null; then
    kill -TERM "$loadgen_pid"
    wait "$loadgen_pid" || true
  fi
  serve_stop
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT"
rm -f "$OUT"/soak.jsonl "$OUT"/soak.csv "$OUT"/soak.txt "$OUT"/soak-load.json

serve_start "$tmp" || exit 1

machine_line
echo "soak: rate $RATE/s for $WARMUP + $DURATION, $CONNECTIONS connections, --instances $INSTANCES, sampled every $INTERVAL"

# loadgen runs WARMUP + DURATION; sampling starts with it and lasts
# DURATION, so it ends while the load still runs.
"$LOADGEN" --url "https://127.0.0.1:$PORT/mutate" --ca-file "$tmp/tls/ca.crt" \
  --connections "$CONNECTIONS" --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" \
  --fixtures "$FIXTURES" --server-pid "$server_pid" --json >"$OUT/soak-load.json" &
loadgen_pid=$!

growth=()
[[ "$FAIL_ON_GROWTH" == 1 ]] && growth=(--fail-on-growth)
soak_rc=0
"$PERFKIT" soak --pid "$server_pid" --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" \
  --interval "$INTERVAL" --duration "$DURATION" --out "$OUT/soak.jsonl" --csv "$OUT/soak.csv" \
  "${growth[@]}" | tee "$OUT/soak.txt" || soak_rc=${PIPESTATUS[0]}

load_rc=0
wait "$loadgen_pid" || load_rc=$?
loadgen_pid=
echo
echo "--- load during the soak"
if [[ -s "$OUT/soak-load.json" ]]; then
  "$PERFKIT" show "$OUT/soak-load.json"
fi
if [[ "$load_rc" != 0 ]]; then
  echo "loadgen exited $load_rc"
  exit 1
fi
exit "$soak_rc"
