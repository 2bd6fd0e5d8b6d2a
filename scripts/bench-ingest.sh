#!/usr/bin/env bash
# Ingest benchmarks against named baselines on the same machine, in the same run, one core
# each (taskset -c 0). Reports ratios; no thresholds.
#
#   scripts/bench-ingest.sh [WIKI_MB=200] [NT_LINES=2000000] [BIG_MB=1100]
#
# 1. MediaWiki ingest + HSEQ of the shared wiki sample repeated to WIKI_MB (bz2) vs
#    `bzip2 -dc FILE > /dev/null`, in BENCH_ROUNDS rounds (default 3; medians and the ratio
#    round by round, scripts/bench/rounds.py).
# 2. N-Triples parse + English filter + Parquet write of NT_LINES lines (gz) vs
#    `gzip -dc FILE | wc -l`; also triples per second.
# 3. Peak RSS of ingest + HSEQ of a synthetic plain-XML dump of BIG_MB (>= 1 GB).
# 4. A multistream dump of WIKI_MB with its index: ingest + HSEQ as byte-range tasks
#    (run.split_bytes = size / 8) on 2 worker processes pinned to a core each, vs the same dump
#    in one task on 1 worker, parallel stream decoding off in both; the outputs compared.
# 5. (run before 4) The single-stream bz2 dump of 1. on two cores (taskset -c 0,1) vs one:
#    bz2 decoding on a thread of its own, parsing and HSEQ on the other core.
# 6. (run before 4) The single-stream bz2 dump of 1. as block-range tasks (run.split_bytes =
#    size / 8, cut at bz2 blocks) on 2 worker processes pinned to a core each, vs one task on
#    1 worker, as in 4.; the outputs compared.
# 7. The bz2 decoder alone on the dump of 1., by backend: the pure-Rust libbz2-rs-sys that
#    Distillery links and the C libbz2, vs `bzip2 -dc` (scripts/bench/bz2_backends.sh, one
#    core, 5 rounds, medians).
#
# BENCH_DIR keeps the generated inputs between runs; BENCH_SECTIONS (say "1 5") runs only
# those sections; DISTILLERY_BIN uses a binary already built.
set -euo pipefail
cd "$(dirname "$0")/.."
WIKI_MB=${1:-200}
NT_LINES=${2:-2000000}
BIG_MB=${3:-1100}
WORK=${BENCH_DIR:-$(mktemp -d)}
SECTIONS=${BENCH_SECTIONS:-1 2 3 4 5 6 7}
ROUNDS=${BENCH_ROUNDS:-3}
mkdir -p "$WORK"
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
[ -d ../shared/data ] || { echo "bench needs ../shared/data"; exit 1; }
if [ -z "${DISTILLERY_BIN:-}" ]; then
  cargo build --release -p distillery-cli
  BIN=$PWD/target/release/distillery
else
  BIN=$DISTILLERY_BIN
fi
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""

source scripts/bench/rounds.sh
secs() { /usr/bin/env python3 -c 'import sys,time,subprocess; t=time.time(); r=subprocess.run(sys.argv[1], shell=True); print(f"{time.time()-t:.3f}") if r.returncode==0 else sys.exit(r.returncode)' "$1"; }

echo "== generating inputs in $WORK"
[ -f "$WORK/wiki.xml.bz2" ] || python3 scripts/gen_bench_data.py wiki "$WORK/wiki.xml.bz2" "$WIKI_MB"
if want 2; then
  [ -f "$WORK/fb.nt.gz" ] || python3 scripts/gen_bench_data.py nt "$WORK/fb.nt.gz" "$NT_LINES"
fi

if want 1; then
echo "== 1. mediawiki ingest + hseq vs bzip2 -dc (one core each), $ROUNDS rounds"
: > "$WORK/rounds-wiki.tsv"
for round in $(seq "$ROUNDS"); do
  rm -rf "$WORK/out-wiki"
  run_round "$WORK/rounds-wiki.tsv" "$round" bzip2 $PIN sh -c "bzip2 -dc '$WORK/wiki.xml.bz2' > /dev/null"
  run_round "$WORK/rounds-wiki.tsv" "$round" ingest $PIN "$BIN" --quiet ingest mediawiki "$WORK/wiki.xml.bz2" \
    --out "$WORK/out-wiki" --hseq --shards 4 --option parallel_streams=false
done
pages=$($BIN --quiet inspect "$WORK/out-wiki" --sql "SELECT count(*) AS n FROM documents" --format csv | tail -1)
python3 scripts/bench/rounds.py wiki "$WORK/rounds-wiki.tsv" "$(stat -c %s "$WORK/wiki.xml.bz2")" "$pages"

fi

if want 2; then
echo "== 2. freebase N-Triples parse+filter+parquet vs gzip -dc | wc -l (one core each)"
base=$(secs "$PIN sh -c 'gzip -dc $WORK/fb.nt.gz | wc -l > /dev/null'")
ours=$(secs "$PIN $BIN --quiet ingest freebase $WORK/fb.nt.gz --out $WORK/out-fb --shards 4 > /dev/null")
triples=$(python3 -c "import json; print(sum(t['rows'] for t in json.load(open('$WORK/out-fb/_manifest.json'))['tables'] if t['name'] in ('triples', 'literals')))")
python3 -c "print(f'gzip -dc|wc -l: {$base:.2f} s   distillery: {$ours:.2f} s   ratio {$ours/$base:.2f}x   {$triples} triples, {$triples/$ours:,.0f} triples/s')"

