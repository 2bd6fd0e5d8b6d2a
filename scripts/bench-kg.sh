#!/usr/bin/env bash
# KG benchmarks against named baselines on the same machine, in the same run. Reports ratios;
# no thresholds. Figures go to docs/benchmarks.md.
#
#   scripts/bench-kg.sh [EDGES=50000000] [QUESTIONS=1000]
#
# 1. Freebase parsing: the generated KG (below) gzipped, read by a pipeline with one
#    `freebase` input (parse, English filter, names, Parquet) on one core and on two, vs
#    `gzip -dc | wc -l` (the floor) and pyoxigraph's strict N-Triples parser reading the same
#    .gz (one core). Triples per second and peak RSS. Run on two mixes (BENCH_KG_MIXES picks):
#    `edges`, the KG of section 2 (89% entity edges), and `literals`, a KG of the same size
#    with a literal object on 59% of its lines (names in several languages, aliases, typed
#    values, long descriptions: `kg_gen.py ... literals`).
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
# Sections 1 and 2 run their commands in BENCH_ROUNDS rounds (default 3), each command once a
# round in the same order, and compare medians (scripts/bench/rounds.py): single runs on a
# shared VM move by 10% or more.
#
# BENCH_SG_MODES picks the modes of section 2 (default "index scan"; "index" skips the scans,
# which take most of a round at 50M edges; the index always runs). BENCH_DIR keeps the inputs
# between runs; DISTILLERY_BIN runs another binary instead of building a release one;
# BENCH_SECTIONS picks sections (default 12); BENCH_REUSE_INDEX=1 keeps a KG index built by an
# earlier run of section 2 in BENCH_DIR (same binary) instead of loading the KG again.
set -euo pipefail
cd "$(dirname "$0")/.."
EDGES=${1:-50000000}
QUESTIONS=${2:-1000}
NODES=${BENCH_NODES:-$((EDGES / 5))}
WORK=${BENCH_DIR:-$(mktemp -d)}
SECTIONS=${BENCH_SECTIONS:-12}
ROUNDS=${BENCH_ROUNDS:-3}
SG_MODES=${BENCH_SG_MODES:-index scan}
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
source scripts/bench/rounds.sh

if [ ! -f "$WORK/kg/kg.nt" ]; then
  echo "== generating $EDGES edges in $WORK/kg"
  python3 scripts/bench/kg_gen.py "$WORK/kg" "$EDGES" "$NODES" "$QUESTIONS"
fi

if [[ $SECTIONS == *1* ]]; then
# Each mix of BENCH_KG_MIXES (default both) is its own generated KG of EDGES lines:
# `edges` is the one of section 2, `literals` has a literal object on 59% of its lines.
for mix in ${BENCH_KG_MIXES:-edges literals}; do
kg="$WORK/kg"
if [ "$mix" != edges ]; then
  kg="$WORK/kg-$mix"
  [ -f "$kg/kg.nt" ] || { echo "== generating $EDGES lines ($mix) in $kg"; python3 scripts/bench/kg_gen.py "$kg" "$EDGES" "$NODES" 1 7 "$mix"; }
fi
echo "== 1. freebase parsing: $EDGES lines, gzip, mix $mix"
[ -f "$kg/kg.nt.gz" ] || gzip -1 -k "$kg/kg.nt"
cat > "$WORK/fb-floor.sh" <<SH
gzip -dc "$kg/kg.nt.gz" | wc -l
SH
cat > "$WORK/oxi.py" <<'PY'
import gzip, sys, pyoxigraph as ox
n = 0
with gzip.open(sys.argv[1], 'rb') as f:
    for _ in ox.parse(f, format=ox.RdfFormat.N_TRIPLES):
        n += 1
print(n)
PY
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
paths = ["$kg/kg.nt.gz"]
TOML
  echo "$WORK/$1.toml"
}
: > "$WORK/rounds-fb.tsv"
for round in $(seq "$ROUNDS"); do
  rm -rf "$WORK/out-fb1" "$WORK/out-fb2"
  run_round "$WORK/rounds-fb.tsv" "$round" floor $ONE bash "$WORK/fb-floor.sh"
  run_round "$WORK/rounds-fb.tsv" "$round" oxi $ONE python3 "$WORK/oxi.py" "$kg/kg.nt.gz"
  run_round "$WORK/rounds-fb.tsv" "$round" fb1 $ONE "$BIN" --quiet run "$(fbpipe fb1 1)"
  run_round "$WORK/rounds-fb.tsv" "$round" fb2 $TWO "$BIN" --quiet run "$(fbpipe fb2 2)"
