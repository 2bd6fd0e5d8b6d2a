#!/usr/bin/env bash
# Label-stage benchmark: the shared HotpotQA and MuSiQue samples repeated to QUESTIONS
# questions (ids made unique, see scripts/gen_label_bench.py), labelled by a release build on
# one core (taskset -c 0, run.parallelism = 1) with both methods, against ingest alone of the
# same files with the same binary. Reports questions per second per core and the ratio; then,
# on a machine with more cores, the same two runs on all of them (run.parallelism = nproc),
# with the label stage's speedup over one core, and each run's label stage phases (the
# summary's `phase_us.*` CPU times) as questions per CPU second against ingest's (from the
# CPU time of its process), and the same in bytes: what ingest reads against what the label
# stage writes, each per CPU second. No thresholds.
#
# Each core count runs BENCH_ROUNDS rounds (default 3) of the two runs back to back, so each
# round's ratio compares runs minutes apart: on a shared machine whose speed drifts by 10-30%
# over minutes, one pair of runs can be off by that much. Every round's label stage time and
# ratio is printed, and the round with the median ratio (the lower middle one for an even
# count) is reported in full.
#
#   scripts/bench-label.sh [QUESTIONS=100000]
#
# BENCH_DIR (a path without spaces) keeps the generated inputs between runs; DISTILLERY_BIN
# uses a binary already built instead of building the release one; BENCH_CONTEXTS=shared
# gives every copy of a question the original's context documents (how the benchmark ran
# before: ingest then writes one copy's documents only, see scripts/gen_label_bench.py)
# instead of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
QUESTIONS=${1:-100000}
ROUNDS=${BENCH_ROUNDS:-3}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "BENCH_ROUNDS must be a positive integer, not $ROUNDS"; exit 1; }
WORK=${BENCH_DIR:-$(mktemp -d)}
[ -d ../shared/data ] || { echo "bench needs ../shared/data"; exit 1; }
if [ -z "${DISTILLERY_BIN:-}" ]; then
  cargo build --release -p distillery-cli
  BIN=$PWD/target/release/distillery
else
  BIN=$DISTILLERY_BIN
fi
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""

# Runs a command; prints its wall seconds, the peak resident set size of its processes (MiB)
# and their CPU seconds (user + system).
secs() { /usr/bin/env python3 -c 'import resource,sys,time,subprocess; t=time.time(); r=subprocess.run(sys.argv[1], shell=True); u=resource.getrusage(resource.RUSAGE_CHILDREN); print(f"{time.time()-t:.3f} {u.ru_maxrss/1024:.0f} {u.ru_utime+u.ru_stime:.3f}") if r.returncode==0 else sys.exit(r.returncode)' "$1"; }

CONTEXTS=${BENCH_CONTEXTS:-distinct}
case "$CONTEXTS" in
  distinct) GEN_FLAGS=() ;;
  shared) GEN_FLAGS=(--shared-contexts) ;;
  *) echo "BENCH_CONTEXTS must be distinct or shared, not $CONTEXTS"; exit 1 ;;
esac
echo "== generating $QUESTIONS questions ($CONTEXTS contexts) in $WORK"
[ -f "$WORK/hotpot.json" ] && [ -f "$WORK/musique.jsonl" ] && [ "$(cat "$WORK/questions" 2>/dev/null)" = "$QUESTIONS $CONTEXTS" ] \
  || { python3 scripts/gen_label_bench.py "$WORK" "$QUESTIONS" "${GEN_FLAGS[@]}" && echo "$QUESTIONS $CONTEXTS" > "$WORK/questions"; }

# Two runs per core count: ingest alone (the label stage dropped) and ingest + label.
write_pipeline() { # FILE OUTPUT WITH_LABEL PARALLELISM
  cat > "$1" <<TOML
version = 1
name = "bench-label"
output = "$2"
[run]
shards = 4
parallelism = $4
[[inputs]]
name = "hotpotqa"
format = "hotpotqa"
paths = ["$WORK/hotpot.json"]
[[inputs]]
name = "musique"
format = "musique"
paths = ["$WORK/musique.jsonl"]
TOML
  if [ "$3" = yes ]; then
    printf '[[stages]]\nkind = "label"\noptions = { methods = ["hseq-paper", "answer-aware"] }\n' >> "$1"
  fi
}
CORES=$(nproc)
write_pipeline "$WORK/ingest.toml" "$WORK/out-ingest" no 1
write_pipeline "$WORK/label.toml" "$WORK/out-label" yes 1
write_pipeline "$WORK/ingest-all.toml" "$WORK/out-ingest-all" no "$CORES"
write_pipeline "$WORK/label-all.toml" "$WORK/out-label-all" yes "$CORES"

# Ingest alone, then ingest + label, with PIN (may be empty) and the pipelines of SUFFIX; sets
# `ingest` and `total` to "wall_seconds peak_rss_mib cpu_seconds".
runs() { # PIN SUFFIX WHAT
  echo "== ingest only ($3)"
  ingest=$(secs "$1 $BIN --quiet run $WORK/ingest$2.toml > /dev/null")
  echo "== ingest + label, methods hseq-paper and answer-aware ($3)"
  total=$(secs "$1 $BIN --quiet run $WORK/label$2.toml > /dev/null")
}

