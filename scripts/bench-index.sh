#!/usr/bin/env bash
# Index benchmarks against named baselines on the same machine, in the same run, one core
# each (taskset -c 0). Reports ratios; no thresholds. Figures go to docs/benchmarks.md.
#
#   scripts/bench-index.sh [PAGES=2700] [EMBED_PASSAGES=2000]   (2700 pages: about 100,000 passages)
#
# 1. BM25: the index stage (kinds = ["bm25"]) over the passages of PAGES generated wiki pages
#    vs bm25s tokenizing and indexing the same passages (its own timer, reading excluded);
#    recall@10 of the shared HotpotQA sample's supporting paragraphs, `distillery search` vs
#    bm25s on the same passages.
# 2. Embeddings: the index stage (kinds = ["dense"], MiniLM with candle, batch 32, empty
#    cache, RAYON_NUM_THREADS=1) vs sentence-transformers (CPU torch, batch 32, one thread) on
#    the same EMBED_PASSAGES passages.
#    Needs DISTILLERY_EMBED_MODEL; the baseline needs a python with sentence_transformers
#    (BENCH_ST_PYTHON, default python3). The model alone: the `embed_bench` example of
#    distillery-embed; on a GPU: scripts/bench-embed-gpu.sh.
#    (DISTILLERY_BIN runs another binary instead of building a release one; BENCH_SECTIONS=13
#    runs sections 1 and 3 only.)
# 3. Nightly: day 1 built, then day 2 (1% of the pages edited) built incrementally, vs a full
#    build of day 2 into an empty root: the index stage's seconds and the jobs' CPU seconds;
#    peak RSS of each.
# 4. Peak RSS of a full job on PAGES and on 4 x PAGES pages.
# 5. Nightly with BM25 and dense (MiniLM) on BENCH_DENSE_PAGES (60) pages, each build with an
#    empty embedding cache of its own: incremental vs full, index stage seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES=${1:-2700}
EMBED_PASSAGES=${2:-2000}
WORK=${BENCH_DIR:-$(mktemp -d)}
SECTIONS=${BENCH_SECTIONS:-12345}   # which of the sections below to run
DENSE_PAGES=${BENCH_DENSE_PAGES:-60}
mkdir -p "$WORK"
ST_PYTHON=${BENCH_ST_PYTHON:-python3}
[ -d ../shared/data ] || { echo "bench needs ../shared/data"; exit 1; }
if [ -n "${DISTILLERY_BIN:-}" ]; then
  BIN=$(realpath "$DISTILLERY_BIN")
else
  cargo build --release -p distillery-cli
  BIN=$PWD/target/release/distillery
fi
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""

