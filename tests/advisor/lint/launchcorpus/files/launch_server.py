"""Start SGLang servers as subprocesses, in the shape of training and evaluation repos
that wrap the server (github.com/yxxTries/Pulse LLM/server.py; argv lists handed to
subprocess.Popen)."""

import subprocess


def start_all():
    procs = []
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "--tp-size", "2",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex",
        "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
        "--max-running-requests", "64",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft", "Tengyunw/qwen3_8b_eagle3",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
        "--context-length", "8192",
        "--chunked-prefill-size", "4096",
        "--host", "0.0.0.0",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "Tengyunw/qwen3_8b_eagle3",
        "--speculative-num-steps", "3",
        "--host", "0.0.0.0",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B",
        "--mem-frac", "0.8",
        "--host", "0.0.0.0",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B",
        "--host", "0.0.0.0",
        "--port", "30000",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "Tengyunw/qwen3_8b_eagle3",
        "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
        "--max-running-requests", "32",
        "--enable-metrics",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B",
        "--cuda-graph-max-bs", "8",
        "--host", "0.0.0.0",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3-8B",
        "--speculative-algorithm", "EAGLE",
        "--max-running-requests", "32",
    ]
    procs.append(subprocess.Popen(cmd))
    cmd = [
        "python3", "-m", "sglang.launch_server",
        "--model-path", "meta-llama/Llama-3.1-8B-Instruct",
        "--host", "0.0.0.0",
        "--port", "30000",
        "--mem-fraction-static", "0.85",
    ]
    procs.append(subprocess.Popen(cmd))
    return procs
