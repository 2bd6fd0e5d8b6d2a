"""Generates the label benchmark's inputs from the real shared samples (never committed):

  python3 scripts/gen_label_bench.py OUT_DIR QUESTIONS [--shared-contexts]

writes OUT_DIR/hotpot.json (the shared HotpotQA dev head, official JSON array) and
OUT_DIR/musique.jsonl (the shared MuSiQue-Ans head, one record a line), together QUESTIONS
questions: each sample repeated, in turn, until its file holds half of them. Every copy gets a
unique id (`<id>-c<copy>`) and, from the second copy on, its question text ends with
` (copy N)` (MuSiQue's sub-questions too), so no two questions give the same prompts: the
label stage's duplicate removal does not skip the writing of their samples and the benchmark
measures the whole stage.

From the second copy on, the titles of a copy's context paragraphs end with ` (copy N)` too
(HotpotQA supporting facts follow them; MuSiQue marks its support by paragraph index), so
every copy cites documents of its own, as distinct questions of a real dataset do. Ingest
then writes every copy's documents instead of only the first copy's: a shared context would
make ingest look far cheaper than on real data (in a 10,000-question run, 1,844 documents
written instead of 143,679). `--shared-contexts` leaves contexts as they are, which is how the
benchmark ran before; the label stage does the same work per question either way.
"""
import json
import os
import sys

SHARED = "../shared/data"


def copies(records, n, id_key, retitle):
    out = []
    k = 0
    while len(out) < n:
        for r in records:
            if len(out) == n:
                break
            c = dict(r)
            c[id_key] = f"{r[id_key]}-c{k}"
            if k > 0:
                c["question"] = f"{r['question']} (copy {k})"
                if retitle is not None:
                    retitle(c, f" (copy {k})")
            out.append(c)
        k += 1
    return out


def retitle_hotpot(r, suffix):
    r["context"] = [[title + suffix, sentences] for title, sentences in r["context"]]
    r["supporting_facts"] = [[title + suffix, i] for title, i in r["supporting_facts"]]


def retitle_musique(r, suffix):
    r["paragraphs"] = [{**p, "title": p["title"] + suffix} for p in r["paragraphs"]]
    # The sub-questions too: HANRAG's refiner and ending samples are built from them, and
    # copies sharing them would make exact duplicates (a third of all samples at 100,000
    # questions), far more than a real dataset holds.
    r["question_decomposition"] = [
        {**d, "question": d["question"] + suffix} for d in r.get("question_decomposition", [])
    ]


def main(out_dir: str, questions: int, shared_contexts: bool) -> None:
    os.makedirs(out_dir, exist_ok=True)
    half = questions // 2
    with open(f"{SHARED}/hotpotqa/hotpot_dev_distractor_v1.head.json", encoding="utf-8") as f:
        hotpot = json.load(f)
    with open(os.path.join(out_dir, "hotpot.json"), "w", encoding="utf-8") as w:
        json.dump(copies(hotpot, half, "_id", None if shared_contexts else retitle_hotpot), w)
    with open(f"{SHARED}/musique/musique_ans_v1.0_train.first70.jsonl", encoding="utf-8") as f:
        musique = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(out_dir, "musique.jsonl"), "w", encoding="utf-8") as w:
        for r in copies(musique, questions - half, "id", None if shared_contexts else retitle_musique):
            w.write(json.dumps(r) + "\n")
    contexts = "shared" if shared_contexts else "distinct"
    print(f"{out_dir}: {half} hotpotqa + {questions - half} musique questions, {contexts} contexts")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--shared-contexts"]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], int(args[1]), "--shared-contexts" in sys.argv[1:])
