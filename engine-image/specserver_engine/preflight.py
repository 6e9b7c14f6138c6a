"""Preflight in the engine pod's init container, on the real model files.

Reads the target and draft ``config.json`` (mounted paths or the HF cache; never the network),
plans the launch with the advisor's launch model (``launch.launch_from_argv``: the resolution,
context check and memory plan the operator and lint use), and, when torch sees a GPU, compares
the KV pool that free memory allows with the requested max-running-requests. Writes one JSON
report to the termination-message path and exits non-zero with a one-line message on a hard
failure, so the operator can put the reason in status. Called by cli.py.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from specserver_advisor.gpus import GPUS, Gpu, UnknownGpuError, lookup_gpu
from specserver_advisor.launch.model import Configs, launch_from_argv
from specserver_advisor.loaders.configs import (
    ConfigNotFoundError,
    ConfigUnreadableError,
    load_config,
)
from specserver_advisor.sglang.flags import parse_server_argv

TERMINATION_LIMIT = 4096  # bytes Kubernetes keeps of a termination message


def detect_gpu() -> dict[str, Any]:
    """What torch sees: count, name, total and free bytes of device 0 (or why nothing)."""
    try:
        import torch  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return {"available": False, "reason": "torch is not installed"}
    try:
        if not torch.cuda.is_available():
            return {"available": False, "reason": "no CUDA device visible"}
        free, total = torch.cuda.mem_get_info(0)
        return {
            "available": True,
            "count": torch.cuda.device_count(),
            "name": torch.cuda.get_device_name(0),
            "free_bytes": int(free),
            "total_bytes": int(total),
        }
    except Exception as exc:  # driver errors surface as several types
        return {"available": False, "reason": f"CUDA error: {exc}"}


def _gpu_for(gpu: dict[str, Any], fallback: str) -> Gpu:
    base = lookup_gpu(fallback) if fallback else next(iter(GPUS.values()))
    if not gpu.get("available"):
        return base
    total_mib = gpu["total_bytes"] // 2**20
    used_gib = (gpu["total_bytes"] - gpu["free_bytes"]) / 2**30
    return replace(
        base,
        name=str(gpu.get("name", base.name)),
        memory_mib=int(total_mib),
        context_overhead_gib=max(0.3, used_gib),
    )


def run(
    args: list[str],
    gpu_type: str,
    require_gpu: bool,
    env: dict[str, str],
    gpu: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    """Check a launch; returns (exit code, report)."""
    report: dict[str, Any] = {"ok": False, "checks": {}}
    parsed = parse_server_argv(args, positional_model=True)
    if parsed.issues:
        return _fail(report, "arguments", parsed.issues[0].message)
    model = parsed.values.get("model_path")
    if not model:
        return _fail(report, "arguments", "no --model-path")
    offline = {k: v for k, v in env.items() if k != "HF_ENDPOINT"}
    try:
        target = load_config(model, parsed.values.get("revision"), offline, use_bundled=False)
        draft_ref = parsed.values.get("speculative_draft_model_path")
        draft = (
            load_config(
                draft_ref,
                parsed.values.get("speculative_draft_model_revision"),
                offline,
                use_bundled=False,
            )
            if draft_ref
            else None
        )
    except (ConfigNotFoundError, ConfigUnreadableError) as exc:
        return _fail(report, "configs", str(exc))
    report["checks"]["configs"] = {
        "target": target.source,
        "draft": draft.source if draft else None,
    }
    gpu = gpu if gpu is not None else detect_gpu()
    report["gpu"] = gpu
    if require_gpu and not gpu.get("available"):
        return _fail(report, "gpu", f"no GPU: {gpu.get('reason')}")
    try:
        card = _gpu_for(gpu, gpu_type)
    except UnknownGpuError as exc:
        return _fail(report, "gpu", str(exc))
    launch = launch_from_argv(args, env, Configs.loaded(target, draft), card, concurrency=[1])
    plan = launch.plan
    assert plan is not None  # the parser accepted these args above
    summary = plan.to_json()
    report["resolved"] = {
        k: summary["resolved"][k]
        for k in (
            "algorithm",
            "num_steps",
            "eagle_topk",
            "num_draft_tokens",
            "max_running_requests",
        )
    }
    report["context"] = {k: summary["context"][k] for k in ("target", "draft", "verdict")}
    report["kv_pool_tokens"] = summary["kv_pool_tokens"]
    failed = launch.failure()
    if failed:
        return _fail(report, *failed)
    mrr = plan.resolution.get("max_running_requests")
    if mrr and plan.fits_on and mrr > plan.fits_on:
        report["warnings"] = [
            f"--max-running-requests {mrr} exceeds the {plan.fits_on} "
            "requests of 512+128 tokens the KV pool holds"
        ]
    report["ok"] = True
    report["message"] = "preflight passed"
    return 0, report


def _fail(report: dict[str, Any], check: str, message: str) -> tuple[int, dict[str, Any]]:
    report["failed_check"] = check
    report["message"] = message
    return 1, report


def write_report(report: dict[str, Any], path: Path) -> None:
    """Write the report (compact, within Kubernetes' termination-message limit)."""
    text = json.dumps(report, separators=(",", ":"), default=str)
    if len(text.encode()) > TERMINATION_LIMIT:
        slim = {k: report[k] for k in ("ok", "message", "failed_check") if k in report}
        text = json.dumps(slim, separators=(",", ":"))[:TERMINATION_LIMIT]
    try:
        path.write_text(text)
    except OSError as exc:
        print(f"specserver-engine: cannot write {path}: {exc}", file=sys.stderr)


def main(args: list[str], gpu_type: str, require_gpu: bool, termination_log: Path) -> int:
    """Run preflight, write the report, print the one-line outcome."""
    code, report = run(args, gpu_type, require_gpu, dict(os.environ))
    write_report(report, termination_log)
    stream = sys.stdout if code == 0 else sys.stderr
    print(f"preflight: {report['message']}", file=stream)
    return code
