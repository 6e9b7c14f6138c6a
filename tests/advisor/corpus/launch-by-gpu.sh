#!/bin/sh
# Pick the speculative setup by GPU type; extra flags come from the caller.
MODEL=meta-llama/Llama-3.1-8B-Instruct
COMMON="--model-path $MODEL --enable-metrics --host 0.0.0.0"

start() {
  exec python3 -m sglang.launch_server $COMMON "$@" $EXTRA_SGLANG_ARGS
}

case "$GPU" in
  h100)
    start --speculative-algorithm EAGLE --speculative-num-steps 5 \
      --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 --max-running-requests 64
    ;;
  l4)
    start --speculative-algorithm NGRAM --enable-mixed-chunk --max-running-requests 16
    ;;
  *)
    start --max-running-requests 128
    ;;
esac
