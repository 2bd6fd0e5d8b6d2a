#!/usr/bin/env bash
# Starts vLLM (the CPU build of install.sh) serving a sentence-transformers model as a pooling
# model on 127.0.0.1:PORT (served name `minilm`, OpenAI-compatible /v1/embeddings), waits
# until /health answers, and writes DIR/embed/server.pid.
#
#   scripts/vllm-cpu/serve-embed.sh DIR MODEL_DIR [PORT=8012]
set -euo pipefail
DIR=${1:?usage: serve-embed.sh DIR MODEL_DIR [PORT]}
MODEL=${2:?usage: serve-embed.sh DIR MODEL_DIR [PORT]}
PORT=${3:-8012}
mkdir -p "$DIR/embed"
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_CACHE_ROOT=$DIR/vllm-cache
"$DIR/venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$MODEL" --runner pooling \
  --served-model-name minilm --host 127.0.0.1 --port "$PORT" --enforce-eager \
  > "$DIR/embed/server.log" 2>&1 &
echo $! > "$DIR/embed/server.pid"
for _ in $(seq 1 300); do
  if curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; then
    echo "vllm embeddings serving http://127.0.0.1:$PORT/v1"
    exit 0
  fi
  kill -0 "$(cat "$DIR/embed/server.pid")" 2> /dev/null || { tail -40 "$DIR/embed/server.log"; exit 1; }
  sleep 1
done
echo "vllm embeddings did not become ready in 300 s"; tail -40 "$DIR/embed/server.log"; exit 1
