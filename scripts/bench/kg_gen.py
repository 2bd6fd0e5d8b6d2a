"""Generates a Freebase-shaped knowledge graph and KGQA questions for scripts/bench-kg.sh.

usage: kg_gen.py OUT_DIR EDGES NODES QUESTIONS [SEED] [MIX]

Writes OUT_DIR/kg.nt: EDGES N-Triples lines in the dump's form (`<ns:s>\t<ns:p>\t<o>\t.`,
ns = http://rdf.freebase.com/ns/) between NODES `m.` entities, subjects uniform and objects
skewed towards low ids (u**1.5, a few hubs as in Freebase); 3% of the lines use Hydra-dropped
relations (`common.topic.notable_types`, `type.object.type`), 2% point at `g.` nodes and 2%
have an `@en` literal object, so every filter rule is exercised. Relations come from 400
names `bench.domain_<k>.rel_<j>`. OUT_DIR/questions.json: QUESTIONS CWQ-form questions
(`ID`, `question`, `answer`, `topic_entity` {mid: name}) with one or two topic entities drawn
from the subjects. Deterministic for a seed.

MIX `edges` (the default) is the mix above. MIX `literals` is shaped like FB15k-237's
neighbourhood in the real dump, where names and values outweigh entity edges: 59% of the
lines have a literal object (22% `type.object.name` names, `@en` or in another language,
which the English filter drops; 10% `common.topic.alias` aliases; 15% typed values:
`xsd:date`, `xsd:gYear`, `xsd:int`, `xsd:float`, `xsd:boolean`; 12% `@en` descriptions of
80 to 400 characters with escapes), and 41% are edges as in the default mix.
"""

import json
import random
import sys
from pathlib import Path

NS = "http://rdf.freebase.com/ns/"


def mid(i):
    return f"m.0{i:x}"


WORDS = ("river", "album", "station", "county", "film", "player", "band", "novel", "church",
         "bridge", "school", "party", "island", "festival", "award", "company", "district")
LANGS = ("fr", "de", "es", "ja", "ru", "it", "pt", "zh")
XSD = "http://www.w3.org/2001/XMLSchema#"


def literal_line(rng, s, o, roll):
    """One line with a literal object (the `literals` mix), `roll` uniform in [0, 0.59)."""
    subj = f"<{NS}{mid(s)}>"
    word = WORDS[o % len(WORDS)]
    if roll < 0.22:
        lang = "en" if roll < 0.12 else LANGS[o % len(LANGS)]
        name = f"{word.title()} {o} de l\\u00E9t\\u00E9" if lang != "en" else f"{word.title()} {o}"
        return f'{subj}\t<{NS}type.object.name>\t"{name}"@{lang}\t.'
    if roll < 0.32:
        return f'{subj}\t<{NS}common.topic.alias>\t"The {word} {o:x}"@en\t.'
    if roll < 0.47:
        k = int(roll * 1000) % 5
        value, dt = [
            (f"{1800 + o % 220}-{1 + o % 12:02d}-{1 + o % 28:02d}", "date"),
            (f"{1800 + o % 220}", "gYear"),
            (f"{o % 100000}", "int"),
            (f"{(o % 10000) / 7:.4f}", "float"),
            ("true" if o & 1 else "false", "boolean"),
        ][k]
        return f'{subj}\t<{NS}bench.value.v{k}>\t"{value}"^^<{XSD}{dt}>\t.'
    words = " ".join(WORDS[(o + j) % len(WORDS)] for j in range(12 + o % 50))
    text = f"The {word} \\\"{o}\\\" is a {words}.\\nIt is known as {mid(o)}."
    return f'{subj}\t<{NS}common.topic.description>\t"{text}"@en\t.'


def main():
    out, edges, nodes, questions = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 7
    mix = sys.argv[6] if len(sys.argv) > 6 else "edges"
    if mix not in ("edges", "literals"):
        sys.exit(f"kg_gen.py: MIX must be `edges` or `literals`, not {mix!r}")
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    rels = [f"<{NS}bench.domain_{k % 40}.rel_{k}>" for k in range(400)]
    dropped = [f"<{NS}common.topic.notable_types>", f"<{NS}type.object.type>"]
    rand = rng.random
    literal = literal_line if mix == "literals" else None
    buf = []
    with open(out / "kg.nt", "w", encoding="utf-8", buffering=1 << 22) as f:
        for n in range(edges):
            s = int(rand() * nodes)
            o = int(nodes * rand() ** 1.5)
            roll = rand()
            if literal is not None:
                if roll < 0.59:
                    buf.append(literal(rng, s, o, roll))
                    if len(buf) >= 100_000:
                        f.write("\n".join(buf))
                        f.write("\n")
                        buf.clear()
                    continue
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
