#!/usr/bin/env bash
# The nightly job from daily dumps against a full build of the same day, on the same machine in
# the same run, one core each (taskset -c 0). Reports ratios; no thresholds. Figures go to
# docs/benchmarks.md.
#
#   scripts/bench-nightly.sh [PAGES=2000] [NIGHTS=3]
#
# Generates (scripts/bench/nightly.py) a bz2 snapshot of PAGES pages and NIGHTS daily folders in
# Wikimedia's layout with their logging dumps: each night revises 1% of the pages (2-3
# revisions each), adds 0.1%, deletes 0.1% and moves 0.05%. The base snapshot goes into a
# corpus root and an index fed by it (pipelines like pipelines/nightly.toml: a `corpus` stage
# and an `index` stage with `corpus` and `incremental`); each night applies its day. The full build of a
# night is the same two stages over that day's snapshot into empty roots (an empty embedding
# cache). Prints whole-job CPU seconds (user + sys) and peak RSS of each, and per night
# `whole job: N.N% of a full build`.
#
# Indexes: BENCH_KINDS (default ["bm25", "kg"]); with DISTILLERY_EMBED_MODEL set, ["bm25",
# "dense", "kg"] (MiniLM on one core embeds about 20 passages a second: keep PAGES small). With
# "kg" the job also follows a Wikidata of PAGES items (`gen-wd`: daily folders of entity pages,
# 1% revised, 0.1% added, 0.1% deleted by log) kept in the same corpus root
# (`entity_documents`); BENCH_KG=0 leaves it out.
# DISTILLERY_BIN runs another binary instead of building a release one; BENCH_DIR keeps inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES=${1:-2000}
NIGHTS=${2:-3}
WORK=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$WORK"
[ -d ../shared/data ] || { echo "bench needs ../shared/data"; exit 1; }
if [ -n "${DISTILLERY_BIN:-}" ]; then
  BIN=$(realpath "$DISTILLERY_BIN")
else
  cargo build --release -p distillery-cli
  BIN=$PWD/target/release/distillery
fi
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""
KG=${BENCH_KG:-1}
KGK=""
[ "$KG" = 1 ] && KGK=', "kg"'
KINDS=${BENCH_KINDS:-"[\"bm25\"$KGK]"}
EMBED=""
if [ -n "${DISTILLERY_EMBED_MODEL:-}" ]; then
  KINDS=${BENCH_KINDS:-"[\"bm25\", \"dense\"$KGK]"}
  EMBED=", embedding = { model = \"$DISTILLERY_EMBED_MODEL\", batch = 32 }"
fi

# Runs a pipeline on one core under /usr/bin/time: prints "user+sys seconds, peak RSS MB".
timed() {
  local out=$1; shift
  RAYON_NUM_THREADS=1 $PIN /usr/bin/time -f "%U %S %M" -o "$out.time" "$BIN" --quiet run "$@" > /dev/null
  python3 -c "u,s,m=open('$out.time').read().split()[-3:]; print(f'{float(u)+float(s):.2f} {int(m)/1024:.0f}')"
}
counter() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); print([x for x in s['stages'] if x['stage']==sys.argv[2]][0]['counters'].get(sys.argv[3],0))" "$1" "$2" "$3"; }
records_in() { python3 -c "import json,sys; s=json.load(open(sys.argv[1]+'/_summary.json')); print([x for x in s['stages'] if x['stage']==sys.argv[2]][0]['records_in'])" "$1" "$2"; }
pipeline() { # name inputs corpus-root index-root incremental
  cat > "$WORK/$1.toml" <<TOML
version = 1
name = "$1"
output = "$WORK/out-$1"
$2
[[stages]]
kind = "corpus"
options = { root = "$3" }
[[stages]]
kind = "index"
options = { kinds = $KINDS, root = "$4", corpus = "$3", incremental = $5, shards = 4$EMBED }
TOML
  echo "$WORK/$1.toml"
}
wiki() { printf '[[inputs]]\nname = "wiki"\nformat = "mediawiki"\npaths = [%s]\noptions = { namespaces = [0], redirects = true }\n' "$1"; }
log() { printf '[[inputs]]\nname = "log"\nformat = "mediawiki-log"\npaths = ["%s/logs/enwiki-%s-pages-logging.xml"]\n' "$WORK" "$1"; }
# The Wikidata inputs, with "kg": a snapshot or a day's folder, and the day's log.
wd() { [ "$KG" = 1 ] && printf '[[inputs]]\nname = "wd"\nformat = "mediawiki"\npaths = [%s]\noptions = { namespaces = [0], wiki = "wikidatawiki", entity_documents = true }\n' "$1"; true; }
wdlog() { [ "$KG" = 1 ] && printf '[[inputs]]\nname = "wdlog"\nformat = "mediawiki-log"\npaths = ["%s/logs/wikidatawiki-%s-pages-logging.xml"]\n' "$WORK" "$1"; true; }

