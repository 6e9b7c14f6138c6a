"""What the operator keeps between passes, in one object owned by the cycle (cycle.py).

Nothing here is state of record (that lives in the SpecServer status and the children); it
is memoised work, so a pass over an unchanged SpecServer renders and validates nothing. The
cycle passes its ``PassCache`` to every ``controller.reconcile`` and prunes it once a cycle to
the SpecServers and generations that still exist. Results that depend only on a spec and its
model configs are shared between SpecServers with the same ones (a fleet of identical engines
keeps one copy).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

Generation = tuple[str, int]  # (uid, generation)


@dataclass(frozen=True)
class SchedulingRead:
    """One read of a namespace's engine pods (grouped by their ``specserver.io/name`` label)
    and its ``FailedCreate`` events; ``interval``: seconds to the next read while nothing
    changes (observe.scheduling)."""

    at: float
    pods: dict[str, tuple[dict[str, Any], ...]]
    events: tuple[dict[str, Any], ...]
    interval: float
    #: the SpecServers (child names) it was read for
    names: frozenset[str] = frozenset()


@dataclass
class PassCache:
    """Memoised inputs and results per SpecServer (by uid, and generation where it matters)."""

    #: model configs read per generation, and sources that failed: (retry at, why)
    configs: dict[Generation, Any] = field(default_factory=dict)
    config_failed: dict[Generation, tuple[float, str]] = field(default_factory=dict)
    #: bundled configs per (target, draft): one copy however many SpecServers use them
    bundled: dict[tuple[str, str | None], Any] = field(default_factory=dict)
    policy_contexts: dict[Generation, Any] = field(default_factory=dict)
    engine_configs: dict[tuple[str, int, bool], Any] = field(default_factory=dict)
    #: (digest of the spec JSON, id of the configs, what) -> (the configs, kept alive so the
    #: id stays theirs, the result)
    shared: dict[tuple[str, int, str], tuple[Any, Any]] = field(default_factory=dict)
    #: uid -> (generation and annotations, the parsed SpecServer or None, why invalid)
    validated: dict[str, tuple[tuple[Any, ...], Any, str | None]] = field(default_factory=dict)
    #: digest of a spec's JSON -> its parsed model, shared by the SpecServers with that spec
    specs: dict[str, Any] = field(default_factory=dict)
    last_evaluation: dict[str, float] = field(default_factory=dict)
    #: uid -> the signal sample (``Observation.ts``) the policy evaluated last: never twice
    evaluated_sample: dict[str, float] = field(default_factory=dict)
    #: per generation: when the HF token Secret was last checked, and the warning (or None)
    secrets: dict[Generation, tuple[float, tuple[str, str] | None]] = field(default_factory=dict)
    #: namespace -> (listed at, (kind, name, target kind, target name))
    autoscalers: dict[str, tuple[float, list[tuple[str, str, str, str]]]] = field(
        default_factory=dict
    )
    #: uid -> (inputs of the last rendering, the children's kinds, names and digests)
    rendered: dict[str, tuple[tuple[Any, ...], list[Any]]] = field(default_factory=dict)
    #: uid -> resourceVersion of a stored status found canonical: a pass whose fields all
    #: match it reads it as it is instead of merging and comparing (statusmodel.status_plan)
    statuses: dict[str, str] = field(default_factory=dict)
    #: uid -> status.switch and status.policyState as this operator last wrote them (or first
    #: saw them): what it decides from (ownstatus.py)
    own_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: (kind, namespace, name) -> resourceVersion of the operator's own last write of a
    #: LeaderWorkerSet's template: its status is not about that template until someone (its
    #: controller) writes after it (status.lws_state)
    template_writes: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: uid -> (the workloads not Ready, when the pass first saw them so, namespace, child
    #: name): which SpecServers wait for a read of why (observe.scheduling)
    scheduling: dict[str, tuple[tuple[Any, ...], float, str, str]] = field(default_factory=dict)
    #: namespace -> its engine pods (by name label) and FailedCreate events, one read shared by
    #: every SpecServer of the namespace that waits (observe.scheduling)
    scheduling_reads: dict[str, SchedulingRead] = field(default_factory=dict)
    #: optional child kinds the last LIST found no CRD for (client.KubeClient.absent_kinds)
    absent_kinds: frozenset[str] = frozenset()
    lock: threading.RLock = field(default_factory=threading.RLock)

    def clear(self) -> None:
        """Forget everything (a fresh operator starts empty)."""
        with self.lock:
            for value in vars(self).values():
                if isinstance(value, dict):
                    value.clear()

    def prune(self, live: set[Generation]) -> None:
        """Forget SpecServers that are gone and generations that are old."""
        uids = {uid for uid, _ in live}
        with self.lock:
            for cache in (self.configs, self.config_failed, self.policy_contexts, self.secrets):
                for key in [k for k in cache if k not in live]:
                    cache.pop(key, None)
            for config_key in [k for k in self.engine_configs if k[:2] not in live]:
                self.engine_configs.pop(config_key, None)
            used = {id(v) for v in self.policy_contexts.values()}
            used |= {id(v) for v in self.engine_configs.values()}
            for shared_key in [k for k, (_, v) in self.shared.items() if id(v) not in used]:
                self.shared.pop(shared_key, None)
            for by_uid in (
                self.validated,
                self.last_evaluation,
                self.evaluated_sample,
                self.rendered,
                self.statuses,
                self.own_status,
                self.scheduling,
            ):
                for uid in [u for u in by_uid if u not in uids]:
                    by_uid.pop(uid, None)
            waiting = {ns for _, _, ns, _ in self.scheduling.values()}
            for ns in [n for n in self.scheduling_reads if n not in waiting]:
                self.scheduling_reads.pop(ns, None)
            kept = {id(server.spec) for _, server, _ in self.validated.values() if server}
            for digest in [d for d, spec in self.specs.items() if id(spec) not in kept]:
                self.specs.pop(digest, None)
