"""Helpers of scripts/bench-index.sh (inputs are generated, never committed).

  days DAY1.xml DAY2.xml PAGES      MediaWiki dumps of PAGES pages from the shared wiki
                                    sample's pages repeated (titles made unique); day 2 edits
                                    the first paragraph of every 100th page (1%)
  bm25s PASSAGES.parquet            seconds bm25s takes to tokenize and index the passages
                                    (title + text, lucene BM25, k1 1.2, b 0.75)
  st MODEL PASSAGES BATCH [DEVICE [OUT.f32]]
                                    seconds sentence-transformers takes to embed the
                                    passages as the index does (title, newline, text);
                                    PASSAGES: .parquet, or .json (a list of those texts);
                                    DEVICE cpu (one thread, the default) or cuda; OUT gets
                                    the unit vectors as little-endian f32
  recall BIN ROOT HOTPOT.json       recall@10 of the supporting paragraphs: `distillery
                                    search` on ROOT against bm25s on ROOT's passages
"""
import bz2
import json
import re
import subprocess
import sys
import time

SHARED = "../shared/data"


def days(day1: str, day2: str, n: int) -> None:
    with bz2.open(f"{SHARED}/wikipedia_xml/enwiki-table-markup.xml.bz2", "rt", encoding="utf-8") as f:
        xml = f.read()
    head = xml[: xml.index("<page>")]
    pages = re.findall(r"<page>.*?</page>", xml, flags=re.S)
    with open(day1, "w", encoding="utf-8") as a, open(day2, "w", encoding="utf-8") as b:
        a.write(head)
        b.write(head)
        for i in range(n):
            p = pages[i % len(pages)]
            r = i // len(pages)
            p = re.sub(r"<title>(.*?)</title>", lambda m: f"<title>{m.group(1)} {r}</title>", p, count=1)
            p = re.sub(r"<id>(\d+)</id>", lambda m: f"<id>{int(m.group(1)) * 1000 + r}</id>", p, count=1)
            a.write("  " + p + "\n")
            if i % 100 == 0:
                p = re.sub(r"(<text[^>]*>)", lambda m: m.group(1) + f"Edited on day two ({i}). ", p, count=1)
            b.write("  " + p + "\n")
        a.write("</mediawiki>\n")
        b.write("</mediawiki>\n")


def texts(path: str):
    """The passages of a table (or of a JSON list of texts, for a python without pyarrow) as
    the index embeds them: title, newline, text."""
    if path.endswith(".json"):
        return None, json.load(open(path, encoding="utf-8"))
    import pyarrow.parquet as pq

    t = pq.read_table(path).to_pydict()
    return t, [f"{a}\n{b}" if a else b for a, b in zip(t["title"], t["text"])]


def tokenize(texts):
    import bm25s

    return bm25s.tokenize(texts, lower=True, stopwords=None, show_progress=False,
                          token_pattern=r"(?u)\b\w+\b")


def bm25s_build(path: str) -> None:
    import bm25s

    _, corpus = texts(path)
    t = time.perf_counter()
    r = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    r.index(tokenize(corpus), show_progress=False)
    print(f"{time.perf_counter() - t:.3f} {len(corpus)}")


def st(model: str, path: str, batch: int, device: str = "cpu", out: str = "") -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    if device == "cpu":
        torch.set_num_threads(1)
    _, corpus = texts(path)
    m = SentenceTransformer(model, device=device)
    m.encode(corpus[:batch], batch_size=batch)  # warm-up
    if device != "cpu":
        torch.cuda.synchronize()
    t = time.perf_counter()
    v = m.encode(corpus, batch_size=batch, normalize_embeddings=True, show_progress_bar=False)
    if device != "cpu":
        torch.cuda.synchronize()
    print(f"{time.perf_counter() - t:.3f} {len(corpus)}")
    if out:
        v.astype("<f4").tofile(out)


def recall(bin_: str, root: str, hotpot: str) -> None:
    import bm25s

    qs = json.load(open(hotpot))
    cur = open(f"{root}/CURRENT").read().strip()
    t, corpus = texts(f"{root}/versions/{cur}/passages/shard-0000.parquet")
    r = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    r.index(tokenize(corpus), show_progress=False)
    ours = theirs = 0.0
    for q in qs:
        gold = {f[0] for f in q["supporting_facts"]}
        out = subprocess.run([bin_, "--quiet", "search", root, q["question"], "-k", "10",
                              "--format", "json"], check=True, capture_output=True, text=True)
        got = {json.loads(l)["title"] for l in out.stdout.splitlines() if l.strip()}
        ours += len(gold & got) / len(gold)
        docs, _ = r.retrieve(tokenize([q["question"]]), k=10, show_progress=False)
        theirs += len(gold & {t["title"][i] for i in docs[0]}) / len(gold)
    print(f"{ours / len(qs):.4f} {theirs / len(qs):.4f} {len(qs)}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "days":
        days(args[0], args[1], int(args[2]))
    elif cmd == "bm25s":
        bm25s_build(args[0])
    elif cmd == "st":
        st(args[0], args[1], int(args[2]), *args[3:5])
    elif cmd == "recall":
        recall(args[0], args[1], args[2])
    else:
        sys.exit(__doc__)
