"""Write the launch corpus: SGLang launches in the forms published repositories write them.

Run from the repository root: ``.venv/bin/python tests/advisor/lint/launchcorpus/make.py``.
It writes ``files/`` (one or more files per form, each naming the public source whose shape it
follows; written here, nothing copied) and ``launches.json``: per launch its file, the lines it
spans, the form, the exact argv SGLang would be given (after the launcher), its environment and
GPU. The expected verdicts are not written here: ``tests/oracle/launchcorpus_verdicts.py`` asks
SGLang 0.5.23 itself for each argv and stores ``verdicts.json``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"

QWEN = "Qwen/Qwen3-8B"
QWEN_DRAFT = "Tengyunw/qwen3_8b_eagle3"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MOE = "Qwen/Qwen3-30B-A3B-Instruct-2507"
MOE_DRAFT = "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex"
HOST = ["--host", "0.0.0.0"]
EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", QWEN_DRAFT]
SHAPE = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]
SHAPE += ["--speculative-num-draft-tokens", "4"]

#: The launches (argv after the launcher): valid ones, ones SGLang caps at 48, ones its parser
#: refuses, ones it fails on at resolution or start-up. Which is which is SGLang's to say.
VARIANTS: list[list[str]] = [
    ["--model-path", QWEN, *HOST, "--port", "30000"],
    ["--model-path", QWEN, *EAGLE3, *SHAPE, "--max-running-requests", "32", "--enable-metrics"],
    ["--model-path", QWEN, "--cuda-graph-max-bs", "8", *HOST],
    ["--model-path", QWEN, "--speculative-algorithm", "EAGLE", "--max-running-requests", "32"],
    ["--model-path", LLAMA, *HOST, "--port", "30000", "--mem-fraction-static", "0.85"],
    ["--model-path", QWEN, *EAGLE3, *SHAPE, *HOST],
    ["--model-path", QWEN, "--speculative-skip-dp-mlp-sync", *HOST],
    ["--model-path", QWEN, "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen25", *HOST],
    ["--model-path", LLAMA, "--speculative-algorithm", "EAGLE3", "--max-running-requests", "16"],
    ["--model-path", QWEN, "--attention-backend", "flashinfer2", *HOST],
    ["--model-path", MOE, "--tp-size", "2", *HOST, "--enable-metrics"],
    ["--model-path", QWEN, *EAGLE3, *HOST],
    ["--model-path", QWEN, "--tp-size", "two", *HOST],
    ["--model-path", QWEN, "--speculative-algorithm", "MEDUSA", *HOST],
    ["--model-path", QWEN, "--speculative-algorithm", "NGRAM", "--max-running-requests", "16"],
    ["--model-path", QWEN, "--enable-turbo-mode", *HOST],
    ["--model-path", QWEN, *EAGLE3, "--speculative-eagle-topk", "2", "--max-running-requests", "8"],
    ["--model-path", QWEN, "--cuda-graph-max-bs-decode", "16", *HOST],
    ["--model-path", QWEN, "--speculative-algorithm", "NGRAM", *HOST],
    ["--model-path", QWEN, "--speculative-algorithm", "DFLASH", *HOST],
    [
        *["--model-path", MOE, "--tp-size", "2", "--speculative-algorithm", "EAGLE3"],
        *["--speculative-draft-model-path", MOE_DRAFT, *SHAPE, "--max-running-requests", "64"],
    ],
    ["--model-path", QWEN, "--speculative-algorithm", "EAGLE3", "--speculative-draft", QWEN_DRAFT],
    ["--model-path", LLAMA, "--context-length", "8192", "--chunked-prefill-size", "4096", *HOST],
    ["--model-path", QWEN, *EAGLE3, "--speculative-num-steps", "3", *HOST],
    ["--model-path", QWEN, "--mem-frac", "0.8", *HOST],
]

LAUNCHER = ["python3", "-m", "sglang.launch_server"]


class Corpus:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.next = 0

    def take(self, n: int) -> list[list[str]]:
        out = []
        for _ in range(n):
            out.append(VARIANTS[self.next % len(VARIANTS)])
            self.next += 1
        return out

    out = FILES

    def write(self, name: str, lines: list[str]) -> None:
        (self.out / name).write_text("\n".join(lines) + "\n")

    def add(
        self,
        name: str,
        form: str,
        first: int,
        last: int,
        argv: list[str],
        gpu: str = "H100",
        env: dict[str, str] | None = None,
    ) -> None:
        self.entries.append(
            {
                "file": name,
                "form": form,
                "lines": [first, last],
                "argv": argv,
                "env": env or {},
                "gpu": gpu,
            }
        )


def groups(argv: list[str]) -> list[list[str]]:
    """Flags with their values, one group per line of a multi-line command."""
    out: list[list[str]] = []
    for tok in argv:
        if tok.startswith("--") or not out:
            out.append([tok])
        else:
            out[-1].append(tok)
    return out


def shell_lines(prefix: str, argv: list[str], indent: str = "") -> list[str]:
    parts = [" ".join(g) for g in groups(argv)]
    lines = [f"{indent}{prefix} \\"]
    for k, part in enumerate(parts):
        end = " \\" if k < len(parts) - 1 else ""
        lines.append(f"{indent}    {part}{end}")
    return lines


# ------------------------------------------------------------------------------ the forms


def shell_script(c: Corpus) -> None:
    name = "serve-variants.sh"
    lines = [
        "#!/usr/bin/env bash",
        "# Launch commands one after another, in the shape of SGLang's own example launch",
        "# scripts (github.com/sgl-project/sglang ms_example/start_server.sh) and of users'",
        "# server scripts (github.com/WittenYeh/LSMCache server.sh): one flag per line.",
        "set -euo pipefail",
    ]
    for argv in c.take(12):
        lines.append("")
        first = len(lines) + 1
        lines += shell_lines("python3 -m sglang.launch_server", argv)
        c.add(name, "shell script", first, len(lines), argv)
    c.write(name, lines)


def slurm(c: Corpus) -> None:
    name = "slurm-serve.sh"
    lines = [
        "#!/bin/bash",
        "# A Slurm batch script, in the shape of the sbatch launchers of benchmark repositories",
        "# (InferenceMAX's SGLang job scripts): #SBATCH headers, then srun per launch.",
        "#SBATCH --job-name=sglang",
        "#SBATCH --gres=gpu:2",
        "#SBATCH --time=01:00:00",
        "export HF_HOME=/scratch/hf",
    ]
    for argv in c.take(10):
        lines.append("")
        first = len(lines) + 1
        lines += shell_lines("srun --ntasks=1 python3 -m sglang.launch_server", argv)
        c.add(name, "Slurm script", first, len(lines), argv)
    c.write(name, lines)


def markdown_fences(c: Corpus) -> None:
    name = "README-fences.md"
    lines = [
        "<!-- In the shape of SGLang's documentation and model vendors' READMEs",
        "(github.com/sgl-project/sgl-cookbook README.md): prose, then a fenced launch. -->",
        "# Serving with SGLang",
        "",
        "Install with `pip install sglang`.",
    ]
    for k, argv in enumerate(c.take(12)):
        lines += ["", f"## Recipe {k + 1}", "", "Start the server:", "", "```bash"]
        first = len(lines) + 1
        lines += shell_lines("python3 -m sglang.launch_server", argv)
        c.add(name, "Markdown fence", first, len(lines), argv)
        lines += ["```"]
    c.write(name, lines)


def markdown_inline(c: Corpus) -> None:
    name = "TIPS-inline.md"
    lines = [
        "<!-- In the shape of issue reports and blog posts that quote a launch inline",
        "(github.com/sgl-project/sglang issues: 'I ran `python -m sglang.launch_server ...`'). -->",
        "# Launch tips",
        "",
    ]
    for argv in c.take(10):
        lines.append(f"- Try `python3 -m sglang.launch_server {' '.join(argv)}` on one GPU.")
        c.add(name, "Markdown inline code", len(lines), len(lines), argv)
        lines.append("")
    c.write(name, lines)


def notebook(c: Corpus, name: str, style: str, count: int) -> None:
    """nbformat 4 JSON written line by line (indent 1, as Jupyter saves it)."""
    lines = ["{", ' "cells": [']
    cells: list[tuple[str, list[str], list[str] | None]] = [
        (
            "markdown",
            [
                "In the shape of SGLang's documentation notebooks (github.com/sgl-project/sglang",
                "docs/basic_usage; mirrored in github.com/leslie-fang-intel/torch_script",
                "sglang/test_start_server.py): launch_server_cmd with a triple-quoted command.",
            ],
            None,
        )
    ]
    for argv in c.take(count):
        if style == "cmd":
            src = [
                "from sglang.utils import launch_server_cmd, wait_for_server",
                "",
                "server_process, port = launch_server_cmd(",
                '    """',
                *[ln for ln in shell_lines("python3 -m sglang.launch_server", argv)],
                '"""',
                ")",
                'wait_for_server(f"http://localhost:{port}")',
            ]
        elif style == "bang":
            src = ["!python3 -m sglang.launch_server " + " ".join(argv) + " &"]
        else:
            src = ["import sglang as sgl", "", *engine_call("llm = sgl.Engine(", argv)]
        cells.append(("code", src, argv))
    for k, (kind, src, argv) in enumerate(cells):
        lines += ["  {", f'   "cell_type": "{kind}",']
        if kind == "code":
            lines += ['   "execution_count": null,', '   "metadata": {},', '   "outputs": [],']
        else:
            lines += ['   "metadata": {},']
        lines.append('   "source": [')
        first = len(lines) + 1
        for i, s in enumerate(src):
            piece = s + ("\n" if i < len(src) - 1 else "")
            lines.append("    " + json.dumps(piece) + ("," if i < len(src) - 1 else ""))
        if argv is not None:
            form = {"cmd": "notebook launch_server_cmd", "bang": "notebook ! line"}.get(
                style, "notebook Engine(...)"
            )
            c.add(name, form, first, len(lines), argv)
        lines += ["   ]", "  }" + ("," if k < len(cells) - 1 else "")]
    lines += [
        " ],",
        ' "metadata": {"language_info": {"name": "python"}},',
        ' "nbformat": 4,',
        ' "nbformat_minor": 5',
        "}",
    ]
    c.write(name, lines)


