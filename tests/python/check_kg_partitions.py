"""Checks that a Distillery output's knowledge graph is partitioned by subject: every subject's
`triples` and `literals` rows, and its `entities` row (by key), lie in parts of one shard, and
the tables hold only their own kind of edge. Prints the counts.

usage: python3 tests/python/check_kg_partitions.py OUTPUT_DIR
"""
import json
import os
import re
import sys
from collections import defaultdict

import pyarrow.parquet as pq

PART = re.compile(r"part-(\d+)-")


def main(root: str) -> int:
    with open(os.path.join(root, "_manifest.json")) as f:
        manifest = json.load(f)
    shards = defaultdict(set)
    rows = defaultdict(int)
    parts = defaultdict(int)
    bad = 0
    for table in manifest["tables"]:
        name = table["name"]
        if name not in ("triples", "literals", "entities"):
            continue
        column = "key" if name == "entities" else "subject"
        for entry in table["files"]:
            shard = int(PART.search(os.path.basename(entry["path"])).group(1))
            t = pq.read_table(os.path.join(root, entry["path"]))
            parts[name] += 1
            rows[name] += t.num_rows
            for key in t.column(column).to_pylist():
                shards[key].add(shard)
            if name != "entities":
                kinds = set(t.column("object_kind").to_pylist())
                want = {"entity"} if name == "triples" else kinds - {"entity"}
                if kinds != want:
                    print(f"{entry['path']}: object kinds {sorted(kinds)} in {name}")
                    bad += 1
    split = {k: sorted(v) for k, v in shards.items() if len(v) > 1}
    for key, where in list(split.items())[:5]:
        print(f"{key}: rows in shards {where}")
    bad += len(split)
    used = sorted({s for v in shards.values() for s in v})
    print(
        f"{len(shards)} subjects in shards {used}; "
        + ", ".join(f"{t}: {rows[t]} rows in {parts[t]} parts" for t in sorted(rows))
        + f"; {len(split)} subjects split across shards"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
