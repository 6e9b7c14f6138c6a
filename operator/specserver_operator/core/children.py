"""The children one reconcile pass applies and deletes, per switch strategy.

Called by the pure core (desired.py) with the engine config of the wanted mode and a lookup of
the observed children (observe.py): nothing here reads or writes the cluster. Recreate and
RollingUpdate: one Deployment ``<name>`` (across nodes: a LeaderWorkerSet ``<name>-lws``) and
the Service. BlueGreen: ``<name>-on`` and ``<name>-off`` (Deployments or LeaderWorkerSets) and
the Service on the serving mode (bluegreen.py). A workload another strategy or kind left behind
is deleted once the current engine is Ready (so changing strategy or ``resources.nodes`` drops
no traffic that the old workload still serves: until then a multi-node Service also selects the
old Deployment's pods). Rendered children and their hashes are kept per
SpecServer until their inputs change: a steady cycle renders nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.launch.model import EngineConfig
from specserver_advisor.models import SpecServer
from specserver_advisor.policy.model import SpecMode
from specserver_operator.core import bluegreen, kinds, render
from specserver_operator.core.drift import SCALED_KINDS, owned_digest
from specserver_operator.core.drift import replicas as replicas_of
from specserver_operator.core.hashes import object_hash
from specserver_operator.core.names import child_name
from specserver_operator.core.nodeschange import Phase, Seen, nodes_of
from specserver_operator.core.render import build_blue_green, build_children
from specserver_operator.core.status import deployment_state


@dataclass(frozen=True)
class Child:
    """One desired child by kind, name and content hash (the object is rendered on demand)."""

    kind: str
    name: str
    digest: str
    owned: str  # drift.owned_digest of the rendered object
    replicas: int | None  # a workload's desired replicas (LeaderWorkerSet: groups)


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
            replicas_of(o) if o["kind"] in SCALED_KINDS else None,
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


def serving_workload(
    lookup: Lookup, name: str, blue_green: bool, kind: str = render.DEPLOYMENT
) -> dict[str, Any] | None:
    """The engine workload (a Deployment, or a LeaderWorkerSet: ``kind``) that takes the
    traffic now (what status and the policy read)."""
    name = child_name(name)
    if blue_green:
        mode = bluegreen.serving_mode(lookup("Service", name))
        if mode is not None:
            found = lookup(kind, bluegreen.deployment_name(name, mode))
            if found is not None:
                return found
    return lookup(kind, kinds.of(kind).single_name(name))


def new_engine(server: SpecServer, blue_green: bool, target: SpecMode) -> str:
    """The name of the workload a switch to ``target`` starts (the one whose pods may be
    blocked): BlueGreen's standby ``<name>-<mode>``, else the one workload."""
    if blue_green:
        return bluegreen.deployment_name(child_name(server.metadata.name or ""), target.value)
    return render.workload_name(server)


def workload_keys(name: str) -> list[tuple[str, str]]:
    """Every engine workload a SpecServer (base name ``name``) may own, any strategy or kind."""
    modes = [bluegreen.deployment_name(name, m) for m in bluegreen.MODES]
    return [
        key
        for kind in kinds.KINDS.values()
        for key in [(kind.kind, kind.single_name(name)), *[(kind.kind, m) for m in modes]]
    ]


def _leftovers(
    lookup: Lookup, name: str, uid: str, keep: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Owned workloads another strategy or kind left behind (not in ``keep``)."""
    return [k for k in workload_keys(name) if k not in keep and owned(lookup(*k), uid)]


def _other_kind_serves(
    lookup: Lookup, leftovers: list[tuple[str, str]], kind: str, replicas: int
) -> bool:
    """Whether a workload of the other kind (the one a change of ``resources.nodes`` leaves)
    is Ready with pods: then the Service keeps selecting it too until the new one is Ready."""
    for other_kind, other in leftovers:
        found = lookup(other_kind, other)
        scaled_up = found is not None and (replicas_of(found) or 0) > 0
        if other_kind != kind and scaled_up and deployment_state(found, replicas)[0]:
            return True
    return False


def _idle(serving: dict[str, Any] | None, wanted: dict[str, Any] | None) -> bool:
    """The serving mode serves nothing (no Ready replica) and the wanted one is scaled to zero:
    what a BlueGreen switch that fell back to Recreate and failed leaves. Starting the wanted
    mode beside it would wait for GPUs the idle one holds: it is freed first instead."""
    if serving is None or wanted is None or (replicas_of(wanted) or 0) > 0:
        return False
    return int((serving.get("status") or {}).get("readyReplicas") or 0) == 0


def _held(out: Children, lookup: Lookup, uid: str, new: list[tuple[str, str]]) -> Children:
    """A cancelled ``nodes`` change: the new kind's workloads are not written (those there are
    deleted), the old kind is left as it runs (neither written nor deleted)."""
    out.apply = [c for c in out.apply if (c.kind, c.name) not in new]
    out.delete = [k for k in new if owned(lookup(*k), uid)]
    out.switching = None
    return out


def nodes_seen(lookup: Lookup, server: SpecServer, uid: str, blue_green: bool) -> Seen:
    """What a ``resources.nodes`` change (nodeschange.py) needs of what runs: whether the spec's
    kind of workload is Ready, and the other kind's workload that serves (Ready pods)."""
    kind, replicas = render.workload_kind(server), server.spec.replicas
    new = serving_workload(lookup, server.metadata.name or "", blue_green, kind)
    new_ready = replicas == 0 or (new is not None and deployment_state(new, replicas)[0])
    name = child_name(server.metadata.name or "")
    for other_kind, other in workload_keys(name):
        found = lookup(other_kind, other)
        if other_kind == kind or found is None or not owned(found, uid):
            continue
        ready = int((found.get("status") or {}).get("readyReplicas") or 0)
        if (replicas_of(found) or 0) > 0 and ready > 0:
            return Seen(new_ready, (other_kind, other), nodes_of(found))
    return Seen(new_ready, None)


