#!/usr/bin/env bash
# KG benchmarks against named baselines on the same machine, in the same run. Reports ratios;
# no thresholds. Figures go to docs/benchmarks.md.
#
#   scripts/bench-kg.sh [EDGES=50000000] [QUESTIONS=1000]
#
# 1. Freebase parsing: the generated KG (below) gzipped, read by a pipeline with one
#    `freebase` input (parse, English filter, names, Parquet) on one core and on two, vs
#    `gzip -dc | wc -l` (the floor) and pyoxigraph's strict N-Triples parser reading the same
#    .gz (one core). Triples per second and peak RSS.
# 2. Subgraphs: QUESTIONS generated CWQ-form questions (one or two topic entities), 3 hops,
#    on a generated Freebase-shaped KG of EDGES N-Triples lines (NODES = EDGES / 5 entities,
#    scripts/bench/kg_gen.py): the `subgraph` stage vs Hydra's access pattern, one SPARQL
#    query per frontier entity and direction, on pyoxigraph with the same KG loaded
#    (scripts/bench/hydra_subgraph.py). Loading is timed apart from the walks: our ingest +
#    KG index build (one core) against the store's bulk load. The stage runs in both modes:
#    over the built index (`index`, tasks = cores) and as a scan of the KG's parts (one task
#    over 8 parts; a task scans the whole KG per hop, its parts in parallel). Both on one
#    core (taskset -c 0; run.parallelism = 1, the walk on one thread), then on two
#    (parallelism 2, two threads). The per-question edge sets must be identical.
# 3. KG index build: a job ingesting the KG and building its adjacency index (the `index`
#    stage with kinds = ["kg"]), one core, with this binary (external sorts in bounded
#    memory) and with BENCH_KG_BASELINE, a binary whose KG build held the graph in memory
#    (e4e2de4 or earlier): the index stage's seconds and the job's peak RSS. Run at two
#    sizes to see what grows with the graph.
#
# BENCH_DIR keeps the inputs between runs; DISTILLERY_BIN runs another binary instead of
# building a release one; BENCH_SECTIONS picks sections (default 12).
set -euo pipefail
cd "$(dirname "$0")/.."
EDGES=${1:-50000000}
QUESTIONS=${2:-1000}
NODES=${BENCH_NODES:-$((EDGES / 5))}
WORK=${BENCH_DIR:-$(mktemp -d)}
SECTIONS=${BENCH_SECTIONS:-12}
mkdir -p "$WORK"
python3 -c "import pyoxigraph, pyarrow" 2>/dev/null || python3 -m pip install --quiet pyoxigraph pyarrow
if [ -n "${DISTILLERY_BIN:-}" ]; then
  BIN=$(realpath "$DISTILLERY_BIN")
else
  cargo build --release -p distillery-cli
  BIN=$PWD/target/release/distillery
fi
ONE="taskset -c 0"
TWO="taskset -c 0,1"
command -v taskset >/dev/null || { ONE=""; TWO=""; }

stage_secs() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); print([x for x in s['stages'] if x['stage']==sys.argv[2]][0]['seconds'])" "$1" "$2"; }
# The longest task of a stage: its wall time when all its tasks start together (tasks =
# parallelism), without the job's start-up and question ingest.
longest_task() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); print(max(t['seconds'] for t in [x for x in s['stages'] if x['stage']==sys.argv[2]][0]['tasks']))" "$1" "$2"; }
counter() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); print([x for x in s['stages'] if x['stage']==sys.argv[2]][0]['counters'].get(sys.argv[3],0))" "$1" "$2" "$3"; }
# Runs a command under /usr/bin/time: prints "wall seconds, peak RSS MB"; on failure prints
# the end of its log and fails (callers write `r=$(timed ...) || exit 1`).
timed() {
  local out=$1; shift
  if ! /usr/bin/time -f "%e %M" -o "$out.time" "$@" > "$out.log" 2>&1; then
    echo "failed: $*" >&2; tail -5 "$out.log" >&2; return 1
  fi
  python3 -c "e,m=open('$out.time').read().split()[-2:]; print(f'{float(e):.2f} {int(m)/1024:.0f}')"
}

if [ ! -f "$WORK/kg/kg.nt" ]; then
  echo "== generating $EDGES edges in $WORK/kg"
  python3 scripts/bench/kg_gen.py "$WORK/kg" "$EDGES" "$NODES" "$QUESTIONS"
fi

