#!/usr/bin/env bash
# Wikidata JSON ingest against named baselines on the same machine, in the same run, one core
# (taskset -c 1). Reports medians and ratios; no thresholds.
#
#   scripts/bench-wikidata.sh [ENTITIES=20000]
#
# The input is a generated Wikidata-shaped dump (scripts/bench/wikidata_gen.py: the real
# layout, 60-180 label languages an entity, ~40 statements with qualifiers and references,
# sitelinks; about 50 KB an entity), plain JSON. Each round runs, in this order:
# - `orjson`: python3 reading the file line by line, `orjson.loads` of each entity line (the
#   `[`/`]` lines skipped, the trailing comma cut); parsing only, nothing written;
# - `new`: a pipeline with one `wikidata` input (languages BENCH_WD_LANGS, default
#   "en,de,fr"), run.parallelism = 1: parse, records, Parquet;
# - `before` (when DISTILLERY_BASELINE names a binary, e.g. one built before a change): the
#   same pipeline with that binary. Its Parquet parts must be byte-identical to `new`'s; the
#   script fails otherwise.
# BENCH_ROUNDS rounds (default 3); medians compared (single runs on a shared VM move by 10% or
# more). Wall seconds and peak RSS from /usr/bin/time.
#
# BENCH_DIR keeps the generated input between runs; DISTILLERY_BIN runs another binary instead
# of building a release one.
set -euo pipefail
cd "$(dirname "$0")/.."
ENTITIES=${1:-20000}
WORK=${BENCH_DIR:-$(mktemp -d)}
ROUNDS=${BENCH_ROUNDS:-3}
LANGS=${BENCH_WD_LANGS:-en,de,fr}
mkdir -p "$WORK"
python3 -c "import orjson" 2>/dev/null || python3 -m pip install --quiet orjson
if [ -n "${DISTILLERY_BIN:-}" ]; then
  BIN=$(realpath "$DISTILLERY_BIN")
else
  cargo build --release -p distillery-cli
  BIN=$PWD/target/release/distillery
fi
BASE=""
[ -n "${DISTILLERY_BASELINE:-}" ] && BASE=$(realpath "$DISTILLERY_BASELINE")
PIN="taskset -c 1"
command -v taskset >/dev/null || PIN=""

DUMP=$WORK/wd-$ENTITIES.json
if [ ! -f "$DUMP" ]; then
  echo "== generating $ENTITIES entities in $DUMP"
  python3 scripts/bench/wikidata_gen.py "$DUMP.tmp" "$ENTITIES"
  mv "$DUMP.tmp" "$DUMP"
fi
BYTES=$(stat -c %s "$DUMP")

cat > "$WORK/read_orjson.py" <<'PY'
import sys, orjson
n = 0
with open(sys.argv[1], 'rb') as f:
    for line in f:
        line = line.strip()
        if not line or line in (b'[', b']'):
            continue
        if line.endswith(b','):
            line = line[:-1]
        orjson.loads(line)
        n += 1
print(n)
PY
toml_langs=$(python3 -c "import sys; print(', '.join('\"%s\"' % l for l in sys.argv[1].split(',')))" "$LANGS")
pipeline() { # name
  cat > "$WORK/$1.toml" <<TOML
version = 1
name = "wd-$1"
output = "$WORK/out-$1"
[run]
parallelism = 1
[[inputs]]
name = "wd"
format = "wikidata"
paths = ["$DUMP"]
options = { languages = [$toml_langs] }
TOML
  echo "$WORK/$1.toml"
}
# Runs a command under /usr/bin/time: prints "wall seconds, peak RSS MB"; on failure prints
# the end of its log and fails.
timed() {
  local out=$1; shift
  if ! /usr/bin/time -f "%e %M" -o "$out.time" "$@" > "$out.log" 2>&1; then
    echo "failed: $*" >&2; tail -5 "$out.log" >&2; return 1
  fi
  python3 -c "e,m=open('$out.time').read().split()[-2:]; print(f'{float(e):.2f} {int(m)/1024:.0f}')"
}
run_round() { # round name command...
  local round=$1 name=$2; shift 2
  local r; r=$(timed "$WORK/$name" "$@") || exit 1
  echo "$round $name $r" | tee -a "$TSV"
}
# The Parquet parts of two outputs, byte for byte.
same_parts() {
  (cd "$WORK/out-$1" && find . -name '*.parquet' | sort) > "$WORK/parts-$1"
  (cd "$WORK/out-$2" && find . -name '*.parquet' | sort) > "$WORK/parts-$2"
  cmp -s "$WORK/parts-$1" "$WORK/parts-$2" || { echo "different part files: $1 vs $2" >&2; return 1; }
  while read -r p; do
    cmp -s "$WORK/out-$1/$p" "$WORK/out-$2/$p" || { echo "$p differs: $1 vs $2" >&2; return 1; }
  done < "$WORK/parts-$1"
  echo "identical Parquet parts, $1 vs $2: $(wc -l < "$WORK/parts-$1") files"
}

TSV=$WORK/rounds-wd.tsv
: > "$TSV"
echo "== wikidata JSON: $ENTITIES entities, $BYTES bytes, languages $LANGS, one core"
for round in $(seq "$ROUNDS"); do
  rm -rf "$WORK/out-new" "$WORK/out-before"
  run_round "$round" orjson $PIN python3 "$WORK/read_orjson.py" "$DUMP"
  run_round "$round" new $PIN "$BIN" --quiet run "$(pipeline new)"
  if [ -n "$BASE" ]; then
    run_round "$round" before $PIN "$BASE" --quiet run "$(pipeline before)"
    [ "$round" = 1 ] && { same_parts new before || exit 1; }
  fi
done
rows=$(python3 -c "import json; print(', '.join(f\"{t['name']} {t['rows']}\" for t in json.load(open('$WORK/out-new/_manifest.json'))['tables']))")
echo "rows: $rows"
python3 - "$TSV" "$ENTITIES" "$BYTES" <<'PY'
import statistics, sys
from collections import defaultdict
path, entities, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs, rss = defaultdict(dict), defaultdict(float)
for line in open(path):
    rnd, name, secs, mb = line.split()
    runs[name][int(rnd)] = float(secs)
    rss[name] = max(rss[name], float(mb))
med = {n: statistics.median(r.values()) for n, r in runs.items()}
print(f"medians of {len(runs['new'])} rounds")
for n in runs:
    each = ", ".join(f"{s:.2f}" for _, s in sorted(runs[n].items()))
    print(f"{n}: {med[n]:.2f} s (runs {each}), {size / med[n] / 1e6:.1f} MB/s, "
          f"{entities / med[n]:.0f} entities/s, peak {rss[n]:.0f} MB")
def ratio(a, b):
    each = [runs[a][r] / runs[b][r] for r in sorted(runs[a]) if r in runs[b]]
    return f"{med[a] / med[b]:.2f}x ({min(each):.2f}-{max(each):.2f}x round by round)"
print(f"orjson / new (>1: distillery faster): {ratio('orjson', 'new')}")
if 'before' in runs:
    print(f"before / new (>1: new faster): {ratio('before', 'new')}")
PY
