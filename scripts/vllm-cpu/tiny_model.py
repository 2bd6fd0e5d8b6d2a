"""A tiny random-weight Llama and a byte-level BPE tokenizer, built here without downloads.

    python tiny_model.py OUT_DIR

The tokenizer is trained on text already on the machine (license texts, the Python standard
library's sources). The model has 2 layers, hidden size 128 and 4 heads over 2 KV heads, so the
head size is 32 (vLLM's CPU attention needs at least 32). Its output is noise: tests that use
it check structure only.
"""

import glob
import json
import os
import sys
import sysconfig

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

texts = [f for f in sorted(glob.glob("/usr/share/common-licenses/*")) if os.path.isfile(f)]
texts += sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))[:200]

specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
tok.train(
    texts,
    trainers.BpeTrainer(
        vocab_size=4096,
        min_frequency=2,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    ),
)
tok.save(os.path.join(out, "tokenizer.json"))

template = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump(
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "model_max_length": 1024,
            "clean_up_tokenization_spaces": False,
            "chat_template": template,
        },
        f,
        indent=2,
    )
with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
    json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, f)

import torch  # noqa: E402  (only needed for the weights)
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.manual_seed(0)
eos, pad = tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
config = LlamaConfig(
    vocab_size=tok.get_vocab_size(),
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
    bos_token_id=pad,
    eos_token_id=eos,
    pad_token_id=pad,
    torch_dtype="bfloat16",
)
LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
print("tiny model in", out)
