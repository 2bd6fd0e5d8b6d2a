#!/usr/bin/env bash
# The teacher client's adaptive pace against every fixed number of requests in flight
# (1, 2, 4, ..., 64), each setting from a fresh start for SECONDS on the same server in the
# same run, 64 requests offered at once (what a teacher stage buffers). Prints answers per
# second per setting and the adaptive share of the best fixed setting; fails if a request is
# lost or (on the stand-in) served twice.
#
#   scripts/bench-teacher-pace.sh [SECONDS]          # the stand-in's two scenarios
#   DISTILLERY_VLLM_URL=http://127.0.0.1:8011/v1 DISTILLERY_VLLM_MODEL=tiny \
#     scripts/bench-teacher-pace.sh [SECONDS]        # and a real server (CPU vLLM: scripts/vllm-cpu/)
#
# The stand-in (crates/distillery-testkit/src/pace_stand_in.rs): `steady` serves 24 at
# once with an unbounded queue; `shrinking` serves 32, then 8 from half-way, and refuses with
# 503 past 16 waiting. PACE_TRACE=1 prints the adaptive limit every half second.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-30}
cargo build --release -q -p distillery-llm --example pace_bench
BIN=${CARGO_TARGET_DIR:-target}/release/examples/pace_bench
echo "== cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
"$BIN" stand-in "$SECONDS_PER"
if [ -n "${DISTILLERY_VLLM_URL:-}" ]; then
  "$BIN" server "$DISTILLERY_VLLM_URL" "${DISTILLERY_VLLM_MODEL:-tiny}" "$SECONDS_PER"
else
  echo "(DISTILLERY_VLLM_URL is not set: no real-server scenario)"
fi
