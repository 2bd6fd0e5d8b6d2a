"""Medians and ratios of the rounds of scripts/bench-kg.sh and bench-ingest.sh.

The script runs each of a section's commands once per round, in the same order every round,
and appends one line per run to a TSV file: round, name, seconds, peak RSS (MB). On a shared
machine a slow minute then falls on every command alike; ratios are taken between medians,
with the range of the same ratio round by round beside them.

    python3 scripts/bench/rounds.py fb ROUNDS.tsv LINES KEPT
    python3 scripts/bench/rounds.py sg ROUNDS.tsv EDGES EDGES_SCAN
    python3 scripts/bench/rounds.py wiki ROUNDS.tsv BZ2_BYTES PAGES
"""

import statistics
import sys
from collections import defaultdict


def read(path):
    """name -> [(round, seconds)], name -> peak RSS over its rounds."""
    runs, rss = defaultdict(list), defaultdict(float)
    with open(path) as f:
        for line in f:
            rnd, name, secs, mb = line.split()
            runs[name].append((int(rnd), float(secs)))
            rss[name] = max(rss[name], float(mb))
    return runs, rss


class Rounds:
    def __init__(self, path):
        self.runs, self.rss = read(path)

    def times(self, name):
        return [s for _, s in sorted(self.runs[name])]

    def med(self, name):
        return statistics.median(self.times(name))

    def show(self, name):
        runs = ", ".join(f"{s:.2f}" for s in self.times(name))
        return f"{self.med(name):.2f} s (runs {runs})"

    def ratio(self, num, den):
        """`num`'s median over `den`'s, and the range of the same ratio round by round."""
        a, b = dict(self.runs[num]), dict(self.runs[den])
        each = [a[r] / b[r] for r in sorted(a) if r in b]
        return f"{self.med(num) / self.med(den):.2f}x ({min(each):.2f}-{max(each):.2f}x round by round)"


def fb(r, lines, kept):
    n = int(lines)
    print(f"{n} lines ({kept} triples kept), medians of {len(r.times('fb1'))} rounds")
    print(f"gzip -dc | wc -l: {r.show('floor')}, {n / r.med('floor') / 1e6:.2f} M lines/s")
    print(f"pyoxigraph strict parse (one core): {r.show('oxi')}, "
          f"{n / r.med('oxi') / 1e6:.2f} M/s, peak {r.rss['oxi']:.0f} MB")
    print(f"distillery freebase ingest, one core: {r.show('fb1')}, {n / r.med('fb1') / 1e6:.2f} M/s, "
          f"{r.ratio('oxi', 'fb1')} pyoxigraph, peak {r.rss['fb1']:.0f} MB")
    print(f"distillery freebase ingest, two cores: {r.show('fb2')}, {r.ratio('fb1', 'fb2')} one core, "
          f"peak {r.rss['fb2']:.0f} MB")


def sg(r, edges, edges_scan):
    print(f"{edges} subgraph edges ({edges_scan} by the scan), medians of {len(r.times('walk1'))} rounds")
    print(f"Hydra per-entity SPARQL on pyoxigraph: one thread {r.show('walk1')}, two threads {r.show('walk2')}")
    for mode in ("index", "scan"):
        one, two = f"sg1-{mode}", f"sg2-{mode}"
        if one not in r.runs:
            continue
        print(f"{mode}: one core: subgraph stage {r.show(one)}, job {r.med('job1-' + mode):.2f} s, "
              f"peak {r.rss[one]:.0f} MB: "
              f"{r.ratio('walk1', one)} faster than Hydra's walk")
        print(f"{mode}: two cores: subgraph stage, longest task, {r.show(two)}, "
              f"job {r.med('job2-' + mode):.2f} s "
              f"({r.ratio(one, two)} its one-core time): {r.ratio('walk2', two)} faster than Hydra's "
              f"two-thread walk")


def wiki(r, size, pages):
    print(f"{int(size) / 1e6:.1f} MB of bz2, {pages} pages, medians of {len(r.times('ingest'))} rounds")
    print(f"bzip2 -dc: {r.show('bzip2')}")
    print(f"distillery ingest + hseq, one core: {r.show('ingest')}, peak {r.rss['ingest']:.0f} MB: "
          f"{r.ratio('ingest', 'bzip2')} the time of bzip2 -dc")


if __name__ == "__main__":
    kind, path, a, b = sys.argv[1:5]
    {"fb": fb, "sg": sg, "wiki": wiki}[kind](Rounds(path), a, b)