def engine_call(opening: str, argv: list[str]) -> list[str]:
    """``sgl.Engine(model_path=..., tp_size=2)``: each flag as its keyword argument."""
    out = [opening]
    for g in groups(argv):
        key = g[0][2:].replace("-", "_")
        if len(g) == 1:
            out.append(f"    {key}=True,")
        else:
            value = g[1]
            literal = value if value.isdigit() else json.dumps(value)
            if _is_float(value) and not value.isdigit():
                literal = value
            out.append(f"    {key}={literal},")
    out.append(")")
    return out


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def engine_argv(argv: list[str]) -> list[str]:
    """The argv the Engine keywords stand for (numbers written as Python numbers)."""
    return argv


def python_subprocess(c: Corpus) -> None:
    name = "launch_server.py"
    lines = [
        '"""Start SGLang servers as subprocesses, in the shape of training and evaluation repos',
        "that wrap the server (github.com/yxxTries/Pulse LLM/server.py; argv lists handed to",
        'subprocess.Popen)."""',
        "",
        "import subprocess",
        "",
        "",
        "def start_all():",
        "    procs = []",
    ]
    for argv in c.take(10):
        first = len(lines) + 1
        lines.append("    cmd = [")
        lines.append('        "python3", "-m", "sglang.launch_server",')
        for g in groups(argv):
            lines.append("        " + ", ".join(json.dumps(t) for t in g) + ",")
        lines.append("    ]")
        c.add(name, "Python argv list", first, len(lines), argv)
        lines.append("    procs.append(subprocess.Popen(cmd))")
    lines.append("    return procs")
    c.write(name, lines)


