"""Everything one reconcile pass reads, in one snapshot taken before anything is decided.

``observe`` reads (through a ``cachedclient.PassClient``: the cycle's watch-fed cache, or the
API for a handler's pass) the children a SpecServer may own, the namespace's autoscalers, the
model configs (ConfigMap or endpoint, memoised per generation), the HF token Secret's existence,
and the Prometheus signals the signal thread already fetched; the result is an ``Observed`` the pure
core (desired.py) decides from. Called by controller.reconcile; nothing here writes.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from specserver_advisor.loaders.configchain import ConfigSourceError, ModelConfigs
from specserver_advisor.models import SpecServer, SpecServerSpec
from specserver_operator.core import children, kinds, ownstatus, speccheck
from specserver_operator.core.autopilot import NO_PROMETHEUS_URL
from specserver_operator.core.drift import replicas as replicas_of
from specserver_operator.core.kinds import SCALED_KINDS, STATUS_PENDING_KEY
from specserver_operator.core.names import child_name
from specserver_operator.core.observed import Autoscaler, ChildKey, Observed
from specserver_operator.core.passcache import PassCache, SchedulingRead
from specserver_operator.kube import secretgrants
from specserver_operator.kube.cachedclient import PassClient
from specserver_operator.kube.errors import ApiError, NotFoundError
from specserver_operator.kube.informer import newer
from specserver_operator.reconcile import configsource
from specserver_operator.reconcile.runsettings import Settings
from specserver_operator.reconcile.signals import SignalCache

#: Seconds before a config source that failed is read again (for the same generation).
CONFIG_RETRY_S = 30.0
#: Seconds between checks that the HF token Secret exists (per generation).
SECRET_RECHECK_S = 60.0
#: How often a namespace's HPAs and ScaledObjects are listed.
AUTOSCALER_REFRESH_S = 60.0
#: How often an engine's pods and FailedCreate events are listed while a workload of it is
#: not Ready (never while all are: a fleet at rest lists no pods).
SCHEDULING_REFRESH_S = 10.0
#: The longest interval between those lists while nothing they show changes.
SCHEDULING_MAX_S = 160.0
#: The shortest interval between two lists of one namespace (a SpecServer whose workloads
#: changed after the last list waits at most this long for its own).
SCHEDULING_SHARE_S = 2.0
#: The most SpecServers whose pods one list names (``specserver.io/name in (...)``); past it
#: the list takes every engine pod of the namespace (a selector stays a short URL).
SCHEDULING_NAMES = 64
#: The label every engine pod carries: the SpecServer's child name.
NAME_LABEL = "specserver.io/name"


def child_keys(name: str) -> list[ChildKey]:
    """Every child a SpecServer of this name may own, under any switch strategy and on one
    node (Deployments) or across nodes (LeaderWorkerSets): its workloads and its Service."""
    base = child_name(name)
    return [*children.workload_keys(base), ("Service", base)]


def observe_children(
    client: PassClient, namespace: str, name: str, now_ts: float, memo: PassCache
) -> tuple[dict[ChildKey, dict[str, Any] | None], list[Autoscaler] | None]:
    """The children (and, when an engine workload exists, the namespace's autoscalers). A
    LeaderWorkerSet whose template this operator wrote last, with no write since, is marked
    ``STATUS_PENDING_KEY``: its status is still about the template before (status.lws_state)."""
    found = {}
    for kind, child in child_keys(name):
        obj = client.get(kind, namespace, child)
        key = (kind, namespace, child)
        if obj is not None and key in memo.template_writes:
            if written_since(obj["metadata"].get("resourceVersion"), memo.template_writes[key]):
                memo.template_writes.pop(key, None)  # its controller wrote since
            else:
                obj = {**obj, STATUS_PENDING_KEY: True}
        found[(kind, child)] = obj
    deployed = any(obj is not None for (kind, _), obj in found.items() if kind in SCALED_KINDS)
    return found, autoscalers(client, namespace, now_ts, memo) if deployed else None


def written_since(current: Any, noted: str) -> bool:
    """Whether the object at version ``current`` was written after our write at ``noted``: a
    newer version (KEP-5504), or, where versions do not compare, any other one."""
    order = newer(None if current is None else str(current), noted)
    return order if order is not None else str(current) != noted


def note_template_write(
    memo: PassCache,
    before: dict[str, Any] | None,
    answer: dict[str, Any],
    kind: str,
    namespace: str,
    name: str,
) -> None:
    """After the operator wrote a LeaderWorkerSet: when its generation moved (a new template
    or size), note the resourceVersion of the write (``answer``, the API's), so its status
    counts only once written after it (``observe_children``). Not the cache's copy: the watch
    may already have brought the controller's status write that followed ours, which would
    then read as ours."""
    workload = kinds.KINDS.get(kind)
    if workload is None or not workload.status_after_write or before is None:
        return
    meta = answer["metadata"]
    if meta.get("generation") != before["metadata"].get("generation"):
        memo.template_writes[(kind, namespace, name)] = str(meta.get("resourceVersion"))


def observe(
    client: PassClient,
    body: dict[str, Any],
    now: str,
    now_ts: float,
    settings: Settings,
    signals: SignalCache | None,
    memo: PassCache,
) -> Observed:
    """Read everything the pass decides from (no writes)."""
    meta = body["metadata"]
    ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
    server, invalid = validated(body, memo)
    found, scalers = observe_children(client, ns, name, now_ts, memo)
    configs, config_error, missing, unapproved = None, None, None, None
    if server is not None:
        unapproved = _unapproved_secret(client, server, uid, settings)
        try:
            configs = read_configs(client, server, uid, settings, memo)
        except ConfigSourceError as exc:
            config_error = str(exc)
        else:
            missing = _missing_secret(client, server, uid, now_ts, memo)
    pods, events = scheduling(client, ns, name, uid, found, now_ts, memo)
    metrics = signals.get(ns, child_name(name)) if signals else None  # the pods' name label
    own = memo.own_status[uid] = ownstatus.seen(memo.own_status.get(uid), body.get("status") or {})
    return Observed(
        body=body,
        server=server,
        invalid=invalid,
        configs=configs,
        config_error=config_error,
        children=found,
        autoscalers=scalers,
        missing_secret=missing,
        unapproved_secret=unapproved,
        own_status=own,
        metrics=metrics,
        metrics_error=signals.last_error if signals else NO_PROMETHEUS_URL,
        absent_kinds=memo.absent_kinds,
        pods=pods,
        events=events,
        now=now,
        now_ts=now_ts,
    )


def scheduling(
    client: PassClient,
    namespace: str,
    name: str,
    uid: str,
    found: dict[ChildKey, dict[str, Any] | None],
    now_ts: float,
    memo: PassCache,
) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    """The engine's pods and the namespace's FailedCreate events (``Observed.blocked`` reads
    them), only while an owned engine workload is not Ready; none (and nothing kept) while
    every workload is Ready. One read of the namespace answers every SpecServer in it that
    waits (a thousand Pending engines in one namespace cost one paged LIST, not a thousand):
    read again when a SpecServer's waiting workloads appear or change (their resourceVersions)
    after the last read, at most every SCHEDULING_SHARE_S, and otherwise every
    SCHEDULING_REFRESH_S, doubling up to SCHEDULING_MAX_S while a read finds what the one
    before found. Unreadable (no RBAC): none."""
    waiting = tuple(
        (kind, child, str(obj["metadata"].get("resourceVersion")))
        for (kind, child), obj in found.items()
        if obj is not None
        and kind in SCALED_KINDS
        and children.owned(obj, uid)
        and not kinds.state(obj, replicas_of(obj) or 0)[0]
    )
    if not waiting:
        with memo.lock:
            memo.scheduling.pop(uid, None)
        return (), ()
    child = child_name(name)
    with memo.lock:  # handler passes run beside the cycle's: no iteration of a changing dict
        seen = memo.scheduling.get(uid)
        if seen is None or seen[0] != waiting:
            seen = memo.scheduling[uid] = (waiting, now_ts, namespace, child)
        read = memo.scheduling_reads.get(namespace)
        due = read is None or _read_due(read, seen[1], now_ts, child)
        names = sorted({s[3] for s in memo.scheduling.values() if s[2] == namespace}) if due else []
    if due:
        backing_off = read is not None and read.at >= seen[1]  # nothing new waits: back off
        read = _read_namespace(client, namespace, names, read, backing_off, now_ts)
        with memo.lock:
            memo.scheduling_reads[namespace] = read
    assert read is not None
    return read.pods.get(child, ()), read.events


def _read_due(read: SchedulingRead, changed_at: float, now_ts: float, child: str) -> bool:
    """Whether the namespace is read again: its interval passed (or the clock stepped back),
    or the read is older than a change a SpecServer waits to see explained or did not name
    it (but not twice within SCHEDULING_SHARE_S)."""
    age = now_ts - read.at
    unseen = read.at < changed_at or child not in read.names
    return age < 0 or age >= read.interval or (unseen and age >= SCHEDULING_SHARE_S)


def _read_namespace(
    client: PassClient,
    namespace: str,
    names: list[str],
    prior: SchedulingRead | None,
    backing_off: bool,
    now_ts: float,
) -> SchedulingRead:
    """The engine pods of the SpecServers ``names`` that wait in the namespace (grouped by name
    label, only theirs; every engine pod of the namespace is listed past SCHEDULING_NAMES of
    them) and its FailedCreate events; the interval doubles when backing off and they are
    what ``prior`` found. An unreadable list keeps what ``prior`` found (none: nothing)."""
    try:
        pods, events = client.list_scheduling(
            namespace, names if len(names) <= SCHEDULING_NAMES else None
        )
    except (ApiError, NotFoundError):
        if prior is not None:
            return replace(prior, at=now_ts, interval=SCHEDULING_REFRESH_S)
        pods, events = [], []
    wanted = set(names)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        label = ((pod.get("metadata") or {}).get("labels") or {}).get(NAME_LABEL)
        if label in wanted:
            grouped.setdefault(label, []).append(pod)
    by_name = {k: tuple(v) for k, v in grouped.items()}
    same = (
        backing_off
        and prior is not None
        and prior.pods == by_name
        and prior.events == tuple(events)
    )
    interval = min(prior.interval * 2, SCHEDULING_MAX_S) if same and prior else SCHEDULING_REFRESH_S
    return SchedulingRead(now_ts, by_name, tuple(events), interval, frozenset(names))


def validated(body: dict[str, Any], memo: PassCache) -> tuple[SpecServer | None, str | None]:
    """The SpecServer model (or why the spec is invalid), kept until spec or annotations change."""
    meta = body["metadata"]
    annotations = meta.get("annotations") or {}
    key = (meta.get("generation"), tuple(sorted(annotations.items())))
    hit = memo.validated.get(meta["uid"])
    if hit and hit[0] == key:
        return hit[1], hit[2]
    # The admission webhook's own check, on the spec model identical specs share.
    server, problems = speccheck.parse(body, lambda doc: _parsed(doc, memo))
    invalid = "; ".join(problems[:3]) if problems else None
    memo.validated[meta["uid"]] = (key, server, invalid)
    return server, invalid


def _parsed(body: dict[str, Any], memo: PassCache) -> SpecServer:
    """The SpecServer model of ``body``; its spec model is shared with every SpecServer whose
    spec is the same (a fleet of identical engines keeps one parsed copy, ~5 KB each)."""
    rest = {k: v for k, v in body.items() if k not in ("status", "spec")}
    digest = hashlib.sha256(
        json.dumps(body.get("spec"), sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    spec = memo.specs.get(digest)
    if spec is None:
        try:
            spec = SpecServerSpec.model_validate(body.get("spec"))
        except ValidationError:  # the whole object's validation names the field from spec.
            SpecServer.model_validate({**rest, "spec": body.get("spec")})
            raise
        memo.specs[digest] = spec
    return SpecServer.model_validate({**rest, "spec": spec})  # the instance, not a copy


def read_configs(
    client: PassClient, server: SpecServer, uid: str, settings: Settings, memo: PassCache
) -> ModelConfigs:
    """Model configs from the first source that has them (cached per generation)."""
    key = (uid, server.metadata.generation or 0)
    if key in memo.configs:
        return memo.configs[key]  # type: ignore[no-any-return]
    failed = memo.config_failed.get(key)
    if failed is not None and time.monotonic() < failed[0]:
        raise ConfigSourceError(failed[1])  # an endpoint that failed is not asked every pass
    try:
        configs = _read_configs(client, server, settings, memo)
    except ConfigSourceError as exc:
        memo.config_failed[key] = (time.monotonic() + CONFIG_RETRY_S, str(exc))
        raise
    memo.config_failed.pop(key, None)
    memo.configs[key] = configs
    return configs


def _read_configs(
    client: PassClient, server: SpecServer, settings: Settings, memo: PassCache
) -> ModelConfigs:
    ns = server.metadata.namespace or "default"

    def configmap(name: str) -> dict[str, str]:
        try:
            return client.get_configmap_data(ns, name)
        except NotFoundError as exc:
            raise ConfigSourceError(str(exc)) from exc

    return configsource.read_configs(server.spec, configmap, settings.hf, memo.bundled)


def _unapproved_secret(
    client: PassClient, server: SpecServer, uid: str, settings: Settings
) -> str | None:
    """Why no admission review approved the HF token Secret for this generation (None: one
    did, or no Secret is named, or the admin requires no approval)."""
    src = server.spec.model_source
    ref = src.hf_token_secret_ref if src else None
    if ref is None or not settings.require_secret_approval:
        return None
    generation = server.metadata.generation or 0
    ns = server.metadata.namespace or "default"
    grant = client.get_secret_grant(secretgrants.grant_namespace(), uid, generation)
    if secretgrants.approved(grant, uid, generation, ref.name):
        return None
    return secretgrants.refusal(ns, ref.name, generation)


def _missing_secret(
    client: PassClient, server: SpecServer, uid: str, now_ts: float, memo: PassCache
) -> tuple[str, str] | None:
    """A warning when the HF token Secret the engine pod reads is missing, whatever the config
    source (the pod could not start); checked once a minute per generation, not every pass."""
    src = server.spec.model_source
    ref = src.hf_token_secret_ref if src else None
    if ref is None:
        return None
    key = (uid, server.metadata.generation or 0)
    cached = memo.secrets.get(key)
    if cached and now_ts - cached[0] < SECRET_RECHECK_S:
        return cached[1]
    ns = server.metadata.namespace or "default"
    found: tuple[str, str] | None = None
    try:
        if not client.secret_exists(ns, ref.name):
            found = (
                "SecretNotFound",
                f"Secret {ns}/{ref.name} not found (spec.modelSource.hfTokenSecretRef): the "
                "engine pod cannot start until it exists",
            )
    except ApiError:
        # No `get` on Secrets in this namespace (the default install grants none): unknown.
        found = cached[1] if cached else None
    memo.secrets[key] = (now_ts, found)
    return found


def autoscalers(
    client: PassClient, namespace: str, now_ts: float, memo: PassCache
) -> list[Autoscaler] | None:
    """HPAs/ScaledObjects of a namespace, listed at most once a minute (None if unreadable)."""
    cached = memo.autoscalers.get(namespace)
    if cached and now_ts - cached[0] < AUTOSCALER_REFRESH_S:
        return cached[1]
    try:
        found = client.list_autoscalers(namespace)
    except (ApiError, NotFoundError):
        return cached[1] if cached else None
    memo.autoscalers[namespace] = (now_ts, found)
    return found
