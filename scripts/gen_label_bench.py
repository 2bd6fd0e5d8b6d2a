"""Generates the label benchmark's inputs from the real shared samples (never committed):

  python3 scripts/gen_label_bench.py OUT_DIR QUESTIONS

writes OUT_DIR/hotpot.json (the shared HotpotQA dev head, official JSON array) and
OUT_DIR/musique.jsonl (the shared MuSiQue-Ans head, one record a line), together QUESTIONS
questions: each sample repeated, in turn, until its file holds half of them. Every copy gets a
unique id (`<id>-c<copy>`) and, from the second copy on, its question text ends with
` (copy N)`, so no two questions give the same prompts: the label stage's duplicate removal
does not skip the writing of their samples and the benchmark measures the whole stage.
Contexts are left as they are (their documents keep their ids, so the stage's context maps are
smaller than for as many distinct questions; the labelling work per question is the same).
"""
import json
import os
import sys

SHARED = "../shared/data"


def copies(records, n, id_key):
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
            out.append(c)
        k += 1
    return out


def main(out_dir: str, questions: int) -> None:
    os.makedirs(out_dir, exist_ok=True)
    half = questions // 2
    with open(f"{SHARED}/hotpotqa/hotpot_dev_distractor_v1.head.json", encoding="utf-8") as f:
        hotpot = json.load(f)
    with open(os.path.join(out_dir, "hotpot.json"), "w", encoding="utf-8") as w:
        json.dump(copies(hotpot, half, "_id"), w)
    with open(f"{SHARED}/musique/musique_ans_v1.0_train.first70.jsonl", encoding="utf-8") as f:
        musique = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(out_dir, "musique.jsonl"), "w", encoding="utf-8") as w:
        for r in copies(musique, questions - half, "id"):
            w.write(json.dumps(r) + "\n")
    print(f"{out_dir}: {half} hotpotqa + {questions - half} musique questions")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
