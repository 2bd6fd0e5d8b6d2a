# Sourced by the scale-out benchmarks: a coordinator and worker processes on loopback, each
# worker pinned to one core. Needs BIN (the distillery binary) and WORK (a scratch directory).
export DISTILLERY_TOKEN=bench
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run_job NAME WORKERS PIPELINE OUTPUT [k=v ...]: a coordinator and WORKERS workers
# (worker i pinned to core i), the job submitted and waited for; prints the wall seconds.
run_job() {
  local name=$1 workers=$2 pipeline=$3 out=$4; shift 4
  local port; port=$(free_port)
  rm -rf "$WORK/state-$name" "$out"
  # The previous job's writes flushed first: a job of gigabytes leaves enough dirty pages for
  # the kernel to throttle the next job's writers while it writes them back.
  sync
  "$BIN" --quiet coordinator --listen "127.0.0.1:$port" --state "$WORK/state-$name" \
    > "$WORK/$name-coordinator.log" 2>&1 &
  local coord=$!; PIDS+=("$coord")
  local started=() i
  for ((i = 0; i < workers; i++)); do
    taskset -c "$i" "$BIN" --quiet worker --coordinator "http://127.0.0.1:$port" --slots 1 \
      > "$WORK/$name-worker-$i.log" 2>&1 &
    started+=($!); PIDS+=($!)
  done
  local t0 t1 tries=0
  until "$BIN" --quiet status --coordinator "http://127.0.0.1:$port" > /dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || { echo "coordinator did not start:" >&2; cat "$WORK/$name-coordinator.log" >&2; exit 1; }
    sleep 0.2
  done
  t0=$(date +%s.%N)
  local sets=() kv
  for kv in "output=$out" "$@"; do sets+=(--set "$kv"); done
  "$BIN" --quiet submit "$pipeline" --coordinator "http://127.0.0.1:$port" "${sets[@]}" \
    --wait > "$WORK/$name-submit.log" 2>&1 \
    || { echo "$name failed:" >&2; cat "$WORK/$name-submit.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  kill "${started[@]}" "$coord" 2>/dev/null || true
  wait "${started[@]}" "$coord" 2>/dev/null || true
  python3 -c "print(f'{$t1 - $t0:.2f}')"
}

