#!/usr/bin/env bash
# Runs every pipeline in pipelines/ (or those named) with two `distillery` binaries and checks
# that their outputs are the same, file by file (issue 55: a refactor must leave the output of
# every pipeline byte-identical).
#
#   scripts/compare-outputs.sh BASE_BIN NEW_BIN [PIPELINE...]
#
#   scripts/compare-outputs.sh /work/baseline/distillery-debug target/debug/distillery
#   scripts/compare-outputs.sh B B          # self-check: must print `identical` everywhere
#   scripts/compare-outputs.sh B N pipelines/quickstart.toml labels   # a path or a name
#
# One line per pipeline (`identical`, `differs` with its first differing files and a short
# diff, `skipped: needs ...`, `FAILED` when a run exits non-zero) and the seconds each took.
# Exit status: 0 when nothing differs or failed (skipped pipelines do not count), 1 otherwise,
# 2 on a usage error.
#
# How each pipeline is run (from the repository root, so its relative input paths resolve):
# - Both runs write to the SAME absolute paths ($WORK/run/out/...), one after the other, and
#   each tree is moved away after its run ($WORK/<pipeline>/{base,new}). So absolute paths
#   written into the outputs (index manifests' `source`, ...) and anything derived from them
#   are the same on both sides and need no normalising. The output and every root the file
#   puts under `out/` (nightly's corpus and index roots) are overridden with `--set`.
# - Pipelines with an `[llm]` section call $DISTILLERY_VLLM_URL (model $DISTILLERY_VLLM_MODEL,
#   default `tiny`: scripts/vllm-cpu/serve.sh), and all their runs share ONE response cache
#   (`--set llm.cache=...`). BASE_BIN first runs the pipeline once more as a warm-up that fills
#   the cache (its output is thrown away), so both compared runs are answered from the cache:
#   the same answers on both sides, and the same cache-hit counters in _summary.json. A request
#   NEW_BIN makes that BASE_BIN did not (a changed prompt) still reaches the server, and its
#   answer shows up as a difference. Without DISTILLERY_VLLM_URL, or when it does not answer
#   GET /models, these pipelines are skipped. (With the CI's CPU vLLM, whose `tiny` model
#   answers noise, most teacher samples are dropped by the stages' own checks: the
#   comparison then covers the runs' trajectories, quarantine, counters and tables, but few
#   or no SFT samples of cirag-distill and compound.)
# - Embedding models named in the file (`embedding_model`, `embedding.model`) are replaced by
#   $DISTILLERY_EMBED_MODEL (a sentence-transformers directory); unset: the pipeline is skipped.
# - Inputs and option files given as local paths (../shared/data/..., data/...) must exist, else
#   the pipeline is skipped naming them.
#
# What is normalised before comparing (everything else must be byte-identical). Found by
# running one binary twice (`B B`, which must say `identical` for every pipeline); each item
# is something that differs between two runs of the same binary on the same inputs:
# - Random ids in file and folder names: index and corpus version folders
#   (`20261207T004011Z-14554ea5`, `n000000-20261207T004137Z-2b942913`: creation time and a
#   random suffix) become <version-K> (K: rank by name within their parent folder), and
#   tantivy segment files (`<32-hex uuid>.idx`, `.store`, ...) become <segment-K>.idx (K: rank
#   by a hash of the segment's files' bytes, so equal segments get equal names). The same ids
#   inside text files (CURRENT, index and corpus manifests, indexes/index.json, tantivy's
#   meta.json and .managed.json; a segment uuid also in its dashed form) are replaced the same
#   way. The segment files themselves are compared as bytes.
# - In text files: run and job ids (`20261207T004010-db8fdc9f`: start time, random suffix)
#   become <run-id>.
# - In .json and .jsonl files, at any depth: the values of the keys run_id, job_id,
#   started_at, finished_at, seconds, created, created_at, host, hostname, pid, of any key
#   starting with `phase_us.` (the label stage's per-phase microseconds among its counters)
#   and of any key ending with _us, _ms, _secs or _seconds (started_ms, ...) become
#   "<volatile>": wall-clock times, durations, the machine and the process (_summary.json,
#   _manifest.json, index manifests). Counters, record counts, bytes, hashes are compared.
# - tantivy's .managed.json (the list of the files it manages, a set written in hash order)
#   is compared sorted.
# - Nothing else. Absolute paths need nothing: both runs use the same ones (above). Binary
#   files (tantivy segments, usearch, adjacency.bin) are compared as bytes. Parquet files are
#   compared as bytes too: two runs of one binary write byte-identical Parquet, so there is no
#   legitimate variation to forgive; when the bytes differ, pyarrow reads both to say how
#   (schema, schema metadata, the first differing column and row, or "same rows and schema,
#   different bytes": an encoding change, which is reported as a difference all the same).
#
# Environment:
#   COMPARE_WORK          work folder (default: a new /tmp/compare-outputs.XXXXXX, removed at
#                         the end unless something differs or COMPARE_KEEP=1)
#   COMPARE_KEEP=1        keep both output trees of identical pipelines too
#   COMPARE_LLM_CACHE     the shared LLM response cache (default $WORK/llm-cache); point it
#                         at a kept cache to make a rerun's warm-up answer from it
#   COMPARE_LLM_WARMUP=0  no warm-up run (the compared base run then fills the cache, and
#                         _summary.json's call and cache-hit counters will differ)
#   COMPARE_LLM_SAMPLE=N  bound each teacher stage to N units of work (triples
#                         max_passages, cirag/ras/relevance/planner max_questions, compound
#                         max_entities; a smaller value in the file is kept): for a slow
#                         server such as the CPU vLLM. Unset: the pipelines as written.
#   COMPARE_SET           extra `key=value` overrides for both runs of every pipeline, one a
#                         line; COMPARE_SET_<name> (non-alphanumerics of the name as `_`, e.g.
#                         COMPARE_SET_cirag_distill) for one pipeline only
#   COMPARE_NEW_SET       extra overrides for NEW_BIN's run only: the self-test of the
#                         comparison, e.g. `COMPARE_NEW_SET=run.shards=3 ... B B quickstart`
#                         must say `differs`
#   COMPARE_MAX_FILES     differing files shown per pipeline (default 5)
#   DISTILLERY_VLLM_URL, DISTILLERY_VLLM_MODEL, DISTILLERY_EMBED_MODEL: as above.
# Needs python3 >= 3.11 (tomllib; scripts/compare_outputs.py does the planning and the
# comparison); pyarrow only to explain a Parquet difference.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
bin() { case $1 in */*) abs "$1" ;; *) command -v "$1" || echo "$1" ;; esac; }
BASE_BIN=$(bin "$1")
NEW_BIN=$(bin "$2")
[ -z "${COMPARE_WORK:-}" ] || COMPARE_WORK=$(abs "$COMPARE_WORK")
[ -z "${COMPARE_LLM_CACHE:-}" ] || COMPARE_LLM_CACHE=$(abs "$COMPARE_LLM_CACHE")
shift 2
for b in "$BASE_BIN" "$NEW_BIN"; do
  [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
HELPER="$REPO/scripts/compare_outputs.py"

# Pipelines: files (relative to the working directory) or names of pipelines/*.toml.
PIPELINES=()
if [ $# -eq 0 ]; then
  PIPELINES=("$REPO"/pipelines/*.toml)
else
  for p in "$@"; do
    if [ -f "$p" ]; then PIPELINES+=("$(abs "$p")")
    elif [ -f "$REPO/pipelines/$p.toml" ]; then PIPELINES+=("$REPO/pipelines/$p.toml")
    elif [ -f "$REPO/pipelines/$p" ]; then PIPELINES+=("$REPO/pipelines/$p")
    else echo "no pipeline $p" >&2; exit 2
    fi
  done
fi
# Runs start in the repository root: the pipelines' relative paths (data/..., ../shared/...)
# are from there.
cd "$REPO" || exit 2

WORK=${COMPARE_WORK:-$(mktemp -d /tmp/compare-outputs.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
RUN="$WORK/run"
CACHE=${COMPARE_LLM_CACHE:-$WORK/llm-cache}
MAX_FILES=${COMPARE_MAX_FILES:-5}
echo "base: $BASE_BIN"
echo "new:  $NEW_BIN"
echo "work: $WORK"

# run BIN LOG SETS... : one run of $PIPELINE into $RUN/out; the exit status of distillery.
run_one() {
  local bin=$1 log=$2
  shift 2
  local args=()
  for s in "$@"; do args+=(--set "$s"); done
  rm -rf "$RUN"
  mkdir -p "$RUN"
  "$bin" run "$PIPELINE" "${args[@]}" > "$log" 2>&1
}

lines() { [ -n "${1:-}" ] && printf '%s\n' "$1"; }

differs=0
summary=()
for PIPELINE in "${PIPELINES[@]}"; do
  name=$(basename "$PIPELINE" .toml)
  start=$SECONDS
  plan=$(python3 "$HELPER" plan "$PIPELINE" "$RUN") \
    || plan="skip the pipeline file could not be read (the error is above)"
  if grep -q '^skip ' <<<"$plan"; then
    line="skipped: $(sed -n 's/^skip //p' <<<"$plan")"
    printf '%-16s %s\n' "$name" "$line"
    summary+=("$(printf '%-16s %-10s %4ds' "$name" skipped 0)")
    continue
  fi
  sets=()
  while IFS= read -r s; do sets+=("$s"); done < <(sed -n 's/^set //p' <<<"$plan")
  llm=0
  if grep -qx llm <<<"$plan"; then
    if [ -z "${server_ok:-}" ]; then
      # One look at the server before the first teacher pipeline: GET /models.
      server_ok=no
      python3 -c 'import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/models", timeout=10).read()' \
        "$DISTILLERY_VLLM_URL" 2> /dev/null && server_ok=yes
    fi
    if [ "$server_ok" != yes ]; then
      printf '%-16s skipped: needs a teacher LLM server: DISTILLERY_VLLM_URL=%s %s\n' \
        "$name" "$DISTILLERY_VLLM_URL" "does not answer GET /models"
      summary+=("$(printf '%-16s %-10s %4ds' "$name" skipped 0)")
      continue
    fi
    llm=1
    mkdir -p "$CACHE"
    sets+=("llm.cache=$CACHE")
  fi
  while IFS= read -r s; do [ -n "$s" ] && sets+=("$s"); done < <(lines "${COMPARE_SET:-}")
  var="COMPARE_SET_$(tr -c 'A-Za-z0-9\n' _ <<<"$name")"
  while IFS= read -r s; do [ -n "$s" ] && sets+=("$s"); done < <(lines "${!var:-}")
  new_sets=("${sets[@]}")
  while IFS= read -r s; do [ -n "$s" ] && new_sets+=("$s"); done < <(lines "${COMPARE_NEW_SET:-}")

  dir="$WORK/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  failed=""
  if [ $llm = 1 ] && [ "${COMPARE_LLM_WARMUP:-1}" != 0 ]; then
    t=$SECONDS
    run_one "$BASE_BIN" "$dir/warmup.log" "${sets[@]}" \
      || failed="the warm-up run (base) exited non-zero: $dir/warmup.log"
    warm=$((SECONDS - t))
  fi
  t=$SECONDS
  if [ -z "$failed" ]; then
    run_one "$BASE_BIN" "$dir/base.log" "${sets[@]}"
    rc_base=$?
    mv "$RUN/out" "$dir/base" 2> /dev/null || mkdir -p "$dir/base"
    t_base=$((SECONDS - t))
    t=$SECONDS
    run_one "$NEW_BIN" "$dir/new.log" "${new_sets[@]}"
    rc_new=$?
    mv "$RUN/out" "$dir/new" 2> /dev/null || mkdir -p "$dir/new"
    t_new=$((SECONDS - t))
    if [ $rc_base != 0 ] || [ $rc_new != 0 ]; then
      failed="exit status base $rc_base, new $rc_new (logs: $dir/base.log, $dir/new.log)"
    fi
  fi
  timing="base ${t_base:-?}s, new ${t_new:-?}s${warm:+, warm-up ${warm}s}"
  if [ -z "$failed" ]; then
    out=$(python3 "$HELPER" compare "$dir/base" "$dir/new" --max-files "$MAX_FILES")
    if [ $? = 0 ]; then
      result=identical
      printf '%-16s %s  [%s]\n' "$name" "$out" "$timing"
      [ "${COMPARE_KEEP:-0}" = 1 ] || rm -rf "$dir/base" "$dir/new"
    else
      result=differs
      printf '%-16s %s  [%s]\n' "$name" "$(head -1 <<<"$out")" "$timing"
      tail -n +2 <<<"$out"
    fi
  else
    # A run that exits non-zero (on either side, or both) is a failure, not a comparison.
    result=FAILED
    printf '%-16s FAILED: %s  [%s]\n' "$name" "$failed" "$timing"
    for log in "$dir"/*.log; do
      echo "    $log:"
      tail -4 "$log" | cut -c1-300 | sed 's/^/      /'
    done
  fi
  [ $result = identical ] || differs=1
  summary+=("$(printf '%-16s %-10s %4ds' "$name" "$result" $((SECONDS - start)))")
  unset t_base t_new warm rc_base rc_new
done
rm -rf "$RUN"

echo
echo "summary (pipeline, result, seconds including the warm-up):"
printf '  %s\n' "${summary[@]}"
if [ $differs = 0 ] && [ "${COMPARE_KEEP:-0}" != 1 ] && [ -z "${COMPARE_WORK:-}" ]; then
  rm -rf "$WORK"
fi
exit $differs
