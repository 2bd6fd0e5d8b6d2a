"""recall@10 of HotpotQA's supporting paragraphs with bm25s over the same passages.

    python3 tests/python/bm25s_recall.py PASSAGES.parquet hotpot.json

Passages are indexed as title + text; BM25 with k1 = 1.2, b = 0.75 (tantivy's values),
lowercased words, no stemming or stopwords (as tantivy's default analyzer). Prints the mean
recall@10 over the questions, the question as the query.
"""
import json
import sys

import bm25s
import pyarrow.parquet as pq

t = pq.read_table(sys.argv[1]).to_pydict()
titles = t["title"]
corpus = [f"{a}\n{b}" for a, b in zip(t["title"], t["text"])]
tok = lambda texts: bm25s.tokenize(texts, lower=True, stopwords=None, show_progress=False,
                                  token_pattern=r"(?u)\b\w+\b")
retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
retriever.index(tok(corpus), show_progress=False)
qs = json.load(open(sys.argv[2]))
total = 0.0
for q in qs:
    gold = {f[0] for f in q["supporting_facts"]}
    docs, _ = retriever.retrieve(tok([q["question"]]), k=10, show_progress=False)
    got = {titles[i] for i in docs[0]}
    total += len(gold & got) / len(gold)
print(f"{total / len(qs):.6f}")