def python_strings(c: Corpus) -> None:
    name = "bench_driver.py"
    lines = [
        '"""A benchmark driver that runs each launch as a shell string, in the shape of',
        "benchmark repositories' drivers (os.system / subprocess with shell=True; compare",
        'github.com/leslie-fang-intel/torch_script sglang/test_start_server.py)."""',
        "",
        "import os",
        "import shlex",
        "import subprocess",
        "",
    ]
    for k, argv in enumerate(c.take(10)):
        command = "python3 -m sglang.launch_server " + " ".join(argv)
        if k % 2 == 0:
            line = f"os.system({json.dumps(command + ' &')})"
        else:
            line = f"subprocess.Popen(shlex.split({json.dumps(command)}))"
        lines.append(line)
        c.add(name, "Python command string", len(lines), len(lines), argv)
    c.write(name, lines)


def python_engine(c: Corpus) -> None:
    name = "offline_engine.py"
    lines = [
        '"""Offline engines, in the shape of SGLang\'s offline-engine examples',
        '(github.com/sgl-project/sglang examples/runtime/engine: sgl.Engine(model_path=...))."""',
        "",
        "import sglang as sgl",
        "",
    ]
    for k, argv in enumerate(c.take(10)):
        lines.append("")
        first = len(lines) + 1
        lines += engine_call(f"engine_{k} = sgl.Engine(", argv)
        c.add(name, "Python Engine(...)", first, len(lines), argv)
    c.write(name, lines)


