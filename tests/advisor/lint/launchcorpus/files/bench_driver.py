"""A benchmark driver that runs each launch as a shell string, in the shape of
benchmark repositories' drivers (os.system / subprocess with shell=True; compare
github.com/leslie-fang-intel/torch_script sglang/test_start_server.py)."""

import os
import shlex
import subprocess

os.system("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --host 0.0.0.0 &")
subprocess.Popen(shlex.split("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-skip-dp-mlp-sync --host 0.0.0.0"))
os.system("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --reasoning-parser qwen3 --tool-call-parser qwen25 --host 0.0.0.0 &")
subprocess.Popen(shlex.split("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm EAGLE3 --max-running-requests 16"))
os.system("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --attention-backend flashinfer2 --host 0.0.0.0 &")
subprocess.Popen(shlex.split("python3 -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B-Instruct-2507 --tp-size 2 --host 0.0.0.0 --enable-metrics"))
os.system("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 --host 0.0.0.0 &")
subprocess.Popen(shlex.split("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size two --host 0.0.0.0"))
os.system("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm MEDUSA --host 0.0.0.0 &")
subprocess.Popen(shlex.split("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm NGRAM --max-running-requests 16"))
