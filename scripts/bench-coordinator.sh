#!/usr/bin/env bash
# Coordinator scale (release build): a `distillery coordinator` process driven by simulated
# workers polling at 1 Hz on a job of ~100,000 tasks; reports pull latency percentiles against
# a GetJob round-trip baseline in the same run, tasks/s, and the coordinator's CPU and peak RSS.
#
#   scripts/bench-coordinator.sh [WORKERS=1000] [TASKS=100000]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p distillery-cli
TARGET=${CARGO_TARGET_DIR:-target}
cargo run --release -q -p distillery-cluster --example bench_coordinator -- \
  "$TARGET/release/distillery" "${1:-1000}" "${2:-100000}"
