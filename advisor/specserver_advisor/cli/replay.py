"""``specserver-advisor replay`` and ``specserver-advisor fleetsim``: parsers and runners.

Called by ``cli.main``; I/O is reading the observation and policy files (or Prometheus) and
printing. Errors raise ``UsageError`` (exit 2) with the file and line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from specserver_advisor.cli.plan import strict_json
from specserver_advisor.errors import UsageError
from specserver_advisor.models import (
    AutoSpeculation,
    BlockedSwitchFallback,
    ModelRef,
    SpecServerSpec,
    SwitchStrategy,
)
from specserver_advisor.policy.model import NEUTRAL_CONTEXT, PolicyContext, SpecMode


def add_parsers(sub: Any) -> None:
    """Register the two subcommands."""
    r = sub.add_parser("replay", help="replay observations through the auto-speculation policy")
    r.add_argument("--policy", type=Path, help="autoSpeculation YAML, or a SpecServer")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--observations", type=Path, help="JSON lines, one observation each")
    src.add_argument("--prometheus", help="Prometheus base URL (range queries)")
    r.add_argument("--specserver", help="NAMESPACE/NAME (with --prometheus)")
    r.add_argument(
        "--prometheus-ca-bundle",
        type=Path,
        metavar="FILE",
        help="PEM CA bundle to verify the Prometheus server with (TLS is always verified; "
        "default: the system's CAs)",
    )
    r.add_argument(
        "--prometheus-bearer-token-file",
        type=Path,
        metavar="FILE",
        help="file holding a bearer token sent to Prometheus (Authorization: Bearer)",
    )
    r.add_argument(
        "--prometheus-headers-file",
        type=Path,
        metavar="FILE",
        help="file of 'Name: value' lines sent with every Prometheus query",
    )
    r.add_argument("--since", default="6h")
    r.add_argument("--step", default="30s")
    r.add_argument("--model", help="target (dir or repo id) for the crossover prediction")
    r.add_argument("--draft", help="draft (dir or repo id)")
    r.add_argument("--gpu", help="GPU type for the crossover prediction")
    r.add_argument("--start-mode", choices=[m.value for m in SpecMode], default=SpecMode.ON.value)
    r.add_argument("--format", choices=["table", "jsonl"], default="table")
    f = sub.add_parser("fleetsim", help="compare adaptive, static and oracle on traffic traces")
    f.add_argument("--format", choices=["table", "json"], default="table")
    f.add_argument("--gpu", default="L4", help="modelled card for Qwen3-8B + EAGLE-3 (L4, H100)")
    f.add_argument(
        "--policy", type=Path, help="autoSpeculation YAML, or a SpecServer (its autoSpeculation)"
    )
    f.add_argument(
        "--switch-strategy",
        choices=[s.value for s in SwitchStrategy],
        help="price switches as this strategy (default: the policy's switchStrategy)",
    )
    f.add_argument(
        "--no-spare-gpu",
        action="store_true",
        help=(
            "no spare GPUs, for every strategy: a BlueGreen standby or RollingUpdate surge pod "
            "stays Pending until the deadline, then the switch is cancelled (Auto backs off) or "
            "falls back to Recreate (--blocked-switch-fallback)"
        ),
    )
    f.add_argument(
        "--blocked-switch-fallback",
        choices=[s.value for s in BlockedSwitchFallback],
        help="what a blocked switch does at its deadline (default: the policy's)",
    )
    f.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="the replica is a group across this many nodes (1..64): its restart is longer",
    )


def _context(args: argparse.Namespace, spec: SpecServerSpec | None) -> PolicyContext:
    """The operator's policy context for the SpecServer (or --model/--draft/--gpu) replayed."""
    from specserver_advisor.launch.model import settle
    from specserver_advisor.loaders.configchain import ConfigSourceError
    from specserver_advisor.loaders.configs import ConfigNotFoundError
    from specserver_advisor.loaders.specserver import configs_for_spec
    from specserver_advisor.sglang.configcheck import check_configs
    from specserver_advisor.sglang.configvalues import ConfigShapeError

    spec = _with_overrides(args, spec)
    if spec is None:
        return NEUTRAL_CONTEXT
    try:
        configs = configs_for_spec(spec, dict(os.environ))
        try:
            check_configs(configs.target, configs.draft)
        except ConfigShapeError as exc:
            where = args.policy or "--model/--draft"
            raise UsageError(f"{where}: {configs.source} model config: {exc}") from exc
        return settle(spec, configs, True).policy
    except ConfigShapeError as exc:  # a config that is there but broken: refused, naming the key
        raise UsageError(str(exc)) from exc
    except (ConfigNotFoundError, ConfigSourceError) as exc:
        print(
            f"specserver-advisor: note: no crossover prediction ({exc}); load-based "
            "decisions are off",
            file=sys.stderr,
        )
        return NEUTRAL_CONTEXT


