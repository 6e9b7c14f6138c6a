#!/usr/bin/env bash
# A benchmark job script in the shape of InferenceMAX's SGLang launch-and-benchmark scripts
# (github.com/InferenceMAX/InferenceMAX, benchmarks/*_sglang*.sh): the harness exports MODEL,
# TP and CONC, so almost every value is a variable. Written for this corpus, not copied.
# The values are unknowable here; the flag names are not: SGLang 0.5.23 exits on the ambiguous
# --cuda-graph-max-bs (-decode or -prefill?) and on the removed --speculative-skip-dp-mlp-sync
# whatever $CONC and $SKIP hold.
SERVER_LOG=/workspace/server.log
PORT=${PORT:-8888}
python3 -m sglang.launch_server --model-path=$MODEL --host=0.0.0.0 --port=$PORT \
  --trust-remote-code --tensor-parallel-size=$TP \
  --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 \
  --speculative-num-draft-tokens 4 --enable-metrics \
  --cuda-graph-max-bs $CONC --max-running-requests $CONC \
  --speculative-skip-dp-mlp-sync=$SKIP \
  --mem-fraction-static 0.85 > $SERVER_LOG 2>&1 &
