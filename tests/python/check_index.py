"""Opens every file of an index version with the libraries' own Python packages.

    python3 tests/python/check_index.py ROOT/versions/VERSION

BM25 shards with `tantivy.Index.open` (same version as the Rust crate), HNSW files with
`usearch.index.Index.restore`, the KG's GraphML with `networkx.read_graphml`; counts are
checked against the version's manifest.
"""
import json
import os
import sys

import networkx
import pyarrow.parquet as pq
import tantivy
from usearch.index import Index

version = sys.argv[1]
m = json.load(open(os.path.join(version, "manifest.json")))
print("version", m["version"], "kinds", m["kinds"], "passages", m["passages"])
total_bm25 = total_dense = 0
for s in range(m["shards"]):
    shard = f"shard-{s:04d}"
    if "bm25" in m["kinds"]:
        idx = tantivy.Index.open(os.path.join(version, "bm25", shard))
        idx.reload()
        searcher = idx.searcher()
        total_bm25 += searcher.num_docs
        q = idx.parse_query("lake", ["title", "text"])
        hits = searcher.search(q, 3).hits
        if hits:
            doc = searcher.doc(hits[0][1])
            assert doc["id"] and doc["text"], doc
    if "dense" in m["kinds"]:
        ann = Index.restore(os.path.join(version, "ann", shard + ".usearch"))
        table = pq.read_table(os.path.join(version, "embeddings", shard + ".parquet"))
        assert len(ann) == table.num_rows, (len(ann), table.num_rows)
        assert ann.ndim == m["model"]["dimension"], ann.ndim
        if table.num_rows:
            v = table.column("vector")[0].values.to_numpy()
            key = table.column("key")[0].as_py()
            found = ann.search(v, 1)
            assert int(found.keys[0]) == key, (found.keys, key)
        total_dense += len(ann)
if "bm25" in m["kinds"]:
    assert total_bm25 == m["passages"], (total_bm25, m["passages"])
if "dense" in m["kinds"]:
    assert total_dense == m["passages"], (total_dense, m["passages"])
if "kg" in m["kinds"]:
    g = networkx.read_graphml(os.path.join(version, "kg", "graph.graphml"))
    assert g.number_of_edges() == m["kg"]["edges"], (g.number_of_edges(), m["kg"])
    assert g.number_of_nodes() == m["kg"]["nodes"], (g.number_of_nodes(), m["kg"])
    cvt = sum(1 for _, d in g.nodes(data=True) if d.get("cvt") is True)
    assert cvt == m["kg"].get("cvt", 0), (cvt, m["kg"])
    # Freebase mids are named by the entities table (`type.object.name`) or marked CVT.
    for _, d in g.nodes(data=True):
        if d["kind"] == "entity" and d["key"].startswith("m."):
            assert ("name" in d) != (d.get("cvt") is True), d
    # Aliases (Freebase's `common.topic.alias`, Wikidata's): a JSON array, distinct and sorted
    # by UTF-8 bytes, as `nodes.parquet` holds them.
    aliased = 0
    for _, d in g.nodes(data=True):
        if "aliases" in d:
            aliases = json.loads(d["aliases"])
            assert aliases, d
            assert aliases == sorted(set(aliases), key=lambda a: a.encode()), d
            aliased += 1
    print(
        "kg", g.number_of_nodes(), "nodes", g.number_of_edges(), "edges", cvt, "cvt",
        aliased, "with aliases",
    )
print("bm25 docs", total_bm25, "dense vectors", total_dense, "ok")