echo "== generating $PAGES pages and $NIGHTS nights in $WORK"
[ -f "$WORK/base.xml.bz2" ] || python3 scripts/bench/nightly.py gen "$WORK" "$PAGES" "$NIGHTS"
[ "$KG" != 1 ] || [ -f "$WORK/wd-base.xml.bz2" ] || python3 scripts/bench/nightly.py gen-wd "$WORK" "$PAGES" "$NIGHTS"
rm -rf "$WORK"/corpus "$WORK"/index "$WORK"/out-* "$WORK"/full-*
echo "== base: $(du -h "$WORK/base.xml.bz2" | cut -f1) of bz2, kinds $KINDS"
p=$(pipeline base "$(wiki "\"$WORK/base.xml.bz2\"")
$(wd "\"$WORK/wd-base.xml.bz2\"")" "$WORK/corpus" "$WORK/index" true)
read -r cb mb <<<"$(timed "$WORK/base" "$p")"
echo "   base: CPU $cb s, peak RSS $mb MB"
for k in $(seq 1 "$NIGHTS"); do
  date=$(printf '202612%02d' "$k")
  # The night: the day's folder and logging dump, as the CronJob passes them.
  p=$(pipeline "night$k" "$(wiki "\"$WORK/incr/enwiki/$date\"")
$(log "$date")
$(wd "\"$WORK/incr/wikidatawiki/$date\"")
$(wdlog "$date")" "$WORK/corpus" "$WORK/index" true)
  read -r cn mn <<<"$(timed "$WORK/night$k" "$p")"
  # The full build of the same day's snapshot into empty roots.
  p=$(pipeline "full$k" "$(wiki "\"$WORK/snapshot-$date.xml.bz2\"")
$(wd "\"$WORK/wd-snapshot-$date.xml.bz2\"")" "$WORK/full-corpus-$k" "$WORK/full-index-$k" false)
  read -r cf mf <<<"$(timed "$WORK/full$k" "$p")"
  echo "   night $k ($date): corpus +$(counter "$WORK/out-night$k" corpus pages.added) ~$(counter "$WORK/out-night$k" corpus pages.changed) >$(counter "$WORK/out-night$k" corpus pages.moved) -$(counter "$WORK/out-night$k" corpus pages.deleted) pages; index read $(records_in "$WORK/out-night$k" index) documents, $(counter "$WORK/out-night$k" index passages.added) passages added, $(counter "$WORK/out-night$k" index passages.changed) changed, $(counter "$WORK/out-night$k" index passages.deleted) deleted, $(counter "$WORK/out-night$k" index embeddings.computed) embedded"
  [ "$KG" = 1 ] && echo "   night $k: KG $(counter "$WORK/out-night$k" index kg.nodes) nodes, $(counter "$WORK/out-night$k" index kg.edges) edges"
  echo "   night $k: CPU $cn s, peak RSS $mn MB; full build: CPU $cf s, peak RSS $mf MB"
  python3 -c "print(f'   night $k: whole job: {100*$cn/$cf:.1f}% of a full build (peak RSS {100*$mn/$mf:.0f}%)')"
  rm -rf "$WORK/full-corpus-$k" "$WORK/full-index-$k"
done
# A night with nothing new: the last day again.
p=$(pipeline "again" "$(wiki "\"$WORK/incr/enwiki/$date\"")
$(log "$date")
$(wd "\"$WORK/incr/wikidatawiki/$date\"")
$(wdlog "$date")" "$WORK/corpus" "$WORK/index" true)
read -r ca ma <<<"$(timed "$WORK/again" "$p")"
python3 -c "print(f'   no change: CPU $ca s, peak RSS $ma MB: whole job: {100*$ca/$cf:.1f}% of the last full build')"
