# shellcheck shell=bash
# Shared by hack/load.sh, hack/soak.sh and hack/bench.sh (source it): a
# local `serve` with a throwaway certificate on 127.0.0.1.
#
# Uses BIN, PORT, METRICS_PORT and INSTANCES; sets server_pid.

server_pid=

# serve_start DIR: starts serve with its TLS files and log in DIR and waits
# (at most 10 s) until /readyz answers. Returns 1, after printing the log,
# if the server exits or never becomes ready.
serve_start() {
  local dir=$1
  "$BIN" serve --self-signed --self-signed-dir "$dir/tls" \
    --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --instances "$INSTANCES" --log-level warn >"$dir/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 100); do
    if curl -fsS --cacert "$dir/tls/ca.crt" "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/serve.log"
  return 1
}

# serve_stop: SIGTERM, and wait for the graceful shutdown.
serve_stop() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
  server_pid=
}

# machine_line: one line describing this machine, for the reports.
machine_line() {
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
}

# build_perfkit builds the bench module's perfkit into $PERFKIT (relative to
# the repository root unless absolute).
build_perfkit() {
  local out=$PERFKIT
  [[ $out = /* ]] || out=$PWD/$out
  (cd bench && "$GO" build -o "$out" ./cmd/perfkit)
}
