"""Checks that a Distillery SFT file trains as it is, with the Python stack users train with.

1. Hugging Face `datasets` loads the JSONL file (`load_dataset("json", data_files=...)`) with
   one row per line and every documented column.
2. A tokenizer is built locally (nothing is downloaded): a `tokenizers` WordLevel model trained
   on the file's own text, wrapped in `transformers.PreTrainedTokenizerFast` with a chat
   template that marks the assistant turn with `{% generation %}`.
3. For every sample (or the first MAX_SAMPLES), `apply_chat_template(messages, tokenize=True,
   return_dict=True, return_assistant_tokens_mask=True)`: the assistant mask must cover
   exactly the tokens of the assistant content (the only trained turn, the last message), and
   the rendered text must contain the sample's target. Iteration samples' targets must be the
   action JSON selecting only segment ids shown in the prompt.

usage: python3 tests/python/check_sft.py OUTPUT_DIR/sft/train.jsonl
"""
import json
import os
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import datasets  # noqa: E402

datasets.disable_progress_bars()
from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

MAX_SAMPLES = 2000
COLUMNS = [
    "id", "messages", "weight", "task", "dataset", "question_id", "segment_ids", "method",
    "params", "template_id", "template_version", "pipeline_hash", "step", "steps",
    "sufficient", "prompt_tokens", "target_tokens", "teacher", "cache_entries", "revisions",
]
SPECIAL = ["[UNK]", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
# One line on purpose: no template whitespace leaks into the rendering. Every turn is
# `<|role|>\n{content}\n<|end|>\n`; only the assistant content is inside the generation block.
TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}"
    "{{ '<|assistant|>\n' }}{% generation %}{{ m['content'] }}{% endgeneration %}{{ '\n<|end|>\n' }}"
    "{% else %}"
    "{{ '<|' + m['role'] + '|>\n' + m['content'] + '\n<|end|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
)
ASSISTANT = "<|assistant|>\n"


def build_tokenizer(texts):
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIAL, min_frequency=1)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", eos_token="<|end|>", pad_token="<|end|>"
    )
    fast.chat_template = TEMPLATE
    return fast


def check_sample(tok, row):
    messages = [{"role": m["role"], "content": m["content"]} for m in row["messages"]]
    roles = [m["role"] for m in messages]
    assert roles.count("assistant") == 1 and roles[-1] == "assistant", roles
    target = messages[-1]["content"]
    assert target, "empty target"

    rendered = tok.apply_chat_template(messages, tokenize=False)
    assert target in rendered, "the rendered text lacks the target"
    out = tok.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids = list(out["input_ids"])
    mask = list(out["assistant_masks"])
    assert len(ids) == len(mask)

    enc = tok(rendered, add_special_tokens=False, return_offsets_mapping=True)
    assert list(enc["input_ids"]) == ids, "chat template tokenization differs"
    start = rendered.rindex(ASSISTANT) + len(ASSISTANT)
    end = start + len(target)
    assert rendered[start:end] == target
    expected = [1 if s >= start and e <= end and e > s else 0 for s, e in enc["offset_mapping"]]
    assert sum(expected) > 0, "no token in the assistant span"
    if mask != expected:
        got = [i for i, m in enumerate(mask) if m]
        want = [i for i, m in enumerate(expected) if m]
        raise AssertionError(f"assistant mask covers tokens {got[:8]}.. want {want[:8]}..")
    # The masked tokens are exactly the target's tokens.
    masked = [t for t, m in zip(ids, mask) if m]
    assert masked == tok(target, add_special_tokens=False)["input_ids"]

    if row["task"] == "hseq_iteration":
        action = json.loads(target)
        assert action["type"] == "select", action
        assert isinstance(action["sufficiency"], bool), action
        prompt = "\n".join(m["content"] for m in messages[:-1])
        for sid in action["args"]["segment_ids"]:
            assert f"[{sid}]" in prompt, f"target selects {sid}, which the prompt does not show"
    return sum(mask)


def main(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines:
        print(f"{path}: no samples")
        return 1
    for row in lines:
        keys = list(row.keys())
        assert keys == COLUMNS, f"keys {keys}"
        assert isinstance(row["params"], dict), "params must be a JSON object"

    with tempfile.TemporaryDirectory() as cache:
        ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=cache)
        assert ds.num_rows == len(lines), (ds.num_rows, len(lines))
        missing = [c for c in COLUMNS if c not in ds.column_names]
        assert not missing, f"columns missing after loading: {missing}"
        rows = [ds[i] for i in range(min(ds.num_rows, MAX_SAMPLES))]

    texts = [m["content"] for row in lines for m in row["messages"]]
    tok = build_tokenizer(texts)
    tasks = {}
    trained = 0
    for i, row in enumerate(rows):
        try:
            trained += check_sample(tok, row)
        except AssertionError as e:
            print(f"{path}: sample {i} ({row['id']}, {row['task']}): {e}")
            return 1
        tasks[row["task"]] = tasks.get(row["task"], 0) + 1
    print(
        f"{path}: {ds.num_rows} rows load with datasets; {len(rows)} samples rendered, "
        f"{trained} assistant tokens masked, tasks {json.dumps(tasks, sort_keys=True)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
