"""The children one reconcile pass applies and deletes, per switch strategy.

Called by the pure core (desired.py) with the engine config of the wanted mode and a lookup of
the observed children (observe.py): nothing here reads or writes the cluster. Recreate and
RollingUpdate: one Deployment ``<name>`` and the Service. BlueGreen: ``<name>-on`` and
``<name>-off`` and the Service on the serving mode (bluegreen.py). A Deployment another strategy
left behind is deleted once the current engine is Ready (so changing strategy drops no traffic
that the old Deployment still serves). Rendered children and their hashes are kept per
SpecServer until their inputs change: a steady cycle renders nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.launch.model import EngineConfig
from specserver_advisor.models import SpecServer
from specserver_advisor.policy.model import SpecMode
from specserver_operator.core import bluegreen
from specserver_operator.core.drift import owned_digest, replicas
from specserver_operator.core.hashes import object_hash
from specserver_operator.core.names import child_name
from specserver_operator.core.render import build_blue_green, build_children
from specserver_operator.core.status import deployment_state


@dataclass(frozen=True)
class Child:
    """One desired child by kind, name and content hash (the object is rendered on demand)."""

    kind: str
    name: str
    digest: str
    owned: str  # drift.owned_digest of the rendered object
    replicas: int | None  # a Deployment's desired replicas


@dataclass
class Children:
    """What to write: the desired children, deletions, and a switch under way."""

    apply: list[Child] = field(default_factory=list)
    delete: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)
    switching: str | None = None
    render: Callable[[], list[dict[str, Any]]] = list
    rendered: list[dict[str, Any]] = field(default_factory=list)

    def object(self, child: Child) -> dict[str, Any]:
        """The full object of ``child`` (rendered again: only needed when it must be written)."""
        if not self.rendered:
            self.rendered = self.render()
        for obj in self.rendered:
            if (obj["kind"], obj["metadata"]["name"]) == (child.kind, child.name):
                return obj
        raise LookupError(f"{child.kind} {child.name} is not rendered")


#: Per SpecServer (uid): the inputs of the last rendering and the children's hashes (not the
#: objects: at a thousand SpecServers those would be most of the operator's memory). Owned by
#: the caller's pass cache (passcache.py).
Rendered = dict[str, tuple[tuple[Any, ...], list[Any]]]


def _cached(
    rendered: Rendered,
    uid: str,
    key: tuple[Any, ...],
    render: Callable[[], list[dict[str, Any]]],
) -> list[Child]:
    hit = rendered.get(uid)
    if hit and hit[0] == key:
        return hit[1]
    found = [
        Child(
            o["kind"],
            o["metadata"]["name"],
            object_hash(o),
            owned_digest(o["kind"], o),
            replicas(o) if o["kind"] == "Deployment" else None,
        )
        for o in render()
    ]
    rendered[uid] = (key, found)
    return found


def is_blue_green(body: dict[str, Any]) -> bool:
    auto = (body.get("spec") or {}).get("autoSpeculation") or {}
    return isinstance(auto, dict) and auto.get("switchStrategy") == "BlueGreen"


#: An observed child by kind and name (None: there is none).
Lookup = Callable[[str, str], dict[str, Any] | None]


def serving_deployment(lookup: Lookup, name: str, blue_green: bool) -> dict[str, Any] | None:
    """The engine Deployment that takes the traffic now (what status and the policy read)."""
    name = child_name(name)
    if blue_green:
        mode = bluegreen.serving_mode(lookup("Service", name))
        if mode is not None:
            found = lookup("Deployment", bluegreen.deployment_name(name, mode))
            if found is not None:
                return found
    return lookup("Deployment", name)


def owned(obj: dict[str, Any] | None, uid: str) -> bool:
    refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
    return any(r.get("uid") == uid for r in refs)


def plan_children(
    lookup: Lookup,
    server: SpecServer,
    uid: str,
    cfg: EngineConfig,
    engine_config: Callable[[bool], EngineConfig],
    preflight_image: str,
    strategy: str,
    rendered: Rendered,
) -> Children:
    """The children for ``cfg`` (the wanted mode) under ``strategy``."""
    name = child_name(server.metadata.name or "")
    generation = server.metadata.generation or 0
    out = Children()
    if strategy != "BlueGreen":
        key: tuple[Any, ...] = (generation, cfg.speculative, strategy, preflight_image)
        out.render = lambda: build_children(server, uid, cfg, preflight_image, strategy)
        out.apply = _cached(rendered, uid, key, out.render)
        if deployment_state(lookup("Deployment", name), server.spec.replicas)[0]:
            for mode in bluegreen.MODES:
                left = bluegreen.deployment_name(name, mode)
                if owned(lookup("Deployment", left), uid):
                    out.delete.append(("Deployment", left))
        return out
    want = SpecMode.of(cfg.speculative).value
    old = bluegreen.other(want)
    deployments = {
        m: lookup("Deployment", bluegreen.deployment_name(name, m)) for m in bluegreen.MODES
    }
    ready = {m: deployment_state(d, server.spec.replicas)[0] for m, d in deployments.items()}
    serving = bluegreen.serving_mode(lookup("Service", name))
    the_plan = bluegreen.plan(
        want,
        server.spec.replicas,
        serving,
        ready,
        {m: d is not None for m, d in deployments.items()},
    )
    configs = {want: cfg}
    other_cfg = engine_config(not cfg.speculative)
    if other_cfg.valid:
        configs[old] = other_cfg
    elif owned(deployments[old], uid):
        out.delete.append(("Deployment", bluegreen.deployment_name(name, old)))
    key = (
        "BlueGreen",
        generation,
        tuple(sorted(configs)),
        tuple(sorted(the_plan.replicas.items())),
        the_plan.serve,
        preflight_image,
    )
    out.render = lambda: build_blue_green(
        server, uid, configs, the_plan.replicas, the_plan.serve, preflight_image
    )
    out.apply = _cached(rendered, uid, key, out.render)
    if the_plan.switching:
        out.switching = (
            f"standby {bluegreen.deployment_name(name, want)} is starting; the Service stays "
            f"on {bluegreen.deployment_name(name, old)} until it is Ready"
        )
    elif ready[want] and owned(lookup("Deployment", name), uid):
        out.delete.append(("Deployment", name))
    return out
