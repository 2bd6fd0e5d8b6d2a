#!/usr/bin/env bash
# Starts the vLLM OpenAI-compatible server of install.sh on 127.0.0.1:PORT in the background
# (model name `tiny`), waits until /health answers, and writes DIR/server.pid. Stop it with
# `kill $(cat DIR/server.pid)`.
#
#   scripts/vllm-cpu/serve.sh DIR [PORT=8011]
#
# Structured output uses the guidance backend without free whitespace: with it, every
# `response_format` answer parses (xgrammar let raw control characters into strings).
set -euo pipefail
DIR=${1:?usage: serve.sh DIR [PORT]}
PORT=${2:-8011}
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_CACHE_ROOT=$DIR/vllm-cache
# The module entry point: the `vllm` console script fails because the distribution is named
# vllm-cpu.
"$DIR/venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$DIR/model" \
  --served-model-name tiny --host 127.0.0.1 --port "$PORT" --max-model-len 2048 \
  --enforce-eager \
  --structured-outputs-config '{"backend":"guidance","disable_any_whitespace":true}' \
  > "$DIR/server.log" 2>&1 &
echo $! > "$DIR/server.pid"
for _ in $(seq 1 300); do
  if curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; then
    echo "vllm serving http://127.0.0.1:$PORT/v1"
    exit 0
  fi
  kill -0 "$(cat "$DIR/server.pid")" 2> /dev/null || { tail -40 "$DIR/server.log"; exit 1; }
  sleep 1
done
echo "vllm did not become ready in 300 s"; tail -40 "$DIR/server.log"; exit 1
