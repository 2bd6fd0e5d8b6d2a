#!/usr/bin/env python3
"""Helper of scripts/compare-outputs.sh (see its header for what is normalised and why).

    compare_outputs.py plan PIPELINE.toml SIDE_DIR
        Prints what the run of PIPELINE needs and how to run it, one item a line:
          skip <reason>        it cannot run here (missing input, model, server)
          llm                  it calls the [llm] server (needs a shared response cache)
          set <key>=<value>    a --set override for `distillery run`
        Every path of the file under `out/` (the output and the corpus and index roots) is
        moved under SIDE_DIR/out/, so one run's whole output is one tree. Reads
        DISTILLERY_VLLM_URL, DISTILLERY_VLLM_MODEL, DISTILLERY_EMBED_MODEL and
        COMPARE_LLM_SAMPLE (see compare-outputs.sh).

    compare_outputs.py compare DIR_A DIR_B [--max-files N]
        Compares two output trees. Prints `identical`, or `differs` and then one indented
        block per differing file (at most N, default 5). Exit status 0 identical, 1 differs.
"""

import difflib
import glob
import hashlib
import json
import os
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # python < 3.11
    tomllib = None

# ---------------------------------------------------------------------------------------------
# plan


# The option of each teacher stage that bounds its work (COMPARE_LLM_SAMPLE).
SAMPLE_OPTIONS = {
    "triples": "max_passages",
    "cirag": "max_questions",
    "ras": "max_questions",
    "relevance": "max_questions",
    "planner": "max_questions",
    "compound": "max_entities",
}


def _stage_name(stage):
    return stage.get("name") or stage.get("kind")


def plan(pipeline, side_dir):
    if tomllib is None:
        print("skip python3 >= 3.11 (tomllib) is needed to read the pipeline file")
        return
    with open(pipeline, "rb") as f:
        doc = tomllib.load(f)
    out_root = os.path.join(side_dir, "out")
    sets = []
    missing = []
    embed = os.environ.get("DISTILLERY_EMBED_MODEL", "")
    if embed and not os.path.isdir(embed):
        embed_missing = f"DISTILLERY_EMBED_MODEL={embed} is not a directory"
        embed = ""
    else:
        embed_missing = "set DISTILLERY_EMBED_MODEL to a sentence-transformers directory"

    def relocate(value):
        # `out/x` and `./out/x` (the repository's convention for outputs) -> SIDE/out/x.
        v = value[2:] if value.startswith("./") else value
        if v == "out" or v.startswith("out/"):
            return os.path.join(out_root, v[4:]) if v != "out" else out_root
        return None

    def check_path(value, what):
        # Inputs named by a local path (relative to the repository root) must exist; URLs
        # (s3://, ...) are left to the run.
        if "://" in value:
            return
        if not glob.glob(value):
            missing.append(f"{what} {value}")

    out = doc.get("output")
    if isinstance(out, str):
        r = relocate(out)
        if r is None:
            # An output outside out/: still run it into the side's tree.
            r = os.path.join(out_root, os.path.basename(out.rstrip("/")) or "run")
        sets.append(("output", r))

    for inp in doc.get("inputs", []) or []:
        name = inp.get("name", "?")
        for p in inp.get("paths", []) or []:
            if isinstance(p, str):
                check_path(p, f"input {name}:")
        for k, v in (inp.get("options") or {}).items():
            vals = v if isinstance(v, list) else [v]
            for x in vals:
                if isinstance(x, str) and ("/" in x) and (x.startswith(("../", "data/", "/"))):
                    check_path(x, f"input {name} option {k}:")

    def walk_options(prefix, opts, stage):
        for k, v in opts.items():
            key = f"{prefix}.{k}"
            if isinstance(v, dict):
                if k == "embedding" and "model" in v and not v.get("server"):
                    if not embed:
                        missing.append(
                            f"an embedding model (stage {stage} {key}.model = {v['model']!r}; "
                            f"{embed_missing})"
                        )
                    else:
                        sets.append((f"{key}.model", embed))
                walk_options(key, v, stage)
                continue
            if k == "embedding_model" and isinstance(v, str):
                if not embed:
                    missing.append(
                        f"an embedding model (stage {stage} {key} = {v!r}; "
                        f"{embed_missing})"
                    )
                else:
                    sets.append((key, embed))
                continue
            vals = v if isinstance(v, list) else [v]
            if isinstance(v, str):
                r = relocate(v)
                if r is not None:
                    sets.append((key, r))
                    continue
            for x in vals:
                if isinstance(x, str) and x.startswith(("../", "data/")):
                    check_path(x, f"stage {stage} option {k}:")

    sample = os.environ.get("COMPARE_LLM_SAMPLE", "")
    for st in doc.get("stages", []) or []:
        name = _stage_name(st)
        opts = st.get("options") or {}
        walk_options(f"stages.{name}.options", opts, name)
        # COMPARE_LLM_SAMPLE=N: the teacher stages' own sample options, at most N.
        limit = SAMPLE_OPTIONS.get(st.get("kind"))
        if sample and limit and "llm" in doc:
            n = int(sample)
            if not isinstance(opts.get(limit), int) or opts[limit] > n:
                sets.append((f"stages.{name}.options.{limit}", str(n)))

    llm = "llm" in doc
    if llm:
        url = os.environ.get("DISTILLERY_VLLM_URL", "")
        if not url:
            missing.append(
                "a teacher LLM server ([llm] section; set DISTILLERY_VLLM_URL and "
                "DISTILLERY_VLLM_MODEL, e.g. scripts/vllm-cpu/serve.sh)"
            )
        else:
            sets.append(("llm.base_url", url))
            sets.append(("llm.model", os.environ.get("DISTILLERY_VLLM_MODEL", "tiny")))

    if missing:
        print("skip needs " + "; ".join(dict.fromkeys(missing)))
        return
    if llm:
        print("llm")
    for k, v in sets:
        print(f"set {k}={v}")


