#!/usr/bin/env bash
# Launches inside containers: `docker exec ... bash -c '...'` (the form of SGLang's benchmark
# docs that start the server in a running container) and `python -m dynamo.sglang` (NVIDIA
# Dynamo's SGLang worker: its own flags, then SGLang's ServerArgs parse and resolve the rest).
# Written for this corpus, not copied.
# Inside the container the single-quoted $CONC is the container's, unknown here; the flag name
# --cuda-graph-max-bs is still ambiguous in 0.5.23. The launch binds 127.0.0.1 inside the
# container (no --host): unreachable through the published port.
docker exec -it sglang bash -c 'python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B \
  --speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 \
  --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
  --max-running-requests 32 --cuda-graph-max-bs $CONC --enable-metrics'
# Dynamo's worker: --endpoint and --migration-limit are Dynamo's own; SGLang still resets the
# unset --max-running-requests to 48.
python3 -m dynamo.sglang --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 \
  --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 --speculative-num-steps 3 \
  --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
  --endpoint dyn://dynamo.backend.generate --migration-limit 3