done
kept=$(python3 -c "import json; print(sum(t['rows'] for t in json.load(open('$WORK/out-fb1/_manifest.json'))['tables'] if t['name'] in ('triples', 'literals')))")
python3 scripts/bench/rounds.py fb "$WORK/rounds-fb.tsv" "$EDGES" "$kept"
rm -rf "$WORK/out-fb1" "$WORK/out-fb2"
done
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
if [ -n "${BENCH_REUSE_INDEX:-}" ] && [ -d "$WORK/kgroot" ]; then
  echo "distillery ingest + KG index: reusing $WORK/kgroot (BENCH_REUSE_INDEX)"
else
  rm -rf "$WORK/out-kgload" "$WORK/kgroot"
  r=$(timed "$WORK/kgload" $ONE "$BIN" --quiet run "$WORK/kgload.toml") || exit 1
  read -r kgload rss_kgload <<<"$r"
  kgindex=$(stage_secs "$WORK/out-kgload" kgi)
  rm -rf "$WORK/out-kgload"
  echo "distillery ingest + KG index (one core): $kgload s (index stage $kgindex s), peak $rss_kgload MB"
fi
if [ ! -f "$WORK/store.loaded" ]; then
  rm -rf "$WORK/store"
  r=$(timed "$WORK/load" $ONE python3 scripts/bench/hydra_subgraph.py load "$WORK/store" "$WORK/kg/kg.nt") || exit 1
  read -r load rss_load <<<"$r"
  echo "pyoxigraph bulk load: $load s, peak $rss_load MB"
  touch "$WORK/store.loaded"
fi
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
# Both sides read warm files, and only the files they read: the index's `adjacency.bin` (not
# its GraphML export, larger than both) and the store, read once before their runs in each
# round. The scans run last in a round: they ingest the KG's text (6.6 GB at 50M edges),
# which pushes the other two out of a small machine's page cache.
warm() { find "$@" -type f -exec cat {} + > /dev/null; }
TSV=$WORK/rounds-sg.tsv
: > "$TSV"
ours() { # round mode cores
  local round=$1 mode=$2 cores=$3 name=sg$3-$2 pin=$ONE
  [ "$cores" = 2 ] && pin=$TWO
  rm -rf "$WORK/out-$name"
  local r; r=$(timed "$WORK/$name" $pin "$BIN" --quiet run "$(pipeline "$name" "$cores" "$mode")") || exit 1
  local job rss; read -r job rss <<<"$r"
  # The stage's seconds are summed over its tasks: with two tasks started together on two
  # cores, its wall time is its longest task's. The job's wall time (start-up and question
  # ingest included) is kept beside it.
  echo "$round $name $(longest_task "$WORK/out-$name" sg) $rss" | tee -a "$TSV"
  echo "$round job$cores-$mode $job $rss" >> "$TSV"
  python3 scripts/bench/hydra_subgraph.py ours "$WORK/out-$name" sg "$WORK/ours-$name.json"
  counter "$WORK/out-$name" sg edges > "$WORK/edges-$mode"
  rm -rf "$WORK/out-$name"
}
for round in $(seq "$ROUNDS"); do
  warm "$WORK"/kgroot/versions/*/kg/adjacency.bin
  ours "$round" index 1
  ours "$round" index 2
  warm "$WORK/store"
  for threads in 1 2; do
    pin=$ONE
    [ "$threads" = 2 ] && pin=$TWO
    r=$(timed "$WORK/walk$threads" $pin python3 scripts/bench/hydra_subgraph.py walk "$WORK/store" "$WORK/kg/questions.json" 3 "$WORK/hydra$threads.json" "$threads") || exit 1
    read -r _ rss <<<"$r"
    # The walk's own seconds, without Python's start and the store's opening.
    echo "$round walk$threads $(awk '/^walk/ {print $2}' "$WORK/walk$threads.log") $rss" | tee -a "$TSV"
  done
  if [[ $SG_MODES == *scan* ]]; then
    ours "$round" scan 1
    ours "$round" scan 2
  fi
  python3 - "$WORK" "$round" $SG_MODES <<'PY'
import json, sys
w, rnd, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
h1, h2 = (json.load(open(f"{w}/{n}.json")) for n in ("hydra1", "hydra2"))
assert h1 == h2, "the one- and two-thread walks differ"
for n in (f"sg{c}-{m}" for m in modes for c in (1, 2)):
    ours = json.load(open(f"{w}/ours-{n}.json"))
    same = sum(ours.get(q) == d for q, d in h1.items())
    print(f"round {rnd}: identical subgraphs, {n}: {same}/{len(h1)} questions")
PY
done
[[ $SG_MODES == *scan* ]] || echo - > "$WORK/edges-scan"
python3 scripts/bench/rounds.py sg "$TSV" "$(cat "$WORK/edges-index")" "$(cat "$WORK/edges-scan")"
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
