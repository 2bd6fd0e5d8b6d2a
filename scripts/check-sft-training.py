"""Trains a LoRA adapter on a Distillery SFT file with TRL, as a user would: the file as it is.

`tests/python/check_sft.py` (run in CI) proves the file loads and renders; this script goes on
to train on it, which needs PyTorch, so it is not part of `cargo test` (CI installs no
PyTorch). It proves that:

1. TRL's `SFTTrainer` takes `sft/train.jsonl` loaded by `datasets` unchanged (conversational
   `messages` plus the lineage columns, which the trainer leaves out of the batches) with
   `assistant_only_loss=True` and a PEFT LoRA adapter on every linear layer;
2. in a collated batch only the assistant turn carries labels: the labelled tokens of each
   sample are exactly the tokens of its target (the last message), nothing of the prompt;
3. after training, the trainer's loss on a batch is the causal loss computed here from the
   model's logits (each position against the next token's label), so the labels are shifted
   once (a TRL/Transformers pair that disagree on who shifts teaches the model to copy its
   input, and the loss falls to zero whatever the data); a NaN fails it too. The same check
   before training tells only with `--model` (random weights give every alignment about the
   same loss);
4. the loss falls over STEPS optimiser steps (the mean of the last tenth of the logged losses,
   at least the last three, against the first logged loss).

The tokenizer is built from the file's own text and the model is a small Llama with random
weights made from a config (nothing is downloaded), so the numbers say the data trains, not
how well. `--model DIR` trains a real local Hugging Face model directory instead (its own
tokenizer must have a chat template with `{% generation %}` markers for
`assistant_only_loss`). On a CUDA device the model trains in bf16; on a CPU in fp32.

usage: python3 scripts/check-sft-training.py OUTPUT_DIR/sft/train.jsonl [--steps 60]
           [--samples 512] [--batch 4] [--lr 2e-3] [--max-length 8192] [--hidden 256 --layers 4]
           [--model DIR] [--json FILE]
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import datasets  # noqa: E402
import peft  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from check_sft import build_tokenizer  # noqa: E402

datasets.disable_progress_bars()


def tiny_llama(vocab: int, hidden: int, layers: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 8 // 3,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        num_key_value_heads=hidden // 64,
        max_position_embeddings=16384,
    )
    return LlamaForCausalLM(cfg)


def check_labels(trainer, tok, raw, n: int) -> int:
    """Collates the first `n` training rows and checks that each one's labels are exactly its
    target's tokens, followed by nothing but special tokens (a chat template that puts the
    end-of-turn token inside its generation block trains it too); returns the labelled
    tokens."""
    rows = [trainer.train_dataset[i] for i in range(n)]
    batch = trainer.data_collator(rows)
    labels = batch["labels"]
    special = set(tok.all_special_ids)
    total = 0
    for i in range(n):
        got = [int(t) for t in labels[i] if int(t) != -100]
        target = raw[i]["messages"][-1]["content"]
        want = tok(target, add_special_tokens=False)["input_ids"]
        if got[: len(want)] != want or not set(got[len(want):]) <= special:
            raise AssertionError(
                f"sample {i} ({raw[i]['id']}): {len(got)} labelled tokens, want the "
                f"{len(want)} of its target; first labelled: {tok.decode(got[:12])!r}"
            )
        total += len(got)
    return total


def loss_check(trainer, n: int):
    """The trainer's loss on a batch of the first `n` rows against the causal loss computed
    here (the logits at each position against the next token's label); returns both. They
    differ when the trainer's labels are not shifted as the model expects (a TRL and
    Transformers pair that disagree on who shifts): then the model learns to copy its input
    and the loss falls to zero for no merit of the data."""
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(n)])
    model = trainer.model
    batch = {k: v.to(model.device) for k, v in batch.items() if torch.is_tensor(v)}
    was_training = model.training
    model.eval()
    with torch.no_grad():
        got = trainer.compute_loss(model, dict(batch))
        got = got[0] if isinstance(got, tuple) else got
        logits = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits
        labels = batch["labels"]
        want = torch.nn.functional.cross_entropy(
            logits[:, :-1].float().reshape(-1, logits.shape[-1]),
            labels[:, 1:].reshape(-1),
            ignore_index=-100,
        )
    model.train(was_training)
    return float(got), float(want)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--max-length", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256, help="the random model's width")
    ap.add_argument("--layers", type=int, default=4, help="the random model's layers")
    ap.add_argument("--lr", type=float, default=2e-3,
                    help="for the default small model; a larger one wants less (3e-4 at 1024x8)")
    ap.add_argument("--fp32", action="store_true", help="train in fp32 on a CUDA device too")
    ap.add_argument("--model")
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args()

    cuda = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as work:
        ds = datasets.load_dataset(
            "json", data_files=a.path, split="train", cache_dir=os.path.join(work, "cache")
        )
        rows = ds.num_rows
        # A seeded shuffle, so every task and dataset of the file is among the samples.
        ds = ds.shuffle(seed=0).select(range(min(rows, a.samples)))
        if a.model:
            tok = AutoTokenizer.from_pretrained(a.model)
            model = AutoModelForCausalLM.from_pretrained(a.model)
        else:
            texts = [m["content"] for r in ds for m in r["messages"]]
            tok = build_tokenizer(texts)
            model = tiny_llama(len(tok), a.hidden, a.layers)
        longest = max(
            len(tok.apply_chat_template(r["messages"], tokenize=True, return_dict=True)["input_ids"])
            for r in ds
        )
        if longest > a.max_length:
            print(f"{a.path}: a sample has {longest} tokens, over --max-length {a.max_length}: "
                  "its target would be cut off")
            return 1
        cfg = trl.SFTConfig(
            output_dir=os.path.join(work, "run"),
            max_steps=a.steps,
            per_device_train_batch_size=a.batch,
            learning_rate=a.lr,
            lr_scheduler_type="constant",
            warmup_steps=0,
            logging_steps=1,
            # Log a NaN loss as it is (the default logs the running mean in its place).
            logging_nan_inf_filter=False,
            save_strategy="no",
            report_to="none",
            assistant_only_loss=True,
            max_length=a.max_length,
            bf16=cuda and not a.fp32,
            seed=0,
            dataloader_num_workers=0,
        )
        lora = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                               task_type="CAUSAL_LM")
        trainer = trl.SFTTrainer(
            model=model, args=cfg, train_dataset=ds, processing_class=tok, peft_config=lora
        )
        trainable, params = trainer.model.get_nb_trainable_parameters()
        labelled = check_labels(trainer, tok, ds, min(16, ds.num_rows))
        before = loss_check(trainer, min(8, ds.num_rows))
        t0 = time.time()
        trainer.train()
        seconds = time.time() - t0
        logged = [h for h in trainer.state.log_history if "loss" in h]
        losses = [float(h["loss"]) for h in logged]
        accuracy = [float(h.get("mean_token_accuracy", "nan")) for h in logged]
        after = loss_check(trainer, min(8, ds.num_rows))

    tail = losses[-max(3, len(losses) // 10):]
    first, last = losses[0], sum(tail) / len(tail)
    result = {
        "file": a.path,
        "rows": rows,
        "samples": ds.num_rows,
        "steps": a.steps,
        "batch": a.batch,
        "longest_tokens": longest,
        "labelled_tokens_first16": labelled,
        "trainable_params": trainable,
        "params": params,
        "first_loss": round(first, 4),
        "last_loss": round(last, 4),
        "train_seconds": round(seconds, 1),
        "loss_check_before": [round(x, 4) for x in before],
        "loss_check_after": [round(x, 4) for x in after],
        "losses": [round(x, 4) for x in losses],
        "mean_token_accuracy": [round(x, 4) for x in accuracy],
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "versions": {
            "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__, "peft": peft.__version__, "datasets": datasets.__version__,
        },
    }
    print(json.dumps(result, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    for when, (got, want) in (("before", before), ("after", after)):
        if not math.isclose(got, want, rel_tol=0.05, abs_tol=0.02):
            print(f"{a.path}: the trainer's loss {got:.4f} {when} training is not the causal "
                  f"loss {want:.4f} of the same batch: labels shifted twice or not at all "
                  "(a TRL/Transformers version pair that disagree)")
            return 1
    if not all(math.isfinite(x) for x in losses) or not last < 0.8 * first:
        print(f"{a.path}: the loss did not fall: {first:.3f} -> {last:.3f}")
        return 1
    print(f"{a.path}: {ds.num_rows} of {rows} samples trained with TRL SFTTrainer + LoRA, "
          f"loss {first:.3f} -> {last:.3f} over {a.steps} steps on {result['device']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
