"""Hydra's access pattern for question subgraphs, on pyoxigraph, for scripts/bench-kg.sh.

usage: hydra_subgraph.py load STORE KG.nt
       hydra_subgraph.py walk STORE QUESTIONS.json HOPS DIGESTS.json [THREADS]
       hydra_subgraph.py ours OUT STAGE DIGESTS.json

`load` bulk-loads the N-Triples file into an on-disk pyoxigraph store (Hydra loads Freebase
into Virtuoso). `walk` explores each question's topic entities as Hydra's and ToG's code
does: level by level up to HOPS, one SPARQL query per frontier entity and direction
(`SELECT ?r ?o WHERE { ns:E ?r ?o }` and `SELECT ?s ?r WHERE { ?s ?r ns:E }`), relations
dropped as their `abandon_rels` drops them, `m.` entities kept; it prints the seconds of the
walk alone and writes a digest (edge count and a hash of the sorted edges) per question.
`ours` writes the same digests from a published output's `subgraphs` rows of STAGE, so the
two can be compared for identity.
"""

import hashlib
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

NS = "http://rdf.freebase.com/ns/"


def abandon_rels(relation):
    return (
        relation == "type.object.type"
        or relation == "type.object.name"
        or relation.startswith("common.")
        or relation.startswith("freebase.")
        or "sameAs" in relation
    )


def local(term):
    v = term.value
    return v[len(NS):] if v.startswith(NS) else None


def digest(edges):
    h = hashlib.sha1()
    for e in sorted(edges):
        h.update("\t".join(e).encode())
        h.update(b"\n")
    return [len(edges), h.hexdigest()]


def load(store_dir, nt):
    import pyoxigraph as ox

    t = time.perf_counter()
    store = ox.Store(store_dir)
    store.bulk_load(path=nt, format=ox.RdfFormat.N_TRIPLES)
    store.flush()
    print(f"load {time.perf_counter() - t:.2f}")


def walk(store_dir, questions, hops, out, threads):
    import pyoxigraph as ox

    store = ox.Store.read_only(store_dir)
    qs = json.loads(Path(questions).read_text(encoding="utf-8"))

    def neighbours(e):
        found = []
        for s in store.query(f"SELECT ?r ?o WHERE {{ <{NS}{e}> ?r ?o }}"):
            r, o = local(s["r"]), s["o"]
            if r is None or abandon_rels(r) or not isinstance(o, ox.NamedNode):
                continue
            o = local(o)
            if o is not None and o.startswith("m."):
                found.append(((e, r, o), o))
        for s in store.query(f"SELECT ?s ?r WHERE {{ ?s ?r <{NS}{e}> }}"):
            r, sub = local(s["r"]), local(s["s"])
            if r is None or sub is None or abandon_rels(r) or not sub.startswith("m."):
                continue
            found.append(((sub, r, e), sub))
        return found

    def one(q):
        topics = [t for t in q["topic_entity"] if t.startswith("m.")]
        edges, seen, frontier = set(), set(topics), list(dict.fromkeys(topics))
        for _ in range(hops):
            nxt = []
            for e in frontier:
                for edge, other in neighbours(e):
                    edges.add(edge)
                    if other not in seen:
                        seen.add(other)
                        nxt.append(other)
            frontier = nxt
        return str(q["ID"]), digest(edges)

    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        result = dict(pool.map(one, qs))
    print(f"walk {time.perf_counter() - t:.2f}")
    Path(out).write_text(json.dumps(result, sort_keys=True), encoding="utf-8")


def ours(out_dir, stage, digests):
    import pyarrow.parquet as pq

    out = Path(out_dir)
    ids = {
        r["id"]: r["question_id"]
        for r in pq.read_table(out / "questions", columns=["id", "question_id"]).to_pylist()
    }
    edges = defaultdict(set)
    for part in sorted((out / "subgraphs").glob(f"*@{stage}-*.parquet")):
        t = pq.read_table(part, columns=["question_id", "subject", "relation", "object"])
        for q, s, r, o in zip(*(t.column(c).to_pylist() for c in t.column_names)):
            edges[q].add((s, r, o))
    result = {ids[q]: digest(edges.get(q, set())) for q in ids}
    Path(digests).write_text(json.dumps(result, sort_keys=True), encoding="utf-8")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "load":
        load(sys.argv[2], sys.argv[3])
    elif cmd == "walk":
        walk(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6]) if len(sys.argv) > 6 else 1)
    elif cmd == "ours":
        ours(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown command {cmd}")
