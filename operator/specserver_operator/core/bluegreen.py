"""The BlueGreen switch strategy (pure): replicas per mode Deployment and where traffic goes.

A SpecServer with ``switchStrategy: BlueGreen`` has two engine Deployments, ``<name>-on`` and
``<name>-off``, and one Service whose selector names the serving mode. To switch, the other
mode's Deployment is scaled up while the Service keeps pointing at the old one; once the new
one is Ready the Service moves and the old one is scaled to zero (it stays, rendered, as the
standby). Called by controller.py each pass with what the cluster shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specserver_advisor.policy.model import SpecMode

MODE_LABEL = "specserver.io/mode"
MODES = (SpecMode.ON.value, SpecMode.OFF.value)


@dataclass(frozen=True)
class BlueGreenPlan:
    """Replicas per mode, the mode the Service selects, and whether a switch is under way."""

    replicas: dict[str, int]
    serve: str
    switching: bool


def deployment_name(name: str, mode: str) -> str:
    return f"{name}-{mode}"


def serving_mode(service: dict[str, Any] | None) -> str | None:
    """The mode the Service selects now (None: no Service yet, or one from another strategy)."""
    selector = ((service or {}).get("spec") or {}).get("selector") or {}
    mode = selector.get(MODE_LABEL)
    return mode if mode in MODES else None


def other(mode: str) -> str:
    return SpecMode(mode).other.value


def plan(
    want: str,
    replicas: int,
    serving: str | None,
    ready: dict[str, bool],
    exists: dict[str, bool],
    recreate: bool = False,
) -> BlueGreenPlan:
    """What to run for the wanted mode, given the serving mode and each Deployment's state.

    The wanted mode takes the traffic at once when it is Ready, already serves, or when nothing
    else can serve (first deploy, or the serving Deployment is gone), or with ``recreate`` (a
    switch blocked for want of GPUs fell back to Recreate: the old mode is scaled to zero first,
    with downtime, so the new one can have its GPUs); otherwise both run and the Service stays
    on the old mode until the new one is Ready.
    """
    old = other(want)
    if recreate or ready.get(want) or serving in (None, want) or not exists.get(old):
        return BlueGreenPlan({want: replicas, old: 0}, want, False)
    return BlueGreenPlan({want: replicas, old: replicas}, old, True)
