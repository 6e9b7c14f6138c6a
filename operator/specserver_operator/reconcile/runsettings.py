"""The settings one operator process runs with, read once at start-up (``read_settings``).

handlers.configure reads them on kopf's start-up and passes them to the cycle it starts and to
every pass (controller.reconcile, observe, the pure core's render settings); a caller that
brings none gets them read when it calls. Each variable, its flag, default and meaning are the
one table in ``settings`` (the leaf every layer may read); this module only reads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from specserver_operator.core.podpolicy import PodPolicy
from specserver_operator.reconcile.configsource import HfSettings
from specserver_operator.settings import cycle_seconds, signal_window_seconds, value


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


def _seconds(env: str, environ: Mapping[str, str]) -> float:
    raw = value(env, environ).strip()
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{env} must be a number of seconds, got {raw[:40]!r}") from None


def read_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The operator's settings from ``environ`` (the process environment when None), now.

    Raises:
        ValueError: a bounded setting out of its range, naming the variable (main.py checks
            both before kopf starts).
    """
    env = os.environ if environ is None else environ
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