def dockerfiles(c: Corpus) -> None:
    for k, argv in enumerate(c.take(10)):
        name = f"Dockerfile.v{k}"
        lines = [
            "# In the shape of serving images built on lmsysorg/sglang (a model vendor's",
            "# Dockerfile: FROM the SGLang image, then the launch as CMD/ENTRYPOINT).",
            "FROM lmsysorg/sglang:v0.5.23-cu129",
            "ENV HF_HOME=/models",
            "EXPOSE 30000",
        ]
        first = len(lines) + 1
        if k % 2 == 0:
            lines.append('ENTRYPOINT ["python3", "-m", "sglang.launch_server"]')
            lines.append("CMD [" + ", ".join(json.dumps(t) for t in argv) + "]")
            form = "Dockerfile exec form"
        else:
            lines += shell_lines("CMD python3 -m sglang.launch_server", argv)
            form = "Dockerfile shell form"
        c.add(name, form, first, len(lines), argv)
        c.write(name, lines)


def makefile(c: Corpus) -> None:
    name = "Makefile"
    lines = [
        "# Serve targets, in the shape of benchmark repositories' Makefiles (make serve-MODEL",
        "# runs the server in the foreground; variables at the top).",
        "PYTHON ?= python3",
        "PORT = 30000",
        "",
    ]
    for k, argv in enumerate(c.take(10)):
        lines.append(f"serve-{k}:")
        first = len(lines) + 1
        body = shell_lines("$(PYTHON) -m sglang.launch_server", argv)
        lines += ["\t" + ln.lstrip() for ln in body]
        c.add(name, "Makefile recipe", first, len(lines), argv)
        lines.append("")
    c.write(name, lines)


def compose(c: Corpus) -> None:
    name = "docker-compose.yaml"
    lines = [
        "# In the shape of SGLang's docker/compose.yaml (github.com/sgl-project/sglang docker/):",
        "# one service per launch, the command as one string.",
        "services:",
    ]
    for k, argv in enumerate(c.take(10)):
        first = len(lines) + 1
        tp = argv[argv.index("--tp-size") + 1] if "--tp-size" in argv else "1"
        count = tp if tp.isdigit() else "1"
        lines += [
            f"  sglang-{k}:",
            "    image: lmsysorg/sglang:v0.5.23-cu129",
            "    shm_size: 32g",
            "    ipc: host",
            "    command: python3 -m sglang.launch_server " + " ".join(argv),
            "    deploy:",
            "      resources:",
            "        reservations:",
            "          devices:",
            "            - driver: nvidia",
            f"              count: {count}",
            "              capabilities: [gpu]",
        ]
        c.add(name, "compose command", first, len(lines), argv)
    c.write(name, lines)


