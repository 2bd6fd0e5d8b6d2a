"""Generates a Freebase-shaped knowledge graph and KGQA questions for scripts/bench-kg.sh.

usage: kg_gen.py OUT_DIR EDGES NODES QUESTIONS [SEED]

Writes OUT_DIR/kg.nt: EDGES N-Triples lines in the dump's form (`<ns:s>\t<ns:p>\t<o>\t.`,
ns = http://rdf.freebase.com/ns/) between NODES `m.` entities, subjects uniform and objects
skewed towards low ids (u**1.5, a few hubs as in Freebase); 3% of the lines use Hydra-dropped
relations (`common.topic.notable_types`, `type.object.type`), 2% point at `g.` nodes and 2%
have an `@en` literal object, so every filter rule is exercised. Relations come from 400
names `bench.domain_<k>.rel_<j>`. OUT_DIR/questions.json: QUESTIONS CWQ-form questions
(`ID`, `question`, `answer`, `topic_entity` {mid: name}) with one or two topic entities drawn
from the subjects. Deterministic for a seed.
"""

import json
import random
import sys
from pathlib import Path

NS = "http://rdf.freebase.com/ns/"


def mid(i):
    return f"m.0{i:x}"


def main():
    out, edges, nodes, questions = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 7
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    rels = [f"<{NS}bench.domain_{k % 40}.rel_{k}>" for k in range(400)]
    dropped = [f"<{NS}common.topic.notable_types>", f"<{NS}type.object.type>"]
    rand = rng.random
    buf = []
    with open(out / "kg.nt", "w", encoding="utf-8", buffering=1 << 22) as f:
        for n in range(edges):
            s = int(rand() * nodes)
            o = int(nodes * rand() ** 1.5)
            roll = rand()
            if roll < 0.03:
                line = f"<{NS}{mid(s)}>\t{dropped[n & 1]}\t<{NS}{mid(o)}>\t."
            elif roll < 0.05:
                line = f"<{NS}{mid(s)}>\t{rels[n % 400]}\t<{NS}g.1{o:x}>\t."
            elif roll < 0.07:
                line = f'<{NS}{mid(s)}>\t{rels[n % 400]}\t"value {o}"@en\t.'
            else:
                line = f"<{NS}{mid(s)}>\t{rels[int(rand() * 400)]}\t<{NS}{mid(o)}>\t."
            buf.append(line)
            if len(buf) >= 100_000:
                f.write("\n".join(buf))
                f.write("\n")
                buf.clear()
        if buf:
            f.write("\n".join(buf))
            f.write("\n")
    qs = []
    for i in range(questions):
        topics = {mid(int(rand() * nodes)): f"entity {i}.{k}" for k in range(1 + (i % 2))}
        qs.append({"ID": f"bench-{i:05d}", "question": f"bench question {i}", "answer": "none", "topic_entity": topics})
    (out / "questions.json").write_text(json.dumps(qs), encoding="utf-8")


if __name__ == "__main__":
    main()
