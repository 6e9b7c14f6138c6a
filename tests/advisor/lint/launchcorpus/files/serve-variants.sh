#!/usr/bin/env bash
# Launch commands one after another, in the shape of SGLang's own example launch
# scripts (github.com/sgl-project/sglang ms_example/start_server.sh) and of users'
# server scripts (github.com/WittenYeh/LSMCache server.sh): one flag per line.
set -euo pipefail

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --host 0.0.0.0 \
    --port 30000

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 \
    --speculative-num-steps 3 \
    --speculative-eagle-topk 1 \
    --speculative-num-draft-tokens 4 \
    --max-running-requests 32 \
    --enable-metrics

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --cuda-graph-max-bs 8 \
    --host 0.0.0.0

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm EAGLE \
    --max-running-requests 32

python3 -m sglang.launch_server \
    --model-path meta-llama/Llama-3.1-8B-Instruct \
    --host 0.0.0.0 \
    --port 30000 \
    --mem-fraction-static 0.85

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 \
    --speculative-num-steps 3 \
    --speculative-eagle-topk 1 \
    --speculative-num-draft-tokens 4 \
    --host 0.0.0.0

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-skip-dp-mlp-sync \
    --host 0.0.0.0

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --reasoning-parser qwen3 \
    --tool-call-parser qwen25 \
    --host 0.0.0.0

python3 -m sglang.launch_server \
    --model-path meta-llama/Llama-3.1-8B-Instruct \
    --speculative-algorithm EAGLE3 \
    --max-running-requests 16

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --attention-backend flashinfer2 \
    --host 0.0.0.0

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-30B-A3B-Instruct-2507 \
    --tp-size 2 \
    --host 0.0.0.0 \
    --enable-metrics

python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 \
    --host 0.0.0.0
