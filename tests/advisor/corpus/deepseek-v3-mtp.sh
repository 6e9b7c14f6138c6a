#!/bin/bash
# DeepSeek-V3 with its MTP layers (NEXTN) on 8 GPUs.
export SGLANG_ENABLE_SPEC_V2=1
NUM_STEPS=3
python3 -m sglang.launch_server \
    --model-path deepseek-ai/DeepSeek-V3 \
    --speculative-algorithm NEXTN \
    --speculative-draft-model-path deepseek-ai/DeepSeek-V3-NextN \
    --speculative-num-steps $NUM_STEPS \
    --speculative-eagle-topk 1 \
    --speculative-num-draft-tokens $((NUM_STEPS + 1)) \
    --tp 8 --trust-remote-code --enable-metrics \
    --host 0.0.0.0 --port 30000