def _with_overrides(args: argparse.Namespace, spec: SpecServerSpec | None) -> SpecServerSpec | None:
    """The spec with --model/--draft/--gpu applied; one built from them when there is none."""
    if spec is None:
        if not args.model or not args.gpu:
            return None
        return SpecServerSpec.model_validate(
            {
                "model": {"path": args.model},
                "draft": {"path": args.draft} if args.draft else None,
                "speculative": {"algorithm": "EAGLE3" if args.draft else "NEXTN"},
                "resources": {"gpuType": args.gpu},
            }
        )
    update: dict[str, Any] = {}
    if args.model:
        update["model"] = ModelRef(path=args.model)
    if args.draft:
        update["draft"] = ModelRef(path=args.draft)
    if args.gpu:
        update["resources"] = spec.resources.model_copy(update={"gpu_type": args.gpu})
    return spec.model_copy(update=update) if update else spec


def run_replay(args: argparse.Namespace) -> int:
    """Print one decision per observation."""
    from specserver_advisor.replay import replay

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
        for d in decisions:  # strict JSON: an infinite value is written as text
            print(json.dumps(strict_json(d.to_json()), sort_keys=True, allow_nan=False))
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
        access = prometheus.read_access(
            args.prometheus_ca_bundle,
            args.prometheus_bearer_token_file,
            args.prometheus_headers_file,
        )
        return prometheus.range_observations(
            args.prometheus, namespace, name, since, step, access=access
        )
    except (ValueError, prometheus.PrometheusReadError) as exc:
        raise UsageError(str(exc)) from exc


def run_fleetsim(args: argparse.Namespace) -> int:
    """Print the fleet simulation."""
    from specserver_advisor.gpus import UnknownGpuError, lookup_gpu
    from specserver_advisor.replay import fleetsim

    try:
        gpu = lookup_gpu(args.gpu).name
    except UnknownGpuError as exc:
        raise UsageError(f"--gpu: {exc}") from exc
    from specserver_advisor.replay import replay

    try:
        policy = replay.read_policy(args.policy)[0] if args.policy else AutoSpeculation()
    except replay.ReplayInputError as exc:
        raise UsageError(str(exc)) from exc
    if args.switch_strategy:
        policy = policy.model_copy(update={"switch_strategy": SwitchStrategy(args.switch_strategy)})
    if args.blocked_switch_fallback:
        fallback = BlockedSwitchFallback(args.blocked_switch_fallback)
        policy = policy.model_copy(update={"blocked_switch_fallback": fallback})
    from specserver_advisor.replay.fleetworld import MAX_NODES

    if not 1 <= args.nodes <= MAX_NODES:
        raise UsageError(f"--nodes {args.nodes}: expected a node count in 1..{MAX_NODES}")
    rows = fleetsim.simulate(policy, gpu=gpu, spare_gpu=not args.no_spare_gpu, nodes=args.nodes)
    if args.format == "json":
        print(json.dumps(strict_json(rows), indent=2, allow_nan=False))
    else:
        print(fleetsim.render_table(rows))
    return 0