# The index stage's seconds in a job's summary.
stage_secs() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); print([x for x in s['stages'] if x['stage']==sys.argv[2]][0]['seconds'])" "$1" "$2"; }
counter() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); print([x for x in s['stages'] if x['stage']==sys.argv[2]][0]['counters'].get(sys.argv[3],0))" "$1" "$2" "$3"; }
# Runs a pipeline on one core under /usr/bin/time: prints "user+sys seconds, peak RSS MB".
timed() {
  local out=$1; shift
  $PIN /usr/bin/time -f "%U %S %M" -o "$out.time" "$BIN" --quiet run "$@" > /dev/null
  python3 -c "u,s,m=open('$out.time').read().split()[-3:]; print(f'{float(u)+float(s):.2f} {int(m)/1024:.0f}')"
}
pipeline() { # name wiki root kinds incremental extra
  cat > "$WORK/$1.toml" <<TOML
version = 1
name = "$1"
output = "$WORK/out-$1"
[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["$2"]
[[stages]]
kind = "index"
options = { kinds = $4, root = "$3", incremental = $5, shards = 4, keep_versions = 2$6 }
TOML
  echo "$WORK/$1.toml"
}

echo "== generating inputs in $WORK"
[ -f "$WORK/day1.xml" ] || python3 scripts/bench/index.py days "$WORK/day1.xml" "$WORK/day2.xml" "$PAGES"

if [[ $SECTIONS == *1* ]]; then
echo "== 1. bm25: index stage vs bm25s (one core each)"
p=$(pipeline bm25 "$WORK/day1.xml" "$WORK/root-bm25" '["bm25"]' false "")
timed "$WORK/bm25" "$p" > /dev/null
ours=$(stage_secs "$WORK/out-bm25" index)
passages=$(counter "$WORK/out-bm25" index passages)
python3 - "$WORK/root-bm25" > "$WORK/passages.list" <<'PY'
import glob, sys
print("\n".join(sorted(glob.glob(sys.argv[1] + "/versions/*/passages/*.parquet"))))
PY
python3 -c "
import pyarrow as pa, pyarrow.parquet as pq, sys
pq.write_table(pa.concat_tables([pq.read_table(f) for f in open('$WORK/passages.list').read().split()]), '$WORK/passages.parquet')"
read -r theirs n <<<"$($PIN python3 scripts/bench/index.py bm25s "$WORK/passages.parquet")"
python3 -c "print(f'{$passages} passages: index stage (bm25, 4 shards) {$ours:.2f} s, bm25s {$theirs:.2f} s: ratio {$ours/$theirs:.2f}x')"
HOTPOT=../shared/data/hotpotqa/hotpot_dev_distractor_v1.head.json
cat > "$WORK/hotpot.toml" <<TOML
version = 1
name = "hotpot"
output = "$WORK/out-hotpot"
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["$PWD/$HOTPOT"]
split = "dev"
[[stages]]
kind = "index"
options = { root = "$WORK/root-hotpot" }
TOML
"$BIN" --quiet run "$WORK/hotpot.toml" > /dev/null
read -r r_ours r_theirs nq <<<"$(python3 scripts/bench/index.py recall "$BIN" "$WORK/root-hotpot" "$HOTPOT")"
python3 -c "print(f'recall@10 on {$nq} HotpotQA questions: distillery {$r_ours:.4f}, bm25s {$r_theirs:.4f} ({($r_ours-$r_theirs)*100:+.2f} points)')"
fi

if [[ $SECTIONS == *2* ]]; then
echo "== 2. embeddings: candle MiniLM in the index stage vs sentence-transformers (one core each, batch 32)"
if [ -z "${DISTILLERY_EMBED_MODEL:-}" ]; then
  echo "   skipped: DISTILLERY_EMBED_MODEL is not set"
else
  pages=$(( EMBED_PASSAGES * PAGES / ${passages:-$((PAGES * 38))} + 1 ))
  python3 - "$WORK/day1.xml" "$WORK/embed.xml" "$pages" <<'PY'
import re, sys
xml = open(sys.argv[1], encoding="utf-8").read()
head = xml[: xml.index("<page>")]
pages = re.findall(r"<page>.*?</page>", xml, flags=re.S)[: int(sys.argv[3])]
open(sys.argv[2], "w", encoding="utf-8").write(head + "\n".join(pages) + "\n</mediawiki>\n")
PY
  rm -rf "$WORK/root-dense" "$WORK/embed-cache"
  p=$(pipeline dense "$WORK/embed.xml" "$WORK/root-dense" '["dense"]' false ", embedding = { model = \"$DISTILLERY_EMBED_MODEL\", batch = 32, cache = \"$WORK/embed-cache\" }")
  # One core, one thread, as torch.set_num_threads(1) tells sentence-transformers.
  RAYON_NUM_THREADS=1 timed "$WORK/dense" "$p" > /dev/null
  ours=$(stage_secs "$WORK/out-dense" index)
  n=$(counter "$WORK/out-dense" index embeddings.computed)
  python3 -c "
import pyarrow as pa, pyarrow.parquet as pq, glob
import json
t = pa.concat_tables([pq.read_table(f) for f in sorted(glob.glob('$WORK/root-dense/versions/*/passages/*.parquet'))]).to_pydict()
json.dump([f'{a}\\n{b}' if a else b for a, b in zip(t['title'], t['text'])], open('$WORK/embed.json', 'w'))"
  # Figures depend on the processor (issue 57): name it, the matrix kernels candle picked on
  # it (`distillery --version`), and torch's CPU capability, beside the ratio.
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
  kernels=$("$BIN" --version | sed -n 's/^cpu matrix kernels: //p')
  echo "   cpu: ${cpu:-unknown}; distillery's matrix kernels: ${kernels:-unknown}"
  if "$ST_PYTHON" -c "import sentence_transformers" 2>/dev/null; then
    echo "   torch: $("$ST_PYTHON" -c 'import torch; print(torch.__version__, "cpu capability", torch.backends.cpu.get_cpu_capability())')"
    read -r theirs m <<<"$($PIN "$ST_PYTHON" scripts/bench/index.py st "$DISTILLERY_EMBED_MODEL" "$WORK/embed.json" 32)"
    python3 -c "print(f'{$n} passages: index stage {$ours:.2f} s ({$n/$ours:.1f}/s), sentence-transformers {$theirs:.2f} s ({$m/$theirs:.1f}/s): throughput ratio {$theirs/$ours:.2f}x')"
  else
    python3 -c "print(f'{$n} passages: index stage {$ours:.2f} s ({$n/$ours:.1f}/s); sentence-transformers not found ($ST_PYTHON)')"
  fi
fi
fi

if [[ $SECTIONS == *3* ]]; then
echo "== 3. nightly: day 2 (1% of pages edited) incremental vs full (one core)"
rm -rf "$WORK/root-nightly" "$WORK/root-full"
p1=$(pipeline day1 "$WORK/day1.xml" "$WORK/root-nightly" '["bm25"]' true "")
p2=$(pipeline day2 "$WORK/day2.xml" "$WORK/root-nightly" '["bm25"]' true "")
pf=$(pipeline full "$WORK/day2.xml" "$WORK/root-full" '["bm25"]' false "")
read -r c1 m1 <<<"$(timed "$WORK/day1" "$p1")"
read -r c2 m2 <<<"$(timed "$WORK/day2" "$p2")"
read -r cf mf <<<"$(timed "$WORK/full" "$pf")"
s2=$(stage_secs "$WORK/out-day2" index)
sf=$(stage_secs "$WORK/out-full" index)
for c in passages passages.changed passages.unchanged shards.rebuilt shards.reused; do
  echo "   day 2 $c: $(counter "$WORK/out-day2" index $c)"
done
python3 -c "print(f'index stage: incremental {$s2:.2f} s vs full {$sf:.2f} s ({100*$s2/$sf:.1f}%); whole job CPU: {$c2:.2f} s vs {$cf:.2f} s ({100*$c2/$cf:.1f}%); peak RSS {$m2} MB vs {$mf} MB')"
fi

if [[ $SECTIONS == *4* ]]; then
echo "== 4. peak RSS: the same build on PAGES and 4 x PAGES pages, shards grown past 20,000 passages"
[ -f "$WORK/big1.xml" ] || python3 scripts/bench/index.py days "$WORK/big1.xml" "$WORK/big2.xml" $((PAGES * 4))
for n in day1 big1; do
  rm -rf "$WORK/root-mem-$n"
  p=$(pipeline "mem-$n" "$WORK/$n.xml" "$WORK/root-mem-$n" '["bm25"]' false ", max_shard_passages = 20000")
  sed -i 's/shards = 4,/shards = 1,/' "$p"
  read -r c m <<<"$(timed "$WORK/mem-$n" "$p")"
  echo "   $n: $(counter "$WORK/out-mem-$n" index passages) passages in $(python3 -c "import json,glob; print(json.load(open(glob.glob('$WORK/root-mem-$n/versions/*/manifest.json')[0]))['shards'])") shards: peak RSS $m MB, CPU $c s"
done
fi

if [[ $SECTIONS == *5* ]] && [ -n "${DISTILLERY_EMBED_MODEL:-}" ]; then
echo "== 5. nightly with bm25 + dense on $DENSE_PAGES pages: incremental vs full (one core)"
[ -f "$WORK/dense1.xml" ] || python3 scripts/bench/index.py days "$WORK/dense1.xml" "$WORK/dense2.xml" "$DENSE_PAGES"
rm -rf "$WORK"/root-dn-* "$WORK"/cache-dn-*
emb() { echo ", embedding = { model = \"$DISTILLERY_EMBED_MODEL\", batch = 32, cache = \"$WORK/cache-dn-$1\" }"; }
p1=$(pipeline dn1 "$WORK/dense1.xml" "$WORK/root-dn-nightly" '["bm25", "dense"]' true "$(emb nightly)")
p2=$(pipeline dn2 "$WORK/dense2.xml" "$WORK/root-dn-nightly" '["bm25", "dense"]' true "$(emb nightly)")
pf=$(pipeline dnf "$WORK/dense2.xml" "$WORK/root-dn-full" '["bm25", "dense"]' false "$(emb full)")
timed "$WORK/dn1" "$p1" > /dev/null
timed "$WORK/dn2" "$p2" > /dev/null
timed "$WORK/dnf" "$pf" > /dev/null
s2=$(stage_secs "$WORK/out-dn2" index)
sf=$(stage_secs "$WORK/out-dnf" index)
echo "   day 2: $(counter "$WORK/out-dn2" index passages) passages, $(counter "$WORK/out-dn2" index passages.changed) changed, $(counter "$WORK/out-dn2" index embeddings.computed) embedded, $(counter "$WORK/out-dn2" index embeddings.reused) reused; full: $(counter "$WORK/out-dnf" index embeddings.computed) embedded"
python3 -c "print(f'index stage: incremental {$s2:.2f} s vs full {$sf:.2f} s ({100*$s2/$sf:.2f}%)')"
fi