def kubernetes(c: Corpus) -> None:
    name = "deployments.yaml"
    lines = [
        "# Deployments in the shape of SGLang's Kubernetes examples (github.com/sgl-project/",
        "# sglang docs/references/multi_node_deployment and k8s manifests): command + args.",
    ]
    for k, argv in enumerate(c.take(10)):
        lines.append("---")
        first = len(lines) + 1
        lines += [
            "apiVersion: apps/v1",
            "kind: Deployment",
            "metadata:",
            f"  name: sglang-{k}",
            "spec:",
            "  template:",
            "    spec:",
            "      containers:",
            "        - name: sglang",
            "          image: lmsysorg/sglang:v0.5.23-cu129",
            '          command: ["python3", "-m", "sglang.launch_server"]',
            "          args:",
            *[f"            - {json.dumps(t)}" for t in argv],
            "          resources:",
            "            limits:",
            "              nvidia.com/gpu: 2",
        ]
        c.add(name, "Kubernetes args", first, len(lines), argv)
    c.write(name, lines)


def helm_values(c: Corpus) -> None:
    name = "values.yaml"
    lines = [
        "# Helm chart values in the shape of community SGLang charts: per-model entries whose",
        "# engine command and args the chart's templates render into a Deployment.",
        "models:",
    ]
    for k, argv in enumerate(c.take(10)):
        first = len(lines) + 1
        lines += [
            f"  model{k}:",
            "    replicas: 1",
            "    engine:",
            '      command: ["python3", "-m", "sglang.launch_server"]',
            "      args:",
            *[f"        - {json.dumps(t)}" for t in argv],
        ]
        c.add(name, "Helm values", first, len(lines), argv)
    c.write(name, lines)


def skypilot(c: Corpus) -> None:
    for k, argv in enumerate(c.take(8)):
        name = f"sky-serve-{k}.yaml"
        lines = [
            "# A SkyPilot task in the shape of SkyPilot's SGLang recipe (github.com/skypilot-org/",
            "# skypilot llm/sglang): resources, then the launch in the run block.",
            "resources:",
            "  accelerators: H100:1",
            "  ports: 30000",
            "run: |",
        ]
        first = len(lines) + 1
        lines += shell_lines("python3 -m sglang.launch_server", argv, indent="  ")
        c.add(name, "SkyPilot run", first, len(lines), argv)
        c.write(name, lines)


def github_actions(c: Corpus) -> None:
    name = "serve-smoke.yml"
    lines = [
        "# A GitHub Actions workflow in the shape of SGLang's CI jobs (github.com/sgl-project/",
        "# sglang .github/workflows): a step starts the server in the background.",
        "name: serve-smoke",
        "on: [push]",
        "jobs:",
        "  smoke:",
        "    runs-on: [self-hosted, gpu]",
        "    steps:",
        "      - uses: actions/checkout@v4",
    ]
    for k, argv in enumerate(c.take(10)):
        lines += [f"      - name: serve {k}", "        run: |"]
        first = len(lines) + 1
        lines += shell_lines("python3 -m sglang.launch_server", argv, indent="          ")
        lines[-1] += " &"
        c.add(name, "GitHub Actions run", first, len(lines), argv)
        lines.append("          sleep 5")
    c.write(name, lines)


def ray_json(c: Corpus) -> None:
    name = "ray-serve-config.json"
    lines = ["{", '  "applications": [']
    picked = c.take(8)
    for k, argv in enumerate(picked):
        first = len(lines) + 1
        full = [*LAUNCHER, *argv]
        lines += [
            "    {",
            f'      "name": "sglang-{k}",',
            '      "runtime_env": {"env_vars": {"HF_HOME": "/models"}},',
            '      "server_argv": [',
            *[
                f"        {json.dumps(t)}" + ("," if i < len(full) - 1 else "")
                for i, t in enumerate(full)
            ],
            "      ]",
            "    }" + ("," if k < len(picked) - 1 else ""),
        ]
        c.add(name, "JSON argv list", first, len(lines), argv)
    lines += ["  ],", '  "_shape": "Ray Serve config with an argv list per application"', "}"]
    c.write(name, lines)


