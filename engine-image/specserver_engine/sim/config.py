"""Configuration of the simulated engine: SGLang's own flags plus a few ``--sim-*`` ones.

``simulate`` accepts the same argv as ``serve`` (so a pod runs either unchanged) and plans it
with the advisor's launch model (``launch.launch_from_argv``, the operator's and lint's) exactly
as SGLang 0.5.23 would: the speculative shape, the 48 reset, the KV pool of the chosen GPU.
Called by cli.py; reads model configs through the advisor's loaders.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from specserver_advisor.cli import argtypes
from specserver_advisor.errors import shown
from specserver_advisor.gpus import UnknownGpuError, lookup_gpu
from specserver_advisor.launch.model import Configs, launch_from_argv
from specserver_advisor.loaders.configs import (
    ConfigNotFoundError,
    ConfigUnreadableError,
    load_config,
)
from specserver_advisor.perf.plan import Plan, PlanInputError
from specserver_advisor.sglang.flags import ParsedArgs, parse_server_argv
from specserver_advisor.sglang.memory import sglang_max_running_requests


class SimConfigError(ValueError):
    """The simulator cannot start with these arguments; one line, like argparse."""


@dataclass
class SimConfig:
    """Everything the simulated engine needs, resolved once at start-up."""

    argv: list[str]
    parsed: ParsedArgs
    plan: Plan
    env: dict[str, str]
    time_scale: float
    startup_s: float
    accept_override: float | None
    seed: int
    metrics_format: str = "auto"

    @property
    def speculative(self) -> bool:
        return self.plan.resolution.speculative

    @property
    def host(self) -> str:
        return str(self.parsed.get("host"))

    @property
    def port(self) -> int:
        return int(self.parsed.get("port"))

    @property
    def enable_metrics(self) -> bool:
        return bool(self.parsed.get("enable_metrics"))

    @property
    def model_path(self) -> str:
        return str(self.parsed.get("model_path"))

    @property
    def served_model_name(self) -> str:
        return str(self.parsed.get("served_model_name") or self.model_path)

    @property
    def pool_tokens(self) -> int:
        mem = self.plan.mem
        return (
            mem.kv_pool_tokens_with_draft if self.speculative else mem.kv_pool_tokens_without_draft
        )

    @property
    def context_len(self) -> int:
        return self.plan.context.effective

    @property
    def max_running_requests(self) -> int:
        """What the scheduler admits (the 48 reset included, capped by the pool)."""
        return sglang_max_running_requests(
            self.pool_tokens, self.context_len, self.plan.resolution.get("max_running_requests")
        )

    @property
    def max_prefill_tokens(self) -> int:
        """``--max-prefill-tokens``: the prompt tokens one prefill batch admits (16384)."""
        return int(self.parsed.get("max_prefill_tokens"))

    @property
    def depth(self) -> int:
        return max(1, int(self.plan.resolution.get("speculative_num_draft_tokens") or 2) - 1)

    def resolved_args(self) -> dict[str, Any]:
        """Every field flat with its resolved value, as ``/server_info`` shows them."""
        from specserver_advisor.sglang.flagtable import flag_table

        out: dict[str, Any] = {name: flag.default for name, flag in flag_table().items()}
        out.update(self.parsed.values)
        out.update({name: v.value for name, v in self.plan.resolution.values.items()})
        out["mem_fraction_static"] = self.plan.mem.settings.mem_fraction_static
        out["chunked_prefill_size"] = (
            out.get("chunked_prefill_size") or self.plan.mem.settings.chunked_prefill_size
        )
        out["page_size"] = out.get("page_size") or 1
        return out


def _sim_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specserver-engine simulate", add_help=False)
    p.add_argument("--sim-gpu", default=os.environ.get("SPECSERVER_SIM_GPU", "L4"))
    p.add_argument(
        "--time-scale",
        type=argtypes.real(0, 1e6, low_open=True, name="a time scale"),
        default=1.0,
        help="run this many times faster than the modelled GPU",
    )
    p.add_argument(
        "--sim-startup-seconds",
        type=argtypes.real(0, 86_400, name="seconds"),
        default=5.0,
        help="simulated weight loading: /ready and /health answer 503 meanwhile",
    )
    p.add_argument(
        "--sim-accept-length",
        type=argtypes.real(0, MAX_ACCEPT_LENGTH, low_open=True, name="an accept length"),
        default=None,
    )
    p.add_argument("--sim-seed", type=argtypes.whole(0, 2**63 - 1), default=0)
    p.add_argument(
        "--sim-clock-scale",
        type=argtypes.real(0, 100, low_open=True, name="a clock scale"),
        default=1.0,
        help="GPU clock relative to boost (a clock-locked card computes slower)",
    )
    p.add_argument(
        "--sim-metrics-format",
        choices=["auto", "classic", "openmetrics"],
        default="auto",
        help="auto negotiates like prometheus_client; classic keeps "
        "the sglang: names whatever the scraper asks",
    )
    return p


#: The largest accept length a launch can have (SGLang's most draft tokens, plus one).
MAX_ACCEPT_LENGTH = 1025.0


def _check_listen(parsed: ParsedArgs) -> None:
    """--port within 0-65535 and --host an address or name, before anything binds (a
    traceback at bind otherwise)."""
    port = parsed.values.get("port")
    if port is not None and not (isinstance(port, int) and 0 <= port <= 65535):
        raise SimConfigError(f"argument --port: {shown(port)} is outside [0, 65535]")
    host = parsed.values.get("host")
    if host is not None:
        try:
            argtypes.host(str(host))
        except argparse.ArgumentTypeError as exc:
            raise SimConfigError(f"argument --host: {exc}") from None


def build_sim_config(argv: list[str], env: dict[str, str] | None = None) -> SimConfig:
    """Resolve simulate's argv (raises SimConfigError with a one-line reason)."""
    env = dict(os.environ) if env is None else env
    sim, rest = _sim_parser().parse_known_args(argv)  # a bad --sim-* value: exit 2, named
    parsed = parse_server_argv(rest, positional_model=True)
    if parsed.issues:
        raise SimConfigError(parsed.issues[0].message)
    _check_listen(parsed)
    if "model_path" not in parsed.values:
        raise SimConfigError("the following arguments are required: --model-path")
    try:
        gpu = lookup_gpu(sim.sim_gpu)
        target = load_config(parsed.values["model_path"], parsed.values.get("revision"), env)
        draft_ref = parsed.values.get("speculative_draft_model_path")
        draft = (
            load_config(draft_ref, parsed.values.get("speculative_draft_model_revision"), env)
            if draft_ref
            else None
        )
    except (UnknownGpuError, ConfigNotFoundError, ConfigUnreadableError) as exc:
        raise SimConfigError(str(exc)) from exc
    try:
        launch = launch_from_argv(
            rest,
            env,
            Configs.loaded(target, draft),
            gpu,
            accept_length=sim.sim_accept_length,
            concurrency=[1],
            clock_scale=sim.sim_clock_scale,
        )
    except PlanInputError as exc:  # a value no plan takes (--context-length 10**15)
        raise SimConfigError(str(exc)) from exc
    plan = launch.plan
    assert plan is not None  # the parser accepted these args above
    failed = launch.failure()
    if failed:
        check, message = failed
        raise SimConfigError(message if check == "resolution" else f"ValueError: {message}")
    return SimConfig(
        rest,
        parsed,
        plan,
        env,
        sim.time_scale,
        sim.sim_startup_seconds,
        sim.sim_accept_length,
        sim.sim_seed,
        sim.sim_metrics_format,
    )