# ROUNDS rounds of `runs`; prints each round's label stage seconds against ingest's and sets
# `ingest`, `total` and `summary` (a copy of its summary) to those of the median round by that
# ratio.
rounds() { # PIN SUFFIX WHAT
  local r list=""
  for r in $(seq 1 "$ROUNDS"); do
    runs "$1" "$2" "$3, round $r of $ROUNDS"
    cp "$WORK/out-label$2/_summary.json" "$WORK/round-$r$2.json"
    list+="$r $WORK/round-$r$2.json $ingest $total"$'\n'
  done
  local pick
  pick=$(python3 - <<PY
import json
rows = []
for line in '''$list'''.strip().splitlines():
    r, path, ingest, _rss, _cpu, total, trss, tcpu = line.split()
    label = next(st for st in json.load(open(path))["stages"] if st["stage"] == "label")
    rows.append((label["seconds"] / float(ingest), int(r), float(ingest), label["seconds"], line))
for ratio, r, ingest, label, _ in rows:
    print(f"round {r}: ingest only {ingest:.2f} s, label stage {label:.2f} s = {ratio:.2f}x ingest", flush=True)
ratios = sorted(rows)
median = ratios[(len(ratios) - 1) // 2]
print(f"label stage / ingest over {len(rows)} round(s): median {median[0]:.2f}x "
      f"(min {ratios[0][0]:.2f}x, max {ratios[-1][0]:.2f}x); round {median[1]} reported below")
print("PICK " + median[4])
PY
)
  echo "${pick%%PICK *}" | sed '/^$/d'
  read -r _ summary i1 i2 i3 t1 t2 t3 <<< "${pick##*PICK }"
  ingest="$i1 $i2 $i3"
  total="$t1 $t2 $t3"
}

report() { # SUMMARY INGEST_SECS INGEST_RSS INGEST_CPU TOTAL_SECS TOTAL_RSS TOTAL_CPU CORES [ONE_CORE_SUMMARY]
python3 - "$@" <<'PY'
import json, sys
def stages_of(path):
    return json.load(open(path))["stages"]
def label_stage(stages):
    return next(st for st in stages if st["stage"] == "label")
ingest, ingest_rss, ingest_cpu, total, total_rss, _, cores = map(float, sys.argv[2:9])
stages = stages_of(sys.argv[1])
label = label_stage(stages)
c = label["counters"]
q = c["questions"]
print(f"questions {q}: samples train {c.get('samples.train', 0)}, validation {c.get('samples.validation', 0)}, "
      f"duplicates removed {c.get('duplicates_removed', 0)}")
print(f"ingest only: {ingest:.2f} s   ingest + label: {total:.2f} s   end to end {total / ingest:.2f}x")
print(f"peak resident memory: ingest only {ingest_rss:,.0f} MiB, ingest + label {total_rss:,.0f} MiB "
      f"(contexts in {c.get('context_groups', 0)} group(s) over the inputs, "
      f"{c.get('context_rows_spilled', 0):,} rows spilled; context_memory_bytes default)")
per_core = q / label["seconds"] / cores
print(f"label stage: {label['seconds']:.2f} s = {per_core:,.0f} questions/s per core on {cores:.0f} "
      f"core(s) (end to end {q / total / cores:,.0f} questions/s per core)")
# Rates per core by CPU time: ingest's from its process's CPU seconds, the label stage's phases
# from their `phase_us.*` counters (CPU time over all the stage's threads).
print(f"ingest: {ingest_cpu:.2f} CPU s = {q / ingest_cpu:,.0f} questions per CPU second")
for name in ["read", "hseq", "label", "samples", "write"]:
    busy = c.get(f"phase_us.{name}", 0) / 1e6
    if busy > 0:
        print(f"  phase {name:8s} {busy:7.2f} CPU s = {q / busy:9,.0f} questions per CPU second "
              f"({ingest_cpu / busy:.2f}x ingest's rate)")
# The CPU the stage spends before it renders or writes anything, against ingest's.
before_samples = sum(c.get(f"phase_us.{n}", 0) for n in ["read", "hseq", "label"]) / 1e6
print(f"before any sample is rendered or written (read + hseq + label): {before_samples:.2f} CPU s "
      f"= {before_samples / ingest_cpu:.2f}x ingest's CPU")
# The same work counted in bytes, each per CPU second of its own: what ingest reads (the raw
# inputs; the ingest stages of this run read the same files as the ingest-only run) against
# what the label stage writes (labels and sft Parquet, the JSONL files, dataset_info.json and
# label_report.json).
stage_cpu = sum(c.get(f"phase_us.{n}", 0) for n in ["read", "hseq", "label", "samples", "write"]) / 1e6
read_in = sum(st["bytes_in"] for st in stages if st["stage"].startswith("ingest/"))
if stage_cpu > 0 and read_in > 0:
    mb = 1e6
    print(f"bytes: ingest reads {read_in / mb:,.0f} MB = {read_in / mb / ingest_cpu:.1f} MB per CPU second; "
          f"the label stage writes {label['bytes_out'] / mb:,.0f} MB ({label['bytes_out'] / read_in:.2f}x what ingest reads) "
          f"= {label['bytes_out'] / mb / stage_cpu:.1f} MB per CPU second")
if len(sys.argv) > 9:
    one_core = label_stage(stages_of(sys.argv[9]))["seconds"]
    print(f"label stage speedup on {cores:.0f} cores: {one_core / label['seconds']:.2f}x one core")
PY
}

rounds "$PIN" "" "one core"
one_core_summary=$summary
report "$summary" $ingest $total 1
[ "$CORES" -gt 1 ] || exit 0
rounds "" "-all" "$CORES cores"
report "$summary" $ingest $total "$CORES" "$one_core_summary"
