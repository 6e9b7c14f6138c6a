"""``specserver-advisor replay`` and ``specserver-advisor fleetsim``: parsers and runners.

Called by ``cli.main``; I/O is reading the observation and policy files (or Prometheus) and
printing. Errors raise ``UsageError`` (exit 2) with the file and line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specserver_advisor.errors import UsageError
from specserver_advisor.models import AutoSpeculation
from specserver_advisor.policy import PolicyContext


def add_parsers(sub: Any) -> None:
    """Register the two subcommands."""
    r = sub.add_parser("replay", help="replay observations through the auto-speculation policy")
    r.add_argument("--policy", type=Path, help="autoSpeculation YAML, or a SpecServer")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--observations", type=Path, help="JSON lines, one observation each")
    src.add_argument("--prometheus", help="Prometheus base URL (range queries)")
    r.add_argument("--specserver", help="NAMESPACE/NAME (with --prometheus)")
    r.add_argument("--since", default="6h")
    r.add_argument("--step", default="30s")
    r.add_argument("--model", help="target (dir or repo id) for the crossover prediction")
    r.add_argument("--draft", help="draft (dir or repo id)")
    r.add_argument("--gpu", help="GPU type for the crossover prediction")
    r.add_argument("--start-mode", choices=["on", "off"], default="on")
    r.add_argument("--format", choices=["table", "jsonl"], default="table")
    f = sub.add_parser("fleetsim", help="compare adaptive, static and oracle on traffic traces")
    f.add_argument("--format", choices=["table", "json"], default="table")
    f.add_argument("--gpu", default="L4", help="modelled card for Qwen3-8B + EAGLE-3 (L4, H100)")


def _context(args: argparse.Namespace, spec: dict[str, Any] | None) -> PolicyContext:
    from specserver_advisor.cli import plan_for
    from specserver_advisor.plan import policy_context
    from specserver_advisor.replay import NEUTRAL_CONTEXT

    model = args.model or ((spec or {}).get("model") or {}).get("path")
    draft = args.draft or ((spec or {}).get("draft") or {}).get("path")
    gpu = args.gpu or ((spec or {}).get("resources") or {}).get("gpuType")
    if not model or not gpu:
        return NEUTRAL_CONTEXT
    try:
        return policy_context(plan_for(model, draft, gpu))
    except UsageError as exc:
        print(
            f"specserver-advisor: note: no crossover prediction ({exc}); load-based "
            "decisions are off",
            file=sys.stderr,
        )
        return NEUTRAL_CONTEXT


def run_replay(args: argparse.Namespace) -> int:
    """Print one decision per observation."""
    from specserver_advisor import replay

    try:
        policy, spec = replay.read_policy(args.policy) if args.policy else (AutoSpeculation(), None)
        if args.observations:
            observations = replay.read_observations(args.observations)
        else:
            observations = _from_prometheus(args)
    except replay.ReplayInputError as exc:
        raise UsageError(str(exc)) from exc
    decisions = replay.replay(observations, policy, _context(args, spec), args.start_mode)
    if args.format == "jsonl":
        for d in decisions:
            print(json.dumps(d.to_json(), sort_keys=True))
    else:
        print(replay.render_table(decisions))
    return 0


def _from_prometheus(args: argparse.Namespace) -> list[Any]:
    from specserver_advisor.loaders import prometheus

    if not args.specserver or "/" not in args.specserver:
        raise UsageError("--prometheus needs --specserver NAMESPACE/NAME")
    namespace, name = args.specserver.split("/", 1)
    try:
        since, step = prometheus.parse_duration(args.since), prometheus.parse_duration(args.step)
        return prometheus.range_observations(args.prometheus, namespace, name, since, step)
    except (ValueError, prometheus.PrometheusReadError) as exc:
        raise UsageError(str(exc)) from exc


def run_fleetsim(args: argparse.Namespace) -> int:
    """Print the fleet simulation."""
    from specserver_advisor import fleetsim
    from specserver_advisor.gpus import UnknownGpuError, lookup_gpu

    try:
        gpu = lookup_gpu(args.gpu).name
    except UnknownGpuError as exc:
        raise UsageError(f"--gpu: {exc}") from exc
    rows = fleetsim.simulate(gpu=gpu)
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(fleetsim.render_table(rows))
    return 0
