"""Reads every Parquet file of a Distillery output with pyarrow and checks it against the
manifest: same files, same row counts. Prints one line per table.

usage: python3 tests/python/check_output.py OUTPUT_DIR
"""
import json
import os
import sys

import pyarrow.parquet as pq


def main(root: str) -> int:
    with open(os.path.join(root, "_manifest.json")) as f:
        manifest = json.load(f)
    bad = 0
    for table in manifest["tables"]:
        rows = 0
        for entry in table["files"]:
            t = pq.read_table(os.path.join(root, entry["path"]))
            if t.num_rows != entry["rows"]:
                print(f"{entry['path']}: {t.num_rows} rows, manifest says {entry['rows']}")
                bad += 1
            rows += t.num_rows
        if table["files"]:
            cols = pq.read_schema(os.path.join(root, table["files"][0]["path"])).names
        else:
            cols = []
        print(f"{table['name']}: {rows} rows, columns {','.join(cols)}")
        if rows != table["rows"]:
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
