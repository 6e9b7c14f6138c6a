"""The launchers and serving resources people run SGLang with (issue 30): wrappers that hand
their argv to SGLang's ServerArgs (``python -m dynamo.sglang``), launches inside ``docker
exec``/``docker run``/``kubectl exec`` with ``bash -c``, OME runtimes, Dynamo graphs and
LeaderWorkerSet workers (which serve no HTTP)."""

from __future__ import annotations

from pathlib import Path

from specserver_advisor.lint.engine import Options, run
from specserver_advisor.lint.model import Diagnostic

SPEC = (
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 "
    "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
)


def lint(path: Path, text: str) -> list[Diagnostic]:
    path.write_text(text)
    return run([path], Options(env={})).diagnostics


def codes(diags: list[Diagnostic]) -> list[tuple[int, str]]:
    return [(d.line, d.code) for d in diags]


def test_dynamo_sglang_is_sglangs_argv_with_dynamos_own_flags(tmp_path: Path) -> None:
    diags = lint(
        tmp_path / "worker.sh",
        f"python3 -m dynamo.sglang --model-path Qwen/Qwen3-8B {SPEC} --endpoint dyn://a.b.c "
        "--migration-limit 3 --use-sglang-tokenizer --cuda-graph-max-bs 8\n",
    )
    # SGLang's resolution applies (the silent 48), its names are checked (the ambiguous
    # prefix); Dynamo's own flags are not SGLang's to reject; a worker binds no SGLang HTTP.
    assert codes(diags) == [(1, "SPEC001"), (1, "SPEC015")]
    assert "ambiguous option: --cuda-graph-max-bs" in diags[1].message


def test_a_launch_inside_docker_exec_or_kubectl_exec_bash_c(tmp_path: Path) -> None:
    diags = lint(
        tmp_path / "run.sh",
        "MODEL=Qwen/Qwen3-8B\n"
        f"docker exec -it sglang bash -c 'python3 -m sglang.launch_server --model-path $M {SPEC} "
        "--max-running-requests 8 --enable-metrics'\n"
        f'kubectl exec pod/x -- bash -lc "python3 -m sglang.launch_server --model-path $MODEL '
        f'{SPEC} --enable-metrics --host 0.0.0.0"\n',
    )
    # Single quotes: $M is the container's (unknown here); in a container without --host the
    # server binds 127.0.0.1. Double quotes: the host expands $MODEL; --max-running-requests unset.
    assert codes(diags) == [(2, "SPEC012"), (2, "INFO002"), (3, "SPEC001")]


def test_an_ome_runtime_leader_and_worker(tmp_path: Path) -> None:
    launch = (
        "[python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-8B, "
        + ", ".join(SPEC.split())
        + ", --max-running-requests, '16'{extra}]"
    )
    diags = lint(
        tmp_path / "runtime.yaml",
        "apiVersion: ome.io/v1beta1\nkind: ServingRuntime\nmetadata: {name: r}\nspec:\n"
        "  engineConfig:\n    leader:\n      runner:\n        name: leader\n"
        "        image: lmsysorg/sglang:v0.5.23-cu129\n"
        f"        command: {launch.format(extra=', --host, 0.0.0.0')}\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n"
        "    worker:\n      runner:\n        name: worker\n"
        "        image: lmsysorg/sglang:latest\n"
        f"        command: {launch.format(extra='')}\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n",
    )
    # The leader lacks --enable-metrics; the worker serves no HTTP (no SPEC011/SPEC012) but its
    # image is still unpinned.
    assert codes(diags) == [(10, "SPEC011"), (15, "POD006")]


def test_a_dynamo_graph_worker_gets_its_gpus_from_the_service(tmp_path: Path) -> None:
    diags = lint(
        tmp_path / "graph.yaml",
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {name: g}\n"
        "spec:\n  services:\n    worker:\n      resources: {limits: {gpu: '1'}}\n"
        "      extraPodSpec:\n        mainContainer:\n"
        "          image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.7.0\n"
        f"          args: [python3, -m, dynamo.sglang, --model-path, Qwen/Qwen3-8B, "
        f"{', '.join(SPEC.split())}, --max-running-requests, '16', --tp, '2']\n",
    )
    # tp 2 on the service's one GPU: POD001 (the service's resources are the container's), and
    # two GPUs without a memory-backed /dev/shm: POD002; no SPEC011/SPEC012 (a Dynamo worker).
    assert codes(diags) == [(10, "POD002"), (11, "POD001")]


def test_docker_run_is_a_launch_in_a_container(tmp_path: Path) -> None:
    diags = lint(
        tmp_path / "run.sh",
        "docker run --gpus all -p 30000:30000 lmsysorg/sglang:v0.5.23-cu129 \\\n"
        "  sglang serve Qwen/Qwen3-8B --max-running-requests 8\n"
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B\n",
    )
    # The published port reaches nothing while SGLang binds 127.0.0.1 in the container; the
    # same launch on the host is not in a container.
    assert codes(diags) == [(1, "SPEC012")]
