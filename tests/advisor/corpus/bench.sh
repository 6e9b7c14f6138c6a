#!/bin/bash
# Benchmark the server started by serve-qwen3-eagle3.sh.
for c in 1 8 32; do
  python3 -m sglang.bench_serving --backend sglang --port 30000 \
    --dataset-name random --random-input-len 1024 --random-output-len 256 \
    --num-prompts $((c * 10)) --max-concurrency $c
done
