#!/usr/bin/env bash
# LLM client and response-cache overhead (release build), each against a baseline in the same
# run, medians of ROUNDS rounds: the Client's chat requests/s vs raw reqwest against a
# zero-latency loopback server; ResponseCache lookups/s from the packed cache (warm: packs in
# memory) vs the one-object-per-entry layout and vs raw object_store gets of the same entries
# on local disk. Reports rates and ratios; no thresholds. Pin it to a core on a shared machine:
# `taskset -c 1 scripts/bench-llm.sh`.
#
#   scripts/bench-llm.sh [REQUESTS=20000] [IN_FLIGHT=64] [KEYS=20000] [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p distillery-llm --example bench_client -- "${1:-20000}" "${2:-64}" "${3:-20000}" "${4:-5}"