# ---------------------------------------------------------------------------------------------
# compare

# Index and corpus version directories: `20261207T004011Z-14554ea5`, `n000000-20261207T...`
# (creation time and a random suffix).
VERSION_RE = re.compile(r"^(n\d+-)?\d{8}T\d{6}Z-[0-9a-f]{8}$")
# Tantivy segment files: `<32 hex segment uuid>.<ext>` (also `<uuid>.<opstamp>.del`).
SEGMENT_RE = re.compile(r"^([0-9a-f]{32})\.")
# Run and job ids: `20261207T004010-db8fdc9f` (start time and a random suffix).
RUN_ID_RE = re.compile(rb"\b\d{8}T\d{6}-[0-9a-f]{8}\b")

# JSON keys whose values are wall-clock times, durations, or depend on the host or process;
# also any key starting with `phase_us.` (the label stage's per-phase microseconds, in
# counters) or ending with `_us`, `_ms`, `_secs` or `_seconds`.
VOLATILE_KEYS = {
    "run_id",
    "job_id",
    "started_at",
    "finished_at",
    "seconds",
    "created",
    "created_at",
    "host",
    "hostname",
    "pid",
}
VOLATILE_SUFFIXES = ("_us", "_ms", "_secs", "_seconds")


def _volatile(key):
    return key in VOLATILE_KEYS or key.startswith("phase_us.") or key.endswith(VOLATILE_SUFFIXES)


TEXT_EXT = {".json", ".jsonl", ".txt", ".graphml", ".tsv", ".csv", ".md", ".xml", ""}


