#!/usr/bin/env bash
# Coordinator scale (release build): a `distillery coordinator` process driven by simulated
# workers polling at 1 Hz; reports, per level, commits/s, pull latency percentiles and the
# coordinator's CPU, then pull latency against a GetJob round-trip baseline in the same run,
# tasks/s and peak RSS. Two shapes: ~100,000 tasks on two levels (50,000 input files, then
# 50,000 hseq shards), then 30,000 tasks on three levels (10,000 shards each), then the
# two-level job again with the coordinator killed and restarted at three quarters (the time
# to serve again and to accept a commit, against the job's submission). After each job,
# `distillery status` is asked about it.
#
#   scripts/bench-coordinator.sh [WORKERS=1000] [TASKS=100000]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p distillery-cli
TARGET=${CARGO_TARGET_DIR:-target}
run() {
  cargo run --release -q -p distillery-cluster --example bench_coordinator -- \
    "$TARGET/release/distillery" "$@"
}
echo "== two levels"
run "${1:-1000}" "${2:-100000}" 2
echo "== three levels, 10,000 shards"
run "${1:-1000}" 30000 3
echo "== two levels, the coordinator killed and restarted at three quarters"
run "${1:-1000}" "${2:-100000}" 2 restart