def cookbook_generated(c: Corpus) -> None:
    name = "cookbook-qwen-generated.yaml"
    lines = [
        "# SGLang cookbook model YAML, generated form, in the shape of",
        "# github.com/sgl-project/sgl-cookbook data/models/generated/v0.5.6/qwen.yaml.",
        "company: Qwen",
        "families:",
        "- name: Qwen3",
        "  models:",
    ]
    by_model: dict[str, list[list[str]]] = {}
    for argv in c.take(12):
        by_model.setdefault(argv[1], []).append(argv)
    for model, argvs in by_model.items():
        lines += [
            f"  - name: {model.split('/')[-1]}",
            f"    model_path: {model}",
            "    hardware:",
            "      H100:",
            "        configurations:",
        ]
        for k, argv in enumerate(argvs):
            first = len(lines) + 1
            extra = argv[2:]
            tp_given = "--tp-size" in extra
            lines += [
                f"        - name: config-{k}",
                "          attributes:",
                "            nodes: single",
                "          quantized_model_path: null",
                "          engine:",
                "            env_vars: {}",
                f"            tp: {'null' if tp_given else 1}",
                "            dp: null",
                "            extra_args:",
                *[f"            - {json.dumps(' '.join(g))}" for g in groups(extra)],
            ]
            full = ["--model-path", model, *([] if tp_given else ["--tp-size", "1"]), *extra]
            c.add(name, "cookbook generated", first, len(lines), full)
    c.write(name, lines)


def cookbook_source(c: Corpus) -> None:
    name = "cookbook-qwen-src.yaml"
    lines = [
        "# SGLang cookbook model YAML, source form (configurations crossed with the family's",
        "# models and hardware), in the shape of github.com/sgl-project/sgl-cookbook",
        "# data/models/src/v0.5.6/deepseek.yaml.",
        "company: Qwen",
        "",
        "defaults:",
        "  hardware: [H100]",
        "  configurations:",
    ]
    picked = [a for a in c.take(14) if a[1] == QWEN][:10]
    for k, argv in enumerate(picked):
        first = len(lines) + 1
        extra = argv[2:]
        lines += [
            f"    - name: recipe-{k}",
            "      nodes: single",
            "      extra_args:",
            *[f"        - {json.dumps(' '.join(g))}" for g in groups(extra)],
        ]
        c.add(name, "cookbook source", first, len(lines), ["--model-path", QWEN, *extra])
    lines += ["", "families:", "  - name: Qwen3", "    models:", "      - Qwen3-8B"]
    c.write(name, lines)


def config_maps(c: Corpus) -> None:
    for k, argv in enumerate(c.take(6)):
        name = f"sglang-config-{k}.yaml"
        lines = [
            "# An SGLang --config file (sglang serve --config FILE), in the shape of the",
            "# config files SGLang's server_args_config_parser reads: one key per flag.",
        ]
        first = len(lines) + 1
        for g in groups(argv):
            key = g[0][2:]
            if len(g) == 1:
                lines.append(f"{key}: true")
            else:
                lines.append(f"{key}: {json.dumps(g[1])}")
        c.add(name, "SGLang config map", first, len(lines), argv)
        c.write(name, lines)


def main(root: Path = HERE) -> int:
    """Write ``files/`` and ``launches.json`` under ``root`` (the corpus folder by default)."""
    files = root / "files"
    if files.exists():
        shutil.rmtree(files)
    files.mkdir(parents=True)
    c = Corpus()
    c.out = files
    writers: list[Callable[[Corpus], None]] = [
        shell_script,
        slurm,
        markdown_fences,
        markdown_inline,
        lambda c: notebook(c, "serve-cmd.ipynb", "cmd", 10),
        lambda c: notebook(c, "serve-bang.ipynb", "bang", 8),
        lambda c: notebook(c, "engine.ipynb", "engine", 8),
        python_subprocess,
        python_strings,
        python_engine,
        dockerfiles,
        makefile,
        compose,
        kubernetes,
        helm_values,
        skypilot,
        github_actions,
        ray_json,
        cookbook_generated,
        cookbook_source,
        config_maps,
    ]
    for writer in writers:
        writer(c)
    data = {"launcher": LAUNCHER, "launches": c.entries}
    (root / "launches.json").write_text(json.dumps(data, indent=1) + "\n")
    forms = {e["form"] for e in c.entries}
    print(f"wrote {len(c.entries)} launches in {len(forms)} forms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
