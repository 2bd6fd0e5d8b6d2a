#!/usr/bin/env bash
# Embedding throughput on one GPU: candle CUDA (`embed_bench`, the distillery-embed example built
# with `--features cuda`) against sentence-transformers (torch CUDA) on the same card, the same
# weights, the same texts and batch, both in f32. Prints texts/s of each, the ratio, and the
# smallest cosine between the two implementations' vectors of the same text.
#
#   scripts/bench-embed-gpu.sh EMBED_BENCH MODEL_DIR TEXTS.json [REPEAT=16] [BATCHES="32 256"]
#
# EMBED_BENCH: cargo build --release -p distillery-embed --example embed_bench --features cuda
# (target/release/examples/embed_bench). MODEL_DIR: a sentence-transformers BERT model; when it
# has no model.safetensors (a machine that cannot download one), weights drawn at random with a
# fixed seed are written into a copy of it: throughput depends on the shapes, not the values.
# TEXTS.json: a list of texts (bench-index.sh section 2 leaves one as $BENCH_DIR/embed.json),
# repeated REPEAT times.
set -euo pipefail
bin=$(readlink -f "$1")
model=$(readlink -f "$2")
texts=$(readlink -f "$3")
repeat=${4:-16}
batches=${5:-32 256}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PY=${BENCH_ST_PYTHON:-python3}

# The CUDA libraries the binary links (cuBLAS, cuRAND, NVRTC, the runtime), from torch's wheels
# or the toolkit when the loader does not find them.
if ldd "$bin" | grep -q "not found"; then
  dirs=$(for l in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 libcudart.so.13 libcuda.so.1; do
    find /usr/local/cuda*/ /usr/local/nvidia /opt /usr/lib/x86_64-linux-gnu \
      "$("$PY" -c 'import site; print(site.getsitepackages()[0])')" \
      -name "$l" 2>/dev/null | head -1 | xargs -r dirname
  done | sort -u | paste -sd:)
  export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ldd "$bin" | grep "not found" && { echo "missing libraries"; exit 1; }
fi

if [ ! -f "$model/model.safetensors" ]; then
  cp -r "$model" "$work/model"
  model=$work/model
  "$PY" - "$model" <<'PY'
import sys, torch
from transformers import BertConfig, BertModel
torch.manual_seed(0)
BertModel(BertConfig.from_pretrained(sys.argv[1])).save_pretrained(sys.argv[1], safe_serialization=True)
PY
  echo "random weights (seed 0) in a copy of $2"
fi
"$PY" -c "
import json, sys
t = json.load(open('$texts'))
json.dump(t * $repeat, open('$work/texts.json', 'w'))
print(f'{len(t) * $repeat} texts ({len(t)} distinct, {sum(map(len, t)) / len(t):.0f} characters on average)')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

for b in $batches; do
  read -r ours n <<<"$("$bin" "$model" cuda "$work/texts.json" "$b" "$work/ours.f32")"
  read -r theirs _ <<<"$("$PY" "$here/bench/index.py" st "$model" "$work/texts.json" "$b" cuda "$work/theirs.f32")"
  "$PY" -c "
import numpy as np
a = np.fromfile('$work/ours.f32', dtype='<f4').reshape($n, -1)
b = np.fromfile('$work/theirs.f32', dtype='<f4').reshape($n, -1)
cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
print(f'batch $b: candle cuda {$n/$ours:.0f} texts/s ({$ours:.2f} s), sentence-transformers {$n/$theirs:.0f} texts/s ({$theirs:.2f} s): ratio {$theirs/$ours:.2f}x; smallest cosine {cos.min():.6f}')"
done
