# Timed runs in rounds for the bench scripts (sourced; uses $WORK). Each of a section's
# commands runs once a round, in the same order every round, and scripts/bench/rounds.py takes
# medians and ratios from the TSV the rounds append to.
# Runs a command under /usr/bin/time: prints "wall seconds, peak RSS MB"; on failure prints
# the end of its log and fails (callers write `r=$(timed ...) || exit 1`).
timed() {
  local out=$1; shift
  if ! /usr/bin/time -f "%e %M" -o "$out.time" "$@" > "$out.log" 2>&1; then
    echo "failed: $*" >&2; tail -5 "$out.log" >&2; return 1
  fi
  python3 -c "e,m=open('$out.time').read().split()[-2:]; print(f'{float(e):.2f} {int(m)/1024:.0f}')"
}
# One run of a round: `run_round TSV ROUND NAME command...` times the command (logs under
# $WORK/NAME.*), appends "ROUND NAME seconds MB" to TSV and echoes it.
run_round() {
  local tsv=$1 round=$2 name=$3; shift 3
  local r; r=$(timed "$WORK/$name" "$@") || exit 1
  echo "$round $name $r" | tee -a "$tsv"
}
