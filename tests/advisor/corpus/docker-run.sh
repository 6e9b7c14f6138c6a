#!/usr/bin/env bash
# docker run with the `sglang serve MODEL` form (no findings: everything is explicit).
docker run --gpus all --shm-size 32g -p 30000:30000 \
  -v ~/.cache/huggingface:/root/.cache/huggingface --ipc=host \
  --env "HF_TOKEN=$HF_TOKEN" \
  lmsysorg/sglang:v0.5.23-cu129 \
  sglang serve Qwen/Qwen3-8B \
    --speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 \
    --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
    --host 0.0.0.0 --enable-metrics --max-running-requests 48 2>&1 | tee sglang.log
