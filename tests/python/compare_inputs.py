"""Compares the parts two inputs of one Distillery output wrote, shard by shard and row by
row, ignoring the columns that name the file (`id` hashes `source`): the parallel reader of a
compressed dump must write what the sequential read of the same lines writes, in the same
order within each shard. Prints one line per table.

usage: python3 tests/python/compare_inputs.py OUTPUT_DIR TAG_A TAG_B
"""
import os
import re
import sys

import pyarrow as pa
import pyarrow.parquet as pq

PART = re.compile(r"part-(\d+)-(.+)-(\d+)\.parquet$")
IGNORED = {"id", "source"}
# Tables sharded by their id, which hashes the file's path: the two inputs put a row in
# different shards, so their rows are compared all shards together, in (line, offset) order.
BY_ID = {"quarantine"}


def shards(table_dir: str, tag: str) -> dict:
    """shard -> the rows of its parts of `tag`, in part order, as a list of dicts."""
    files = {}
    for name in sorted(os.listdir(table_dir)):
        m = PART.match(name)
        if m and m.group(2) == tag:
            files.setdefault(int(m.group(1)), []).append(os.path.join(table_dir, name))
    out = {}
    for shard, paths in files.items():
        t = pa.concat_tables([pq.read_table(p) for p in sorted(paths)])
        keep = [c for c in t.column_names if c not in IGNORED]
        out[shard] = t.select(keep).to_pylist()
    return out


def main(root: str, a: str, b: str) -> int:
    bad = 0
    for table in sorted(os.listdir(root)):
        d = os.path.join(root, table)
        if not os.path.isdir(d):
            continue
        sa, sb = shards(d, a), shards(d, b)
        if table in BY_ID:
            key = lambda r: (r.get("line") or 0, r.get("byte_offset") or 0)
            sa = {0: sorted((r for v in sa.values() for r in v), key=key)}
            sb = {0: sorted((r for v in sb.values() for r in v), key=key)}
        rows = sum(len(v) for v in sa.values())
        if sa != sb:
            bad += 1
            for s in sorted(set(sa) | set(sb)):
                ra, rb = sa.get(s, []), sb.get(s, [])
                if ra != rb:
                    first = next((i for i, (x, y) in enumerate(zip(ra, rb)) if x != y), None)
                    print(f"{table} shard {s}: {len(ra)} rows ({a}) vs {len(rb)} ({b}); first difference at row {first}")
        print(f"{table}: {rows} rows in {len(sa)} shards, {'same' if sa == sb else 'DIFFERENT'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