if [[ $SECTIONS == *1* ]]; then
echo "== 1. freebase parsing: $EDGES lines, gzip"
[ -f "$WORK/kg/kg.nt.gz" ] || gzip -1 -k "$WORK/kg/kg.nt"
cat > "$WORK/fb-floor.sh" <<SH
gzip -dc "$WORK/kg/kg.nt.gz" | wc -l
SH
r=$(timed "$WORK/floor" $ONE bash "$WORK/fb-floor.sh") || exit 1
read -r floor _ <<<"$r"
r=$(timed "$WORK/oxi" $ONE python3 -c "
import gzip, sys, pyoxigraph as ox
n = 0
with gzip.open(sys.argv[1], 'rb') as f:
    for _ in ox.parse(f, format=ox.RdfFormat.N_TRIPLES):
        n += 1
print(n)" "$WORK/kg/kg.nt.gz") || exit 1
read -r oxi rss_oxi <<<"$r"
fbpipe() { # name parallelism
  cat > "$WORK/$1.toml" <<TOML
version = 1
name = "$1"
output = "$WORK/out-$1"
[run]
parallelism = $2
[[inputs]]
name = "fb"
format = "freebase"
paths = ["$WORK/kg/kg.nt.gz"]
TOML
  echo "$WORK/$1.toml"
}
r=$(timed "$WORK/fb1" $ONE "$BIN" --quiet run "$(fbpipe fb1 1)") || exit 1
read -r fb1 rss_fb1 <<<"$r"
r=$(timed "$WORK/fb2" $TWO "$BIN" --quiet run "$(fbpipe fb2 2)") || exit 1
read -r fb2 rss_fb2 <<<"$r"
kept=$(python3 -c "import json; s=json.load(open('$WORK/out-fb1/_summary.json')); print(sum(t['rows'] for t in json.load(open('$WORK/out-fb1/_manifest.json'))['tables'] if t['name'] in ('triples', 'literals')))")
python3 -c "
n = $EDGES
print(f'{n} lines ({$kept} triples kept): gzip -dc | wc -l {$floor:.2f} s ({n/$floor/1e6:.2f} M lines/s)')
print(f'pyoxigraph strict parse (one core): {$oxi:.2f} s ({n/$oxi/1e6:.2f} M/s), peak {$rss_oxi} MB')
print(f'distillery freebase ingest, one core: {$fb1:.2f} s ({n/$fb1/1e6:.2f} M/s, {$oxi/$fb1:.2f}x pyoxigraph), peak {$rss_fb1} MB')
print(f'distillery freebase ingest, two cores: {$fb2:.2f} s ({$fb1/$fb2:.2f}x one core), peak {$rss_fb2} MB')"
rm -rf "$WORK/out-fb1" "$WORK/out-fb2"
fi

if [[ $SECTIONS == *2* ]]; then
echo "== 2. subgraphs: $QUESTIONS questions, 3 hops, $EDGES edges, $NODES entities"
# The KG ingested and indexed once (the counterpart of the store's bulk load below).
cat > "$WORK/kgload.toml" <<TOML
version = 1
name = "kgload"
output = "$WORK/out-kgload"
[run]
parallelism = 1
shards = 8
[[inputs]]
name = "kg"
format = "freebase"
paths = ["$WORK/kg/kg.nt"]
[[stages]]
name = "kgi"
kind = "index"
options = { kinds = ["kg"], root = "$WORK/kgroot" }
TOML
rm -rf "$WORK/out-kgload" "$WORK/kgroot"
r=$(timed "$WORK/kgload" $ONE "$BIN" --quiet run "$WORK/kgload.toml") || exit 1
read -r kgload rss_kgload <<<"$r"
kgindex=$(stage_secs "$WORK/out-kgload" kgi)
rm -rf "$WORK/out-kgload"
echo "distillery ingest + KG index (one core): $kgload s (index stage $kgindex s), peak $rss_kgload MB"
# The stage over that index (tasks = cores), and over the KG's parts (a scan per hop, one task
# over 8 parts).
pipeline() { # name parallelism mode
  local kg="" stage="index = \"$WORK/kgroot\"" tasks=$2
  if [ "$3" = scan ]; then
    kg="[[inputs]]
name = \"kg\"
format = \"freebase\"
paths = [\"$WORK/kg/kg.nt\"]"
    stage="kg = \"kg\""
    tasks=1
  fi
  cat > "$WORK/$1.toml" <<TOML
version = 1
name = "$1"
output = "$WORK/out-$1"
[run]
parallelism = $2
shards = 8
$kg
[[inputs]]
name = "cwq"
format = "cwq"
paths = ["$WORK/kg/questions.json"]
[[stages]]
name = "sg"
kind = "subgraph"
inputs = ["cwq"]
tasks = $tasks
options = { $stage, hops = 3, segments = false }
TOML
  echo "$WORK/$1.toml"
}
for mode in index scan; do
  r=$(timed "$WORK/sg1-$mode" $ONE "$BIN" --quiet run "$(pipeline "sg1-$mode" 1 $mode)") || exit 1
  read -r job rss <<<"$r"
  declare "ours1_$mode=$(stage_secs "$WORK/out-sg1-$mode" sg)" "job1_$mode=$job" "rss1_$mode=$rss"
  declare "edges_$mode=$(counter "$WORK/out-sg1-$mode" sg edges)"
  r=$(timed "$WORK/sg2-$mode" $TWO "$BIN" --quiet run "$(pipeline "sg2-$mode" 2 $mode)") || exit 1
  read -r job rss <<<"$r"
  # The stage's seconds are summed over its tasks: with two tasks started together on two
  # cores, its wall time is its longest task's (the job's wall time, start-up and question
  # ingest included, is printed beside it).
  declare "ours2_$mode=$(longest_task "$WORK/out-sg2-$mode" sg)" "job2_$mode=$job"
  python3 scripts/bench/hydra_subgraph.py ours "$WORK/out-sg1-$mode" sg "$WORK/ours-$mode.json"
  python3 scripts/bench/hydra_subgraph.py ours "$WORK/out-sg2-$mode" sg "$WORK/ours2-$mode.json"
  rm -rf "$WORK/out-sg1-$mode" "$WORK/out-sg2-$mode"   # the store's bulk load needs the disk
done

if [ ! -f "$WORK/store.loaded" ]; then
  rm -rf "$WORK/store"
  r=$(timed "$WORK/load" $ONE python3 scripts/bench/hydra_subgraph.py load "$WORK/store" "$WORK/kg/kg.nt") || exit 1
read -r load rss_load <<<"$r"
  echo "pyoxigraph bulk load: $load s, peak $rss_load MB"
  touch "$WORK/store.loaded"
fi
# Both sides read warm files: the index was just built, the store is read once first.
find "$WORK/store" -type f -exec cat {} + > /dev/null
r=$(timed "$WORK/walk1" $ONE python3 scripts/bench/hydra_subgraph.py walk "$WORK/store" "$WORK/kg/questions.json" 3 "$WORK/hydra1.json" 1) || exit 1
read -r _ rss_w1 <<<"$r"
walk1=$(awk '/^walk/ {print $2}' "$WORK/walk1.log")
r=$(timed "$WORK/walk2" $TWO python3 scripts/bench/hydra_subgraph.py walk "$WORK/store" "$WORK/kg/questions.json" 3 "$WORK/hydra2.json" 2) || exit 1
read -r _ rss_w2 <<<"$r"
walk2=$(awk '/^walk/ {print $2}' "$WORK/walk2.log")
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
h1, h2 = (json.load(open(f"{w}/{n}.json")) for n in ("hydra1", "hydra2"))
assert h1 == h2, "the one- and two-thread walks differ"
for n in ("ours-index", "ours2-index", "ours-scan", "ours2-scan"):
    ours = json.load(open(f"{w}/{n}.json"))
    same = sum(ours.get(q) == d for q, d in h1.items())
    print(f"identical subgraphs, {n}: {same}/{len(h1)} questions")
PY
python3 -c "
print(f'{$edges_index} subgraph edges ({$edges_scan} by the scan)')
for mode, o1, o2, job, job2, rss in (('index', $ours1_index, $ours2_index, $job1_index, $job2_index, $rss1_index), ('scan', $ours1_scan, $ours2_scan, $job1_scan, $job2_scan, $rss1_scan)):
    print(f'{mode}: one core: subgraph stage {o1:.2f} s (job {job} s, peak {rss} MB), Hydra per-entity SPARQL on pyoxigraph {$walk1:.2f} s: {$walk1/o1:.1f}x')
    print(f'{mode}: two cores: subgraph stage {o2:.2f} s wall, longest task ({o1/o2:.2f}x its one-core time; job {job2} s), pyoxigraph 2 threads {$walk2:.2f} s: {$walk2/o2:.1f}x')"
fi

if [[ $SECTIONS == *3* ]]; then
echo "== 3. kg index build: $EDGES edges, one core"
kgpipe() { # name
  cat > "$WORK/$1.toml" <<TOML
version = 1
name = "$1"
output = "$WORK/out-$1"
[run]
parallelism = 1
shards = 8
[[inputs]]
name = "kg"
format = "freebase"
paths = ["$WORK/kg/kg.nt"]
[[stages]]
kind = "index"
options = { kinds = ["kg"], root = "$WORK/root-$1" }
TOML
  echo "$WORK/$1.toml"
}
row() { # label bin name
  rm -rf "$WORK/out-$3" "$WORK/root-$3"
  local r; r=$(timed "$WORK/$3" $ONE "$2" --quiet run "$(kgpipe "$3")") || exit 1
  read -r job rss <<<"$r"
  local secs; secs=$(stage_secs "$WORK/out-$3" index)
  local nodes; nodes=$(python3 -c "import json,glob; m=json.load(open(glob.glob('$WORK/root-$3/versions/*/manifest.json')[0])); print(m['kg']['nodes'], m['kg']['edges'])")
  echo "$1: index stage $secs s, job $job s, peak RSS $rss MB (nodes, edges: $nodes)"
  rm -rf "$WORK/out-$3" "$WORK/root-$3"
}
row "external-sort build" "$BIN" kgx
if [ -n "${BENCH_KG_BASELINE:-}" ]; then
  row "in-memory build ($BENCH_KG_BASELINE)" "$(realpath "$BENCH_KG_BASELINE")" kgm
fi
fi
