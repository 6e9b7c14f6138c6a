"""The only module with ``@kopf.on.*`` handlers; loaded by ``specserver-operator`` (main.py).

kopf watches SpecServers, Deployments, LeaderWorkerSets and Services; their watch events fill
the object cache the cycle reads (kube/informer.py), and a SpecServer that is new or has a new
generation, labels or annotations gets an immediate pass through the shared cycle (cycle.py) on
a fresh read. Only ``on.event`` handlers, no change-detection ones: kopf then keeps no diff-base
or progress annotation and writes nothing to any object itself, so a standby replica (leader.py)
is entirely passive and a thousand SpecServers cost no kopf write at start-up. Everything
periodic (following engine readiness, the auto-speculation policy, drift repair, resuming after
a restart) is the shared cycle's: one thread, no per-object timer and therefore no finalizer on
SpecServers.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import kopf

from specserver_advisor.models import GROUP, KIND, PLURAL, VERSION
from specserver_operator.core import kinds
from specserver_operator.kube import kopfdecode, kopfpaging
from specserver_operator.kube.client import LIST_PAGE, KubeClient
from specserver_operator.kube.connection import Connection
from specserver_operator.kube.informer import ObjectCache
from specserver_operator.kube.secretgrants import Recorder, Sweeper, grant_namespace
from specserver_operator.loop.cycle import Cycle
from specserver_operator.loop.leader import Elector
from specserver_operator.metrics import registry as opmetrics
from specserver_operator.reconcile.runsettings import Settings, read_settings
from specserver_operator.settings import value

RESOURCE = (GROUP, VERSION, PLURAL)
#: Namespaces to watch (set by main.py before kopf starts); empty: the whole cluster.
NAMESPACES: list[str] = []
_CYCLE: list[Cycle] = []
_STOP = threading.Event()
_LOGGED_IN = threading.Event()
_CONNECTION: list[Connection] = []
_WEBHOOK: list[Any] = []  # the Webhook, once started (webhook/service.py)
#: The operator's settings, read on kopf's start-up (``configure``).
_SETTINGS: list[Settings] = []
#: Seconds an idle kopf worker lives after its object's last event (``configure``).
IDLE_WORKER_S = 0.5


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's own minimal logins (service account in a pod, else the kubeconfig); our client
    uses the same credentials, so the official client library is never imported."""
    info = kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)
    if info is not None:
        _CONNECTION[:] = [Connection.from_kopf(info)]
        _LOGGED_IN.set()
    return info


def operator_settings() -> Settings:
    """The settings read at start-up (``configure``; read now if it has not run yet)."""
    if not _SETTINGS:
        _SETTINGS.append(read_settings())
    return _SETTINGS[0]


def new_cycle(client: KubeClient, settings: Settings) -> Cycle:
    """The operator's cycle over ``client`` with the start-up ``settings``."""
    return Cycle(
        client,
        settings,
        list(NAMESPACES),
        cache=CACHE,
        elector=Elector(client) if settings.leader_election else None,
    )


def cycle() -> Cycle:
    """The process-wide cycle (its client is created once kopf has logged in)."""
    if not _CYCLE:
        _LOGGED_IN.wait()
        _CYCLE.append(new_cycle(KubeClient(_CONNECTION[0]), operator_settings()))
    return _CYCLE[0]


def _run_cycle(interval: float) -> None:
    shared = cycle()  # waits for kopf's login (so never on kopf's start-up handler)
    # Stale Secret grants are deleted on a thread of their own, a bounded batch at a time,
    # never on the shared cycle (secretgrants.Sweeper).
    sweeper = Sweeper(shared.grants, shared.client, grant_namespace())
    threading.Thread(
        target=sweeper.run_forever, args=(_STOP,), name="specserver-grant-sweeper", daemon=True
    ).start()
    shared.run_forever(_STOP, interval)


def _run_webhook() -> None:
    # Imported only when the webhook is on: its certificates need `cryptography` (~8 MB RSS).
    from specserver_operator.webhook.service import Webhook

    # record_grant: where an allowed, authenticated review's Secret grant is recorded.
    hook = Webhook.from_env(
        cycle().client, record_grant=Recorder(cycle().client, grant_namespace())
    )
    _WEBHOOK[:] = [hook]
    hook.serve(_STOP)