def live_queues(lookup: Lookup, keys: list[tuple[str, str]]) -> tuple[Any, ...]:
    """The Kueue labels each live workload of ``keys`` carries (part of a rendering's key)."""
    out = []
    for kind, name in keys:
        live = kinds.queue_labels_of(lookup(kind, name))
        out.append((kind, name, None if live is None else tuple(sorted(live.items()))))
    return tuple(out)


def keeping_queues(
    lookup: Lookup, render: Callable[[], list[dict[str, Any]]]
) -> Callable[[], list[dict[str, Any]]]:
    """``render`` with each workload that already exists keeping the Kueue labels it has:
    Kueue refuses a change of ``kueue.x-k8s.io/queue-name`` on an existing workload (and its
    webhook copies it into the pod template itself), so a new ``spec.scheduling`` applies to
    the next workload created, never as an update that would fail on every pass."""

    def rendered() -> list[dict[str, Any]]:
        objs = render()
        for obj in objs:
            if obj["kind"] in kinds.KINDS:
                live = kinds.queue_labels_of(lookup(obj["kind"], obj["metadata"]["name"]))
                if live is not None:
                    kinds.set_queue_labels(obj, live)
        return objs

    return rendered


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
    recreate: bool = False,
    nodes: Phase | None = None,
) -> Children:
    """The children for ``cfg`` (the wanted mode) under ``strategy``; ``recreate``: a blocked
    switch fell back to Recreate (switching.py), so the old engine's GPUs are freed first
    (BlueGreen: the old mode scaled to zero and the Service moved at once; RollingUpdate: no
    surge pod). ``nodes``: a ``resources.nodes`` change's phase (nodeschange.py): Held keeps
    the old kind serving and deletes the new kind's workload; Recreate deletes the old kind
    first."""
    name = child_name(server.metadata.name or "")
    generation = server.metadata.generation or 0
    kind, replicas = render.workload_kind(server), server.spec.replicas
    out = Children()
    if strategy != "BlueGreen":
        current = (kind, render.workload_name(server))
        serves = deployment_state(lookup(*current), replicas)[0]
        leftovers = _leftovers(lookup, name, uid, [current])
        leader = nodes == Phase.RECREATE or not (
            kinds.of(kind).waits_for_other_kind
            and not serves
            and _other_kind_serves(lookup, leftovers, kind, replicas)
        )
        surge = 0 if recreate else None
        key: tuple[Any, ...] = (
            generation,
            cfg.speculative,
            strategy,
            preflight_image,
            leader,
            surge,
            live_queues(lookup, [current]),
        )
        out.render = keeping_queues(
            lookup,
            lambda: build_children(server, uid, cfg, preflight_image, strategy, leader, surge),
        )
        out.apply = _cached(rendered, uid, key, out.render)
        if nodes == Phase.HELD:
            return _held(out, lookup, uid, [current])
        if serves or nodes == Phase.RECREATE:
            out.delete += leftovers
        return out
    want = SpecMode.of(cfg.speculative).value
    old = bluegreen.other(want)
    deployments = {m: lookup(kind, bluegreen.deployment_name(name, m)) for m in bluegreen.MODES}
    ready = {m: deployment_state(d, replicas)[0] for m, d in deployments.items()}
    mine = [(kind, bluegreen.deployment_name(name, m)) for m in bluegreen.MODES]
    leftovers = _leftovers(lookup, name, uid, mine)
    leader = nodes == Phase.RECREATE or not (
        kinds.of(kind).waits_for_other_kind
        and not ready[want]
        and _other_kind_serves(lookup, leftovers, kind, replicas)
    )
    serving = bluegreen.serving_mode(lookup("Service", name))
    the_plan = bluegreen.plan(
        want,
        server.spec.replicas,
        serving,
        ready,
        {m: d is not None for m, d in deployments.items()},
        recreate=recreate or _idle(deployments.get(serving or ""), deployments[want]),
    )
    configs = {want: cfg}
    other_cfg = engine_config(not cfg.speculative)
    if other_cfg.valid:
        configs[old] = other_cfg
    elif owned(deployments[old], uid):
        out.delete.append((kind, bluegreen.deployment_name(name, old)))
    key = (
        "BlueGreen",
        generation,
        tuple(sorted(configs)),
        tuple(sorted(the_plan.replicas.items())),
        the_plan.serve,
        preflight_image,
        leader,
        live_queues(lookup, mine),
    )
    out.render = keeping_queues(
        lookup,
        lambda: build_blue_green(
            server, uid, configs, the_plan.replicas, the_plan.serve, preflight_image, leader
        ),
    )
    out.apply = _cached(rendered, uid, key, out.render)
    if nodes == Phase.HELD:
        return _held(out, lookup, uid, mine)
    if nodes == Phase.RECREATE:
        out.delete += leftovers
    if the_plan.switching:
        out.switching = (
            f"standby {bluegreen.deployment_name(name, want)} is starting; the Service stays "
            f"on {bluegreen.deployment_name(name, old)} until it is Ready"
        )
    elif ready[want]:
        out.delete += leftovers
    return out
