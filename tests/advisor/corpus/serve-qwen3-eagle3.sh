#!/usr/bin/env bash
# Serve Qwen3-8B with an EAGLE-3 draft (the style of SGLang's speculative decoding docs).
set -euo pipefail

MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-8B}
DRAFT_PATH=${DRAFT_PATH:-Tengyunw/qwen3_8b_eagle3}
PORT=${PORT:-30000}
TP=1

ARGS=(
  --model-path "$MODEL_PATH"
  --host 0.0.0.0 --port "$PORT"
  --tp "$TP"
  --mem-frac 0.85
  --enable-metrics
)

if [[ "${USE_SPEC:-1}" == "1" ]]; then
  ARGS+=(
    --speculative-algorithm EAGLE3
    --speculative-draft-model-path "$DRAFT_PATH"
    --speculative-num-steps 3
    --speculative-eagle-topk 1
    --speculative-num-draft-tokens 8
  )
fi

python3 -m sglang.launch_server "${ARGS[@]}" --max-running-requests 32
