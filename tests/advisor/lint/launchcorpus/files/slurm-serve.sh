#!/bin/bash
# A Slurm batch script, in the shape of the sbatch launchers of benchmark repositories
# (InferenceMAX's SGLang job scripts): #SBATCH headers, then srun per launch.
#SBATCH --job-name=sglang
#SBATCH --gres=gpu:2
#SBATCH --time=01:00:00
export HF_HOME=/scratch/hf

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --tp-size two \
    --host 0.0.0.0

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm MEDUSA \
    --host 0.0.0.0

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm NGRAM \
    --max-running-requests 16

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --enable-turbo-mode \
    --host 0.0.0.0

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 \
    --speculative-eagle-topk 2 \
    --max-running-requests 8

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --cuda-graph-max-bs-decode 16 \
    --host 0.0.0.0

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm NGRAM \
    --host 0.0.0.0

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm DFLASH \
    --host 0.0.0.0

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-30B-A3B-Instruct-2507 \
    --tp-size 2 \
    --speculative-algorithm EAGLE3 \
    --speculative-draft-model-path lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex \
    --speculative-num-steps 3 \
    --speculative-eagle-topk 1 \
    --speculative-num-draft-tokens 4 \
    --max-running-requests 64

srun --ntasks=1 python3 -m sglang.launch_server \
    --model-path Qwen/Qwen3-8B \
    --speculative-algorithm EAGLE3 \
    --speculative-draft Tengyunw/qwen3_8b_eagle3
