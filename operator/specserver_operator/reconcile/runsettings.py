"""The settings one operator process runs with, read once at start-up (``read_settings``).

handlers.configure reads them on kopf's start-up and passes them to the cycle it starts and to
every pass (controller.reconcile, observe, the pure core's render settings); a caller that
brings none gets them read when it calls. Each variable, its flag, default and meaning are the
one table in ``settings`` (the leaf every layer may read); this module only reads them.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from specserver_advisor.cli import argtypes
from specserver_advisor.errors import shown
from specserver_operator.core.podpolicy import PodPolicy
from specserver_operator.reconcile.configsource import HfSettings
from specserver_operator.settings import SETTINGS, cycle_seconds, signal_window_seconds, value


def _default(env: str) -> str:
    return value(env, {})


@dataclass(frozen=True)
class Settings:
    """The operator's settings as read at start-up (``read_settings``); passed down to the cycle
    and each pass (defaults: every variable unset)."""

    hf: HfSettings = field(default_factory=HfSettings)
    pod_policy: PodPolicy = field(default_factory=PodPolicy)
    #: image of the engine pods' preflight init container
    preflight_image: str = field(default_factory=lambda: _default("SPECSERVER_ENGINE_IMAGE"))
    #: a secretKeyRef needs an admission review's grant (secretgrants.py)
    require_secret_approval: bool = True
    #: the Prometheus of SpecServers that name none (None: none)
    prometheus_url: str | None = None
    leader_election: bool = True
    cycle_s: float = 5.0
    query_interval_s: float = 5.0
    signal_window_s: int = 60


def _switch(env: str, environ: Mapping[str, str]) -> bool:
    return value(env, environ).strip().lower() not in ("0", "false", "no")


def _flag(env: str) -> str:
    return next((s.flag for s in SETTINGS if s.env == env), env)


def _checked(env: str, environ: Mapping[str, str], check: Callable[[str], object]) -> None:
    """``check`` (an ``argtypes`` type) on the variable's value; ValueError naming both the
    variable and its flag."""
    raw = value(env, environ).strip()
    try:
        check(raw)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{env} ({_flag(env)}): {exc}") from None


def _seconds(env: str, environ: Mapping[str, str]) -> float:
    raw = value(env, environ).strip()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_INTERVAL_S:  # NaN and inf fail too
        raise ValueError(
            f"{env} must be a number of seconds in (0, {MAX_INTERVAL_S:g}] ({_flag(env)}), "
            f"got {shown(raw[:40])!r}"
        )
    return seconds


#: The longest query interval (a day): anything longer never reads a signal.
MAX_INTERVAL_S = 86_400.0


def read_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The operator's settings from ``environ`` (the process environment when None), now.

    Raises:
        ValueError: a bounded setting out of its range, naming the variable (main.py checks
            both before kopf starts).
    """
    env = os.environ if environ is None else environ
    for port in ("SPECSERVER_METRICS_PORT", "SPECSERVER_WEBHOOK_PORT"):
        _checked(port, env, argtypes.port)
    for address in ("SPECSERVER_METRICS_ADDRESS", "SPECSERVER_WEBHOOK_ADDRESS"):
        if value(address, env).strip():
            _checked(address, env, argtypes.host)
    return Settings(
        hf=HfSettings.from_env(env),
        pod_policy=PodPolicy.from_env(env),
        preflight_image=value("SPECSERVER_ENGINE_IMAGE", env),
        require_secret_approval=_switch("SPECSERVER_REQUIRE_SECRET_APPROVAL", env),
        prometheus_url=value("SPECSERVER_PROMETHEUS_URL", env) or None,
        leader_election=_switch("SPECSERVER_LEADER_ELECTION", env),
        cycle_s=cycle_seconds(env),
        query_interval_s=_seconds("SPECSERVER_QUERY_INTERVAL_SECONDS", env),
        signal_window_s=signal_window_seconds(env),
    )
