#!/usr/bin/env bash
# Scale-out benchmark: the same job on 1 worker process and on 2 worker processes, each pinned
# to one core of its own (taskset), in one run on this machine; the coordinator unpinned.
# Reports each stage's speedup and the job's, and checks the two outputs are identical. No
# thresholds (the issue's goal is >= 1.8x per stage).
#
#   scripts/bench-scaleout.sh [QUESTIONS=100000] [LATENCY_MS=50]
#
# 1. Labels: the shared HotpotQA and MuSiQue samples repeated to QUESTIONS questions
#    (scripts/gen_label_bench.py), ingest + label (both methods), run.shards = 4.
# 2. Triples: pipelines/triples.toml (the shared QA contexts and wiki sample) against a
#    loopback stand-in teacher answering every request after LATENCY_MS
#    (scripts/bench/stand_in_teacher.py), llm.max_concurrency = 8 per task, a fresh response
#    cache for each run, run.shards = 4.
#
# A stage's time on N workers is the busiest worker's share: the sum of the seconds of the
# stage's tasks that ran on it (from `_summary.json`'s `tasks`), its merge task included;
# tasks of one stage run on a level of their own, so this is the stage's wall time less
# scheduling gaps. The job's time is the wall time of `submit --wait`.
#
# BENCH_DIR keeps the generated inputs between runs; BENCH_SECTIONS (say "1") runs only those
# sections; DISTILLERY_BIN uses a binary already built (a debug build gives ratios too, far
# slower).
set -euo pipefail
cd "$(dirname "$0")/.."
QUESTIONS=${1:-100000}
LATENCY_MS=${2:-50}
WORK=${BENCH_DIR:-$(mktemp -d)}
SECTIONS=${BENCH_SECTIONS:-1 2}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
[ -d ../shared/data ] || { echo "bench needs ../shared/data"; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "bench needs 2 cores"; exit 1; }
if [ -z "${DISTILLERY_BIN:-}" ]; then
  cargo build --release -p distillery-cli
  BIN=$PWD/target/release/distillery
else
  BIN=$DISTILLERY_BIN
fi
command -v taskset >/dev/null || { echo "bench needs taskset (util-linux)"; exit 1; }
source scripts/bench/cluster.sh

# report NAME ONE_OUT TWO_OUT ONE_WALL TWO_WALL: per stage busiest-worker seconds and speedup.
report() {
  python3 - "$@" <<'PY'
import json, sys
name, one, two, w1, w2 = sys.argv[1:6]
def stages(out):
    s = json.load(open(f"{out}/_summary.json"))
    res = {}
    for st in s["stages"]:
        per = {}
        for t in st.get("tasks", []):
            per[t["worker"]] = per.get(t["worker"], 0.0) + t["seconds"]
        res[st["stage"]] = (max(per.values()) if per else 0.0, len(st.get("tasks", [])), len(per))
    return res
a, b = stages(one), stages(two)
print(f"-- {name}: job wall {float(w1):.1f} s on 1 worker, {float(w2):.1f} s on 2: {float(w1)/float(w2):.2f}x")
for k in a:
    (s1, n1, _), (s2, n2, ws) = a[k], b.get(k, (0.0, 0, 0))
    ratio = f"{s1/s2:.2f}x" if s2 > 0 else "-"
    print(f"   {k:<22} {n1:>3} tasks  1 worker {s1:8.2f} s   2 workers {s2:8.2f} s ({ws} used)   {ratio}")
PY
}

same_sft() { # DIR1 DIR2 FILES...
  local a=$1 b=$2; shift 2
  for f in "$@"; do
    cmp -s <(sort "$a/$f") <(sort "$b/$f") || { echo "   DIFFERENT: $f"; return 1; }
  done
  echo "   outputs identical: $*"
}

echo "== generating $QUESTIONS questions in $WORK"
[ -f "$WORK/hotpot.json" ] && [ "$(cat "$WORK/questions" 2>/dev/null)" = "$QUESTIONS" ] \
  || { python3 scripts/gen_label_bench.py "$WORK" "$QUESTIONS" && echo "$QUESTIONS" > "$WORK/questions"; }
cat > "$WORK/labels.toml" <<TOML
version = 1
name = "bench-scaleout-labels"
output = "unused"
[run]
shards = 4
max_bad_ratio = 1.0
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["$WORK/hotpot.json"]
[[inputs]]
name = "musique"
format = "musique"
paths = ["$WORK/musique.jsonl"]
[[stages]]
kind = "label"
options = { methods = ["hseq-paper", "answer-aware"] }
TOML

if want 1; then
echo "== 1. labels: 1 worker vs 2 workers (one core each)"
l1=$(run_job labels-1 1 "$WORK/labels.toml" "$WORK/labels-1")
l2=$(run_job labels-2 2 "$WORK/labels.toml" "$WORK/labels-2")
report labels "$WORK/labels-1" "$WORK/labels-2" "$l1" "$l2"
same_sft "$WORK/labels-1" "$WORK/labels-2" sft/train.jsonl sft/validation.jsonl label_report.json
fi
want 2 || exit 0

echo "== 2. triples: 1 worker vs 2 workers (one core each), ${LATENCY_MS} ms a request"
PORT=$(free_port)
python3 scripts/bench/stand_in_teacher.py "$PORT" "$LATENCY_MS" > "$WORK/teacher.log" 2>&1 &
PIDS+=($!)
sleep 1
T=("llm.base_url=http://127.0.0.1:$PORT/v1" llm.model=stand-in run.shards=4 llm.max_concurrency=8)
rm -rf "$WORK/cache-1" "$WORK/cache-2"
t1=$(run_job triples-1 1 pipelines/triples.toml "$WORK/triples-1" "${T[@]}" "llm.cache=$WORK/cache-1")
t2=$(run_job triples-2 2 pipelines/triples.toml "$WORK/triples-2" "${T[@]}" "llm.cache=$WORK/cache-2")
report triples "$WORK/triples-1" "$WORK/triples-2" "$t1" "$t2"
same_sft "$WORK/triples-1" "$WORK/triples-2" openie/openie_results.json openie/ras.jsonl
for t in triples; do
  q="SELECT * FROM $t ORDER BY id"
  cmp -s <("$BIN" --quiet inspect "$WORK/triples-1" --sql "$q" --format csv) \
         <("$BIN" --quiet inspect "$WORK/triples-2" --sql "$q" --format csv) \
    && echo "   table $t identical" || echo "   table $t DIFFERENT"
done
