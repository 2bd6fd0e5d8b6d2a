#!/usr/bin/env bash
# LLM client and response-cache overhead (release build), each against a baseline in the same
# run: the Client's chat requests/s vs raw reqwest against a zero-latency loopback server, and
# ResponseCache lookups/s vs raw object_store gets of the same entries on local disk. Reports
# rates and ratios; no thresholds.
#
#   scripts/bench-llm.sh [REQUESTS=20000] [IN_FLIGHT=64] [KEYS=20000]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p distillery-llm --example bench_client -- "${1:-20000}" "${2:-64}" "${3:-20000}"
