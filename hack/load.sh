#!/usr/bin/env bash
# Load test of a local `serve`: starts it with a self-signed certificate on
# 127.0.0.1, runs cmd/loadgen at each rate in RATES (requests/s; 0 means
# saturation), and stops it. The server and the generator share the machine,
# so the generator's own CPU use is printed with every run.
#
#   make load                                  # defaults below
#   RATES="1000 2000 0" DURATION=20s make load
#   FIXTURES='.' make load                     # every fixture, refusals included
set -euo pipefail

BIN=${BIN:-build/yunikorn-userinfo}
LOADGEN=${LOADGEN:-build/loadgen}
RATES=${RATES:-"500 1000 2000 0"}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-32}
# Default mix: the requests a busy cluster sends most, a user's Pod and
# workload creations that get the annotation injected.
FIXTURES=${FIXTURES:-'^(pod|deployment|job)/create/absent/inject$'}
INSTANCES=${INSTANCES:-$(nproc)}
PORT=${PORT:-18443}
METRICS_PORT=${METRICS_PORT:-19090}

dir=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

"$BIN" serve --self-signed --self-signed-dir "$dir/tls" \
  --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
  --instances "$INSTANCES" --log-level warn >"$dir/serve.log" 2>&1 &
server_pid=$!

for _ in $(seq 1 100); do
  if curl -fsS --cacert "$dir/tls/ca.crt" "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || { cat "$dir/serve.log"; exit 1; }
  sleep 0.1
done
curl -fsS --cacert "$dir/tls/ca.crt" "https://127.0.0.1:$PORT/readyz" >/dev/null

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
echo "server: --instances $INSTANCES, loadgen: --connections $CONNECTIONS, fixtures $FIXTURES"
for rate in $RATES; do
  echo
  echo "=== rate ${rate/#0/saturation} ==="
  "$LOADGEN" --url "https://127.0.0.1:$PORT/mutate" --ca-file "$dir/tls/ca.crt" \
    --connections "$CONNECTIONS" --rate "$rate" --duration "$DURATION" --warmup "$WARMUP" \
    --fixtures "$FIXTURES" --server-pid "$server_pid"
done