def tune(settings: kopf.OperatorSettings) -> None:
    """kopf's settings for this operator (``configure``): it posts nothing, elects no leader,
    lists in pages and keeps no idle worker."""
    settings.posting.enabled = False  # events are posted by client.post_event
    # Leader election is the cycle's own Lease (leader.py), not kopf peering.
    settings.peering.standalone = True
    settings.watching.server_timeout = 60
    # kopf's own initial LIST of each watched kind in pages, as client.py lists: at a thousand
    # SpecServers a whole list of Deployments parsed at once was the operator's peak RSS.
    settings.watching.chunk_size = LIST_PAGE
    # kopf's per-object worker keeps its object's last raw event (the whole body, managedFields
    # and all) while it waits for the next one: 5 s by default, so with a status write per
    # SpecServer per cycle every object's full body stayed alive through the write phase and
    # set the RSS high-water mark. The handlers cache a trimmed copy at once (kube/informer.py),
    # so a worker has nothing to wait for.
    settings.queueing.idle_timeout = IDLE_WORKER_S


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Start the metrics and the cycle (kopf itself keeps and posts nothing: no change-detection
    handlers, so no diff-base or progress annotation)."""
    tune(settings)
    _SETTINGS[:] = [read_settings()]  # the environment as it is now, at start-up
    kopfpaging.install()  # a page whose continue token expired restarts the listing
    kopfdecode.install()  # one object too deep to decode is skipped, not the end of the process
    opmetrics.serve(int(value("SPECSERVER_METRICS_PORT")), value("SPECSERVER_METRICS_ADDRESS"))
    if int(value("SPECSERVER_WEBHOOK_PORT")):
        threading.Thread(target=_run_webhook, name="specserver-webhook-upkeep", daemon=True).start()
    interval = operator_settings().cycle_s
    _STOP.clear()
    threading.Thread(
        target=_run_cycle, args=(interval,), name="specserver-cycle", daemon=True
    ).start()


@kopf.on.probe(id="cycle")
def cycle_is_running(**_: Any) -> str:
    """``/healthz`` fails (HTTP 500) when no cycle completed within a few intervals."""
    interval = operator_settings().cycle_s
    if not _CYCLE:
        return "starting"
    if not _CYCLE[0].healthy(interval):
        raise kopf.PermanentError("no observation cycle completed within four intervals")
    return "cycling"


@kopf.on.probe(id="webhook")
def webhook_answers(**_: Any) -> str:
    """``/healthz`` fails when the webhook is on and cannot answer reviews (its serving thread
    dead, its event loop stalled, every review worker stuck past its deadline)."""
    if not int(value("SPECSERVER_WEBHOOK_PORT")):
        return "off"
    if not _WEBHOOK:
        return "starting"
    problem = _WEBHOOK[0].health()
    if problem:
        raise kopf.PermanentError(problem)
    return "answering"


@kopf.on.probe(id="leader")
def leader_state(**_: Any) -> str:
    """``/healthz`` says whether this replica leads, stands by, or cannot take part (403)."""
    elector = _CYCLE[0].elector if _CYCLE else None
    if elector is None:
        return "starting" if not _CYCLE else "no election"
    if elector.forbidden:
        return f"forbidden: {elector.forbidden}"
    return "leading" if elector.leading() else "standby"


@kopf.on.cleanup()
def stop_cycle(**_: Any) -> None:
    """Stop the cycle thread after its current pass and hand the Lease over at once."""
    _STOP.set()
    if _CYCLE and _CYCLE[0].elector is not None:
        _CYCLE[0].elector.release()


#: Filled by the watch events below; the cycle reads it (no LIST per cycle).
CACHE = ObjectCache()
MANAGED = {"app.kubernetes.io/managed-by": "specserver"}


@kopf.on.event(*RESOURCE)
async def specserver_seen(event: kopf.RawEvent, **_: Any) -> None:
    """Cache the event; a new object or spec (not the initial listing, which the first cycle
    covers) gets an immediate pass in a worker thread."""
    changed = CACHE.observe(KIND, dict(event))
    if changed and event.get("type") in ("ADDED", "MODIFIED"):
        meta = event["object"]["metadata"]
        if not meta.get("deletionTimestamp"):
            args = (meta["namespace"], meta["name"], meta["uid"])
            await asyncio.get_running_loop().run_in_executor(None, immediate_pass, *args)


def _watch_workloads(kind: kinds.WorkloadKind) -> None:
    """Watch one workload kind of the table (kinds.py) into the cache; kopf serves none of a
    CustomResource kind while its CRD is absent (LeaderWorkerSet: multi-node engines)."""

    async def seen(event: kopf.RawEvent, **_: Any) -> None:
        CACHE.observe(kind.kind, dict(event))

    seen.__name__ = seen.__qualname__ = f"{kind.kind.lower()}_seen"
    kopf.on.event(kind.group, kind.version, kind.plural, labels=MANAGED, id=seen.__name__)(seen)


for _kind in kinds.KINDS.values():
    _watch_workloads(_kind)


@kopf.on.event("v1", "services", labels=MANAGED)
async def service_seen(event: kopf.RawEvent, **_: Any) -> None:
    CACHE.observe("Service", dict(event))


def immediate_pass(namespace: str, name: str, uid: str) -> None:
    """An immediate, level-based pass for a new or changed SpecServer (its faults are the
    pass's own: ``Cycle.guarded_pass``)."""
    cycle().immediate_pass(namespace, name, uid)