fi

if want 3; then
echo "== 3. peak RSS on a synthetic dump of ${BIG_MB} MB"
[ -f "$WORK/big.xml" ] || python3 scripts/gen_bench_data.py wiki "$WORK/big.xml" "$BIG_MB"
ls -l "$WORK/big.xml"
/usr/bin/time -v $BIN --quiet ingest mediawiki "$WORK/big.xml" --out "$WORK/out-big" --hseq --shards 4 2> "$WORK/time.txt" > /dev/null
grep -E "Maximum resident set size|Elapsed" "$WORK/time.txt"

fi

if want 5; then
echo "== 5. a single-stream bz2 dump: ingest + hseq on two cores vs one"
[ -n "$PIN" ] && [ "$(nproc)" -ge 2 ] || { echo "   skipped: needs taskset and 2 cores"; SECTIONS=${SECTIONS//5/}; }
fi
if want 5; then
base=$(secs "taskset -c 0 bzip2 -dc $WORK/wiki.xml.bz2 > /dev/null")
one=$(secs "taskset -c 0 $BIN --quiet ingest mediawiki $WORK/wiki.xml.bz2 --out $WORK/out-1core --hseq --shards 4 > /dev/null")
two=$(secs "taskset -c 0,1 $BIN --quiet ingest mediawiki $WORK/wiki.xml.bz2 --out $WORK/out-2core --hseq --shards 4 > /dev/null")
python3 -c "print(f'bzip2 -dc on one core: {$base:.2f} s   one core: {$one:.2f} s ({$one/$base:.2f}x bzip2)   two cores: {$two:.2f} s ({$two/$base:.2f}x bzip2)   speedup {$one/$two:.2f}x')"
for t in documents segments; do
  q="SELECT * FROM $t ORDER BY id"
  cmp -s <("$BIN" --quiet inspect "$WORK/out-1core" --sql "$q" --format csv) \
         <("$BIN" --quiet inspect "$WORK/out-2core" --sql "$q" --format csv) \
    && echo "   table $t identical" || echo "   table $t DIFFERENT"
done
fi

# Byte-range tasks on 2 workers pinned to a core each vs one task on 1 worker, ingest + hseq,
# parallel stream decoding off in both, the outputs compared: ranged_vs_whole NAME DUMP.
ranged_vs_whole() {
local name=$1 dump=$2
command -v taskset >/dev/null || { echo "   skipped: needs taskset"; return; }
[ "$(nproc)" -ge 2 ] || { echo "   skipped: needs 2 cores"; return; }
source scripts/bench/cluster.sh
local size; size=$(stat -c %s "$dump")
cat > "$WORK/$name.toml" <<TOML
version = 1
name = "bench-$name"
output = "unused"
[run]
shards = 4
[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["$dump"]
options = { parallel_streams = false }
[[stages]]
kind = "hseq"
TOML
local whole ranged
whole=$(run_job "$name-whole" 1 "$WORK/$name.toml" "$WORK/out-$name-whole" run.split_bytes=0)
ranged=$(run_job "$name-ranges" 2 "$WORK/$name.toml" "$WORK/out-$name-ranges" "run.split_bytes=$((size / 8))")
ingest_secs() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); t=[x for st in s['stages'] if st['stage']=='ingest/wiki' for x in st['tasks']]; w={}
for x in t: w[x['worker']]=w.get(x['worker'],0)+x['seconds']
print(f\"{max(w.values()):.2f} {len(t)}\")" "$1"; }
local w1 n1 w2 n2
read -r w1 n1 <<<"$(ingest_secs "$WORK/out-$name-whole")"
read -r w2 n2 <<<"$(ingest_secs "$WORK/out-$name-ranges")"
python3 -c "print(f'job: one task {$whole:.2f} s, {$n2} ranges on 2 workers {$ranged:.2f} s ({$whole/$ranged:.2f}x); ingest stage: {$w1:.2f} s vs {$w2:.2f} s on the busiest worker ({$w1/$w2:.2f}x)')"
for t in documents tables segments; do
  q="SELECT * FROM $t ORDER BY id"
  cmp -s <("$BIN" --quiet inspect "$WORK/out-$name-whole" --sql "$q" --format csv) \
         <("$BIN" --quiet inspect "$WORK/out-$name-ranges" --sql "$q" --format csv) \
    && echo "   table $t identical" || echo "   table $t DIFFERENT"
done
}

if want 6; then
echo "== 6. the single-stream dump of 1.: block-range tasks on 2 workers vs one task on 1 worker (one core each)"
ranged_vs_whole ss "$WORK/wiki.xml.bz2"
fi

if want 7; then
echo "== 7. the bz2 decoder alone, by backend, vs bzip2 -dc (one core each)"
bash scripts/bench/bz2_backends.sh "$WORK/wiki.xml.bz2" 5
fi

want 4 || exit 0
echo "== 4. a multistream dump with its index: byte-range tasks on 2 workers vs one task on 1 worker (one core each)"
[ -f "$WORK/ms-multistream.xml.bz2" ] || python3 scripts/gen_bench_data.py multistream "$WORK/ms-multistream.xml.bz2" "$WIKI_MB"
ranged_vs_whole ms "$WORK/ms-multistream.xml.bz2"
