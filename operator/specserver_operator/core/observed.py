"""One SpecServer and what the cluster and its signals show, at one instant (pure data).

``observe.observe`` takes the snapshot; the pure core (``desired``) decides from it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.models import (
    AutoSpeculation,
    SpecServer,
    SwitchInProgress,
    SwitchKind,
    SwitchStrategy,
)
from specserver_advisor.policy.model import Observation, PolicyState
from specserver_operator.core import children, kinds, policystate, render
from specserver_operator.core.autopilot import NO_PROMETHEUS_URL
from specserver_operator.core.blocked import Blocked
from specserver_operator.core.blocked import blocked as find_blocked

Autoscaler = tuple[str, str, str, str]  # (kind, name, target kind, target name)
ChildKey = tuple[str, str]  # (kind, name)


@dataclass(frozen=True)
class Observed:
    """One SpecServer and what the cluster and its signals show, at one instant."""

    body: dict[str, Any]
    #: the parsed SpecServer (None: invalid, ``invalid`` says why)
    server: SpecServer | None
    invalid: str | None
    #: model configs (None: not read, ``config_error`` says why when a source failed)
    configs: ModelConfigs | None = None
    config_error: str | None = None
    #: every child the SpecServer may own, by (kind, name); None where there is none
    children: dict[ChildKey, dict[str, Any] | None] = field(default_factory=dict)
    #: the namespace's autoscalers (None: not listed or not readable)
    autoscalers: list[Autoscaler] | None = None
    #: (reason, message) when the HF token Secret the engine reads is missing
    missing_secret: tuple[str, str] | None = None
    #: why the HF token Secret may not reach a pod (no grant approves it: secretgrants.py)
    unapproved_secret: str | None = None
    #: status.switch / status.policyState as the operator last wrote them (ownstatus.py)
    own_status: dict[str, Any] | None = None
    #: the newest Prometheus signals for the engine pods (None: none), and why there are none
    metrics: Observation | None = None
    metrics_error: str | None = NO_PROMETHEUS_URL
    now: str = ""
    now_ts: float = 0.0
    #: optional child kinds with no CRD in the cluster (``LeaderWorkerSet``: multi-node
    #: SpecServers cannot run)
    absent_kinds: frozenset[str] = frozenset()
    #: the engine pods and FailedCreate events, read while an engine workload is not Ready
    #: (observe.scheduling; empty otherwise): what ``blocked`` reads
    pods: tuple[dict[str, Any], ...] = ()
    events: tuple[dict[str, Any], ...] = ()

    @property
    def meta(self) -> dict[str, Any]:
        return self.body["metadata"]  # type: ignore[no-any-return]

    @property
    def current(self) -> dict[str, Any]:
        """The status as stored."""
        return dict(self.body.get("status") or {})

    @functools.cached_property
    def policy_state(self) -> PolicyState | None:
        """``status.policyState`` as the policy's state (None: none, or unreadable): parsed
        here, once per snapshot, on first use (a pass that neither evaluates nor rebuilds the
        status reads none); the decision takes it from here, never from the stored dict."""
        return policystate.parse((self.body.get("status") or {}).get("policyState"))

    @functools.cached_property
    def any_switch(self) -> SwitchInProgress | None:
        """``status.switch``, typed (None: no switch under way, or one the schema refuses)."""
        stored = (self.body.get("status") or {}).get("switch")
        if not stored:
            return None
        try:
            return SwitchInProgress.model_validate(stored)
        except ValidationError:
            return None

    @property
    def switch(self) -> SwitchInProgress | None:
        """The speculation switch under way (Auto's; None: none, or a ``nodes`` change)."""
        found = self.any_switch
        return None if found is None or found.kind == SwitchKind.NODES_CHANGE else found

    @property
    def nodes_change(self) -> SwitchInProgress | None:
        """The ``resources.nodes`` change under way or held (nodeschange.py; None: none)."""
        found = self.any_switch
        return found if found is not None and found.kind == SwitchKind.NODES_CHANGE else None

    @property
    def blue_green(self) -> bool:
        """The SpecServer switches BlueGreen (two mode Deployments): from the typed spec, or,
        for a spec that does not parse, from the stored one (what runs is still judged by it)."""
        if self.server is not None:
            policy = self.server.spec.auto_speculation or AutoSpeculation()
            return policy.switch_strategy == SwitchStrategy.BLUE_GREEN
        return children.is_blue_green(self.body)

    @property
    def workload_kind(self) -> str:
        """Deployment (one node) or LeaderWorkerSet (``resources.nodes`` > 1): from the typed
        spec, or, for a spec that does not parse, from the stored one."""
        if self.server is not None:
            return render.workload_kind(self.server)
        resources = (self.body.get("spec") or {}).get("resources") or {}
        nodes = resources.get("nodes") if isinstance(resources, dict) else None
        return kinds.for_nodes(nodes).kind

    def child(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.children.get((kind, name))

    def blocked(self, workload_name: str) -> Blocked | None:
        """Why the engine workload ``workload_name`` (any workload kind) is not Ready, from
        its pods, its conditions and its events (None: it is Ready, absent, or no cause is
        known)."""
        for kind in kinds.WORKLOAD_KINDS:
            workload = self.children.get((kind, workload_name))
            if workload is not None and not kinds.state(workload, _wanted(workload))[0]:
                return find_blocked(workload, list(self.pods), list(self.events))
        return None


def _wanted(workload: dict[str, Any]) -> int:
    value = (workload.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) else 1
