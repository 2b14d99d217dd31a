#!/usr/bin/env bash
# Load test of a local `serve`: starts it with a self-signed certificate on
# 127.0.0.1, runs bench/cmd/loadgen at each rate in RATES (requests/s; 0 means
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

# shellcheck source=hack/lib/serve.sh
source "$(dirname "$0")/lib/serve.sh"

dir=$(mktemp -d)
cleanup() {
  serve_stop
  rm -rf "$dir"
}
trap cleanup EXIT

serve_start "$dir" || exit 1

machine_line
echo "server: --instances $INSTANCES, loadgen: --connections $CONNECTIONS, fixtures $FIXTURES"
for rate in $RATES; do
  echo
  echo "=== rate ${rate/#0/saturation} ==="
  "$LOADGEN" --url "https://127.0.0.1:$PORT/mutate" --ca-file "$dir/tls/ca.crt" \
    --connections "$CONNECTIONS" --rate "$rate" --duration "$DURATION" --warmup "$WARMUP" \
    --fixtures "$FIXTURES" --server-pid "$server_pid"
done
