#!/usr/bin/env bash
# Coverage-guided fuzzing of Distillery's parsers with libFuzzer, on stable Rust.
#
#   scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_ARG...]   one target (see `scripts/fuzz.sh list`)
#   scripts/fuzz.sh all SECONDS [LIBFUZZER_ARG...]      every target, one after the other
#   scripts/fuzz.sh list                                the targets
#   scripts/fuzz.sh build                               only build
#
# Builds the `fuzz/` crate (one libFuzzer binary per target of crates/distillery-fuzz) into
# target/fuzz with the sanitizer-coverage passes (stable rustc takes them as plain codegen
# flags; `--target` keeps them off build scripts and proc macros), writes a seed corpus per
# target (committed seeds, regressions and slices of ../shared/data, by
# `distillery-fuzz-tool corpus`) into target/fuzz-corpus/TARGET, where libFuzzer also keeps
# what it finds, and runs the target for SECONDS with RSS and malloc limits of 1 GiB and a
# 10 s timeout per input. An input that crashes, runs out of memory or times out is copied to
# fuzz/regressions/TARGET/ (the smoke test of `cargo test -p distillery-fuzz` replays it) and
# the script exits 1. One line per target sums up: executions, exec/s, peak RSS, result.
# Logs: target/fuzz-logs/TARGET.log. Runs one target at a time: one core.
#
# When the libFuzzer build fails (no C++ compiler), FUZZ_FALLBACK=1 runs the deterministic
# mutator of distillery-fuzz instead (no coverage feedback).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FUZZ_TARGET_DIR=${DISTILLERY_FUZZ_TARGET_DIR:-$ROOT/target/fuzz}
CORPUS_ROOT=$ROOT/target/fuzz-corpus
ARTIFACT_ROOT=$ROOT/target/fuzz-artifacts
LOG_ROOT=$ROOT/target/fuzz-logs
REGRESSIONS=$ROOT/fuzz/regressions
HOST=$(rustc -vV | sed -n 's/^host: //p')
BIN_DIR=$FUZZ_TARGET_DIR/$HOST/release
TOOL=${CARGO_TARGET_DIR:-$ROOT/target}/debug/distillery-fuzz-tool
RSS_LIMIT_MB=${FUZZ_RSS_LIMIT_MB:-1024}

usage() {
    sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

targets() {
    for f in "$ROOT"/fuzz/fuzz_targets/*.rs; do
        basename "$f" .rs
    done
}

build_tool() {
    (cd "$ROOT" && cargo build -q -p distillery-fuzz --bin distillery-fuzz-tool)
}

build_fuzzers() {
    # The workspace's versions, plus libfuzzer-sys.
    cp -f "$ROOT/Cargo.lock" "$ROOT/fuzz/Cargo.lock"
    local flags=(
        --cfg fuzzing
        -Cpasses=sancov-module
        -Cllvm-args=-sanitizer-coverage-level=4
        -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
        -Cllvm-args=-sanitizer-coverage-pc-table
        -Cllvm-args=-sanitizer-coverage-trace-compares
        -Cforce-frame-pointers=yes
    )
    local args=(build --release --manifest-path "$ROOT/fuzz/Cargo.toml"
        --target "$HOST" --target-dir "$FUZZ_TARGET_DIR" --bins)
    # libfuzzer-sys is usually in the local registry cache already: no index update needed.
    RUSTFLAGS="${flags[*]}" cargo "${args[@]}" --offline 2>/dev/null ||
        RUSTFLAGS="${flags[*]}" cargo "${args[@]}"
}

# Peak RSS in MiB from /usr/bin/time -v output, else from libFuzzer's stats.
peak_rss() {
    local timefile=$1 log=$2 kb
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$timefile" 2>/dev/null || true)
    if [ -n "$kb" ]; then
        echo $((kb / 1024))
    else
        sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1
    fi
}

run_target() {
    local t=$1 secs=$2
    shift 2
    local corpus=$CORPUS_ROOT/$t artifacts=$ARTIFACT_ROOT/$t log=$LOG_ROOT/$t.log
    local timefile=$LOG_ROOT/$t.time
    mkdir -p "$corpus" "$artifacts" "$LOG_ROOT"
    "$TOOL" corpus "$t" "$corpus" >/dev/null
    local marker=$LOG_ROOT/$t.start
    touch "$marker"
    local timer=()
    if [ -x /usr/bin/time ]; then
        timer=(/usr/bin/time -v -o "$timefile")
    fi
    local rc=0
    RUST_BACKTRACE=1 "${timer[@]}" "$BIN_DIR/$t" "$corpus" \
        -max_total_time="$secs" -rss_limit_mb="$RSS_LIMIT_MB" -malloc_limit_mb="$RSS_LIMIT_MB" \
        -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" \
        >"$log" 2>&1 || rc=$?
    local execs speed rss result=ok
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(peak_rss "$timefile" "$log")
    local found=()
    while IFS= read -r f; do
        found+=("$f")
    done < <(find "$artifacts" -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' \) -newer "$marker" 2>/dev/null || true)
    if [ "$rc" -ne 0 ] || [ "${#found[@]}" -gt 0 ]; then
        result="FAILED (exit $rc)"
        mkdir -p "$REGRESSIONS/$t"
        for f in "${found[@]}"; do
            cp -f "$f" "$REGRESSIONS/$t/"
            result="$result $(basename "$f")"
        done
        if [ "${#found[@]}" -gt 0 ]; then
            result="$result -> fuzz/regressions/$t/"
        fi
        result="$result; log $log"
    fi
    if [ -n "$rss" ] && [ "$rss" -gt "$RSS_LIMIT_MB" ]; then
        result="FAILED (peak RSS ${rss} MiB over ${RSS_LIMIT_MB}); log $log"
        rc=1
    fi
    printf '%-18s %6ss  execs=%-10s exec/s=%-7s peak_rss=%sMiB  %s\n' \
        "$t" "$secs" "${execs:-?}" "${speed:-?}" "${rss:-?}" "$result"
    [ "$result" = ok ]
}

fallback_target() {
    local t=$1 secs=$2
    "$TOOL" mutate "$t" "$secs"
}

[ $# -ge 1 ] || usage
case $1 in
list)
    targets
    exit 0
    ;;
build)
    build_tool
    build_fuzzers
    exit 0
    ;;
esac
[ $# -ge 2 ] || usage
what=$1 secs=$2
shift 2
case $secs in
'' | *[!0-9]*) usage ;;
esac
if [ "$what" = all ]; then
    mapfile -t chosen < <(targets)
else
    # Not `grep -q`: it exits at the first match, and under pipefail the SIGPIPE of the
    # listing would count as no match.
    targets | grep -x "$what" >/dev/null || {
        echo "unknown target $what; targets: $(targets | tr '\n' ' ')" >&2
        exit 2
    }
    chosen=("$what")
fi

build_tool
if [ "${FUZZ_FALLBACK:-0}" = 1 ]; then
    status=0
    for t in "${chosen[@]}"; do
        fallback_target "$t" "$secs" || status=1
    done
    exit $status
fi
build_fuzzers

status=0
for t in "${chosen[@]}"; do
    run_target "$t" "$secs" "$@" || status=1
done
exit $status