def _tree(root):
    files = []
    for d, _, fs in os.walk(root):
        for f in fs:
            files.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(files)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _id_maps(root, files):
    """Placeholders for the ids a run draws at random: version directories and tantivy
    segments. Versions are numbered per parent folder in name order (time, then suffix);
    segments per index folder by a hash of their files' bytes, so equal segments get equal
    names whatever uuid they were given."""
    subst = {}
    versions = {}
    segments = {}
    for rel in files:
        parts = rel.split(os.sep)
        for i, p in enumerate(parts[:-1]):
            if VERSION_RE.match(p):
                versions.setdefault(os.sep.join(parts[:i]), set()).add(p)
        m = SEGMENT_RE.match(parts[-1])
        if m:
            segments.setdefault(os.sep.join(parts[:-1]), {}).setdefault(m.group(1), []).append(rel)
    for parent, names in versions.items():
        for k, name in enumerate(sorted(names)):
            subst[name] = f"<version-{k}>"
    for d, segs in segments.items():
        fp = {}
        for seg, rels in segs.items():
            h = hashlib.sha256()
            for rel in sorted(rels, key=lambda r: r.split(".", 1)[1]):
                h.update(rel.split(".", 1)[1].encode())
                h.update(_read(os.path.join(root, rel)))
            fp[seg] = h.hexdigest()
        for k, seg in enumerate(sorted(segs, key=lambda s: fp[s])):
            name = f"<segment-{k}>"
            subst[seg] = name
            dashed = f"{seg[:8]}-{seg[8:12]}-{seg[12:16]}-{seg[16:20]}-{seg[20:]}"
            subst[dashed] = name
    return subst


def _sub_text(data, subst):
    for old in sorted(subst, key=len, reverse=True):
        data = data.replace(old.encode(), subst[old].encode())
    return RUN_ID_RE.sub(b"<run-id>", data)


