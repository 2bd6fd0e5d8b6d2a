"""Checks the `subgraph` stage against a breadth-first search written here with networkx.

usage: check_subgraph.py OUT TRIPLES.tsv QUESTIONS.json STAGE:HOPS[:CAP] ...

OUT is a published output; TRIPLES.tsv the FB15k-237 file the job read (`/m/x<TAB>/r<TAB>/m/y`);
QUESTIONS.json the CWQ-form question file it read (`ID`, `topic_entity` {mid: name}). For each
STAGE and each question this recomputes, independently of the Rust code, the subgraph Hydra's
exploration gives: every edge (relations filtered as Hydra filters Freebase) that touches a
node within HOPS - 1 hops of a topic entity, each edge's hop (1 + the smaller distance of its
ends from the nearest topic entity), and, with CAP, Hydra's reduction (the nodes within D hops
of every topic entity, D from HOPS down to 1, the first that fits, and the edges between them).
The node and edge sets (and hops) must be identical to the stage's `subgraphs` rows.
"""

import json
import sys
from collections import defaultdict
from pathlib import Path

import networkx as nx
import pyarrow.parquet as pq


def dotted(key):
    return key[1:].replace("/", ".") if key.startswith("/") else key


def dropped(relation):
    r = dotted(relation)
    return (
        r in ("type.object.type", "type.object.name")
        or r.startswith("common.")
        or r.startswith("freebase.")
        or "sameAs" in r
    )


def load_graph(path):
    g = nx.MultiGraph()
    edges = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        s, r, o = (p.strip() for p in parts)
        if dropped(r) or (s, r, o) in edges:
            continue
        edges.add((s, r, o))
        g.add_edge(s, o, key=(s, r, o))
    return g


def expected(g, topics, hops, cap):
    topics = [t for t in dict.fromkeys(topics) if t in g]
    dist = [nx.single_source_shortest_path_length(g, t, cutoff=hops) for t in topics]
    near = set()
    for d in dist:
        near.update(n for n, k in d.items() if k <= hops - 1)
    edges = {}
    for n in near:
        for _, _, key in g.edges(n, keys=True):
            s, _, o = key
            hop = 1 + min(min(d.get(s, hops + 1), d.get(o, hops + 1)) for d in dist)
            edges[key] = hop
    nodes = {e[0] for e in edges} | {e[2] for e in edges}
    if cap is not None and len(nodes) > cap:
        # Hydra's reduction, over the distances the walk knows (at most `hops`).
        far = {n: max(d.get(n, float("inf")) for d in dist) for n in nodes}
        depth = hops
        while True:
            kept = {n for n, m in far.items() if m <= depth}
            if len(kept) <= cap or depth <= 1:
                break
            depth -= 1
        edges = {e: h for e, h in edges.items() if e[0] in kept and e[2] in kept}
        nodes = {e[0] for e in edges} | {e[2] for e in edges}
    return nodes, edges


def main():
    out, triples, questions = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    g = load_graph(triples)
    topics_of = {
        str(q["ID"]): ["/" + m.replace(".", "/", 1) for m in q["topic_entity"]]
        for q in json.loads(Path(questions).read_text(encoding="utf-8"))
    }
    qtable = pq.read_table(out / "questions", columns=["id", "question_id"]).to_pylist()
    dataset_id = {r["id"]: r["question_id"] for r in qtable}
    failures = 0
    for spec in sys.argv[4:]:
        stage, hops, *cap = spec.split(":")
        hops, cap = int(hops), (int(cap[0]) if cap else None)
        # This stage's rows: its parts are tagged `<input>@<stage>-NNNN`.
        got = defaultdict(dict)
        for part in sorted((out / "subgraphs").glob(f"*@{stage}-*.parquet")):
            for r in pq.read_table(part).to_pylist():
                got[r["question_id"]][(r["subject"], r["relation"], r["object"])] = r["hop"]
        lines = [
            json.loads(l)
            for l in (out / stage / "questions.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        assert len(lines) == len(topics_of), (stage, len(lines))
        edges_total = same = 0
        for line in lines:
            qid = line["question_id"]
            want_nodes, want_edges = expected(g, topics_of[dataset_id[qid]], hops, cap)
            mine = got.get(qid, {})
            have_nodes = {e[0] for e in mine} | {e[2] for e in mine}
            edges_total += len(want_edges)
            if mine == want_edges and have_nodes == want_nodes and line["nodes"] == len(want_nodes):
                same += 1
            else:
                failures += 1
                if failures <= 5:
                    print(
                        f"MISMATCH {stage} {dataset_id[qid]}: edges {len(mine)} vs {len(want_edges)}, "
                        f"nodes {len(have_nodes)} vs {len(want_nodes)}; "
                        f"missing {sorted(set(want_edges) - set(mine))[:3]} "
                        f"extra {sorted(set(mine) - set(want_edges))[:3]}"
                    )
        print(f"{stage}: hops {hops} cap {cap}: {same}/{len(lines)} questions identical, {edges_total} edges")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