def _blank_volatile(value):
    if isinstance(value, dict):
        return {
            k: ("<volatile>" if _volatile(k) else _blank_volatile(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_blank_volatile(v) for v in value]
    return value


def _normalise(rel, data, subst):
    """The bytes compared for a file: text with ids replaced and volatile JSON values blanked
    (JSON re-serialised with its key order kept), anything else as it is."""
    ext = os.path.splitext(rel)[1]
    if ext not in TEXT_EXT:
        return data
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    data = _sub_text(data, subst)
    if ext == ".json":
        try:
            value = _blank_volatile(json.loads(data))
            if os.path.basename(rel) == ".managed.json" and isinstance(value, list):
                # tantivy's list of the files it manages: a set, written in hash-set order.
                value = sorted(value, key=str)
            return (json.dumps(value, indent=2) + "\n").encode()
        except ValueError:
            return data
    if ext == ".jsonl":
        lines = []
        for line in data.split(b"\n"):
            try:
                value = _blank_volatile(json.loads(line)) if line else None
                lines.append(json.dumps(value).encode() if line else line)
            except ValueError:
                lines.append(line)
        return b"\n".join(lines)
    return data


def _parquet_diff(pa_path, pb_path):
    """None when two Parquet files hold the same schema (metadata included) and rows; else a
    description of the first difference."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return "raw bytes differ (pyarrow is not installed: rows not compared)"
    try:
        ta = pq.read_table(pa_path)
        tb = pq.read_table(pb_path)
    except Exception as e:  # a side that is not Parquet at all is a difference too
        return f"raw bytes differ and a side does not read as Parquet: {e}"
    if not ta.schema.equals(tb.schema, check_metadata=False):
        return f"schema differs:\n--- A\n{ta.schema}\n+++ B\n{tb.schema}"
    ma = dict(ta.schema.metadata or {})
    mb = dict(tb.schema.metadata or {})
    if ma != mb:
        keys = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
        return f"schema metadata differs in keys {[k.decode(errors='replace') for k in keys]}"
    if ta.num_rows != tb.num_rows:
        return f"rows: A {ta.num_rows}, B {tb.num_rows}"
    if not ta.equals(tb):
        for name in ta.column_names:
            ca, cb = ta.column(name), tb.column(name)
            if not ca.equals(cb):
                la, lb = ca.to_pylist(), cb.to_pylist()
                for i, (x, y) in enumerate(zip(la, lb)):
                    if x != y:
                        return f"column {name!r} row {i}: A {x!r:.200} | B {y!r:.200}"
                return f"column {name!r} differs"
        return "rows differ"
    # Same rows and schema: the bytes differ in encoding only (row groups, page sizes,
    # compression, the writer's `created_by`). That is a difference of the file all the same.
    fa, fb = pq.ParquetFile(pa_path).metadata, pq.ParquetFile(pb_path).metadata
    return (
        "same rows and schema but different bytes "
        f"(row groups A {fa.num_row_groups} / B {fb.num_row_groups}, "
        f"created_by A {fa.created_by!r} / B {fb.created_by!r})"
    )


def _text_diff(na, nb, rel):
    try:
        la = na.decode("utf-8").splitlines()
        lb = nb.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        at = next((i for i, (x, y) in enumerate(zip(na, nb)) if x != y), min(len(na), len(nb)))
        return f"binary: A {len(na)} bytes, B {len(nb)} bytes, first difference at byte {at}"
    if max(map(len, la + lb), default=0) > 300:
        # Long lines (JSONL samples): where the first difference is, with some context.
        changed = sum(1 for x, y in zip(la, lb) if x != y) + abs(len(la) - len(lb))
        i = next((k for k, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
        x = la[i] if i < len(la) else "<no line>"
        y = lb[i] if i < len(lb) else "<no line>"
        c = next((k for k, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
        lo = max(0, c - 100)
        return (
            f"{changed} of {max(len(la), len(lb))} lines differ (A {len(la)} lines, B {len(lb)}); "
            f"first at line {i + 1}, character {c}:\n"
            f"A: ...{x[lo:c + 140]!s}...\nB: ...{y[lo:c + 140]!s}..."
        )
    d = list(difflib.unified_diff(la, lb, "A/" + rel, "B/" + rel, n=1, lineterm=""))
    if len(d) > 14:
        d = d[:14] + [f"... ({len(d) - 14} more diff lines)"]
    return "\n".join(x if len(x) <= 240 else x[:240] + "..." for x in d)


def compare(a, b, max_files=5):
    fa, fb = _tree(a), _tree(b)
    sa, sb = _id_maps(a, fa), _id_maps(b, fb)

    def canon(rel, subst):
        return os.sep.join(
            subst.get(p, p)
            if not SEGMENT_RE.match(p)
            else subst.get(p[:32], p[:32]) + p[32:]
            for p in rel.split(os.sep)
        )

    ca = {canon(r, sa): r for r in fa}
    cb = {canon(r, sb): r for r in fb}
    problems = []
    for k in sorted(set(ca) - set(cb)):
        problems.append((k, "only in A"))
    for k in sorted(set(cb) - set(ca)):
        problems.append((k, "only in B"))
    # Data files first, the run's _summary.json / _manifest.json (which repeat their
    # counts and sizes) after them.
    for k in sorted(set(ca) & set(cb), key=lambda k: (os.path.basename(k).startswith("_"), k)):
        pa, pb = os.path.join(a, ca[k]), os.path.join(b, cb[k])
        da, db = _read(pa), _read(pb)
        if da == db:
            continue
        if k.endswith(".parquet"):
            why = _parquet_diff(pa, pb)
            if why is not None:
                problems.append((k, why))
            continue
        na, nb = _normalise(k, da, sa), _normalise(k, db, sb)
        if na != nb:
            problems.append((k, _text_diff(na, nb, k)))
    if not problems:
        print(f"identical ({len(ca)} files)")
        return 0
    print(f"differs ({len(problems)} of {len(set(ca) | set(cb))} files)")
    for k, why in problems[:max_files]:
        print(f"  {k}: " + why.replace("\n", "\n      "))
    if len(problems) > max_files:
        more = ", ".join(k for k, _ in problems[max_files : max_files + 20])
        print(f"  ... and {len(problems) - max_files} more: {more}")
    return 1


def main(argv):
    if len(argv) >= 3 and argv[0] == "plan":
        plan(argv[1], argv[2])
        return 0
    if len(argv) >= 3 and argv[0] == "compare":
        n = 5
        if len(argv) >= 5 and argv[3] == "--max-files":
            n = int(argv[4])
        return compare(argv[1], argv[2], n)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
