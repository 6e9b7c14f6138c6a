"""The only module with ``@kopf.on.*`` handlers; loaded by ``specserver-operator`` (main.py).

Each handler parses nothing itself: it hands the body to ``controller.reconcile`` (pure
decisions + the client's writes), posts the events it returns and asks kopf to retry later when
a dependency is missing. The same reconcile runs on create, update, resume and a slow timer
(level-based: a deleted child is re-created; nothing changed means nothing written).
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import kopf

from specserver_advisor.models import GROUP, PLURAL, VERSION
from specserver_operator import controller, opmetrics
from specserver_operator.client import KubeClient, load_config
from specserver_operator.signals import SignalCache

ANNOTATION_PREFIX = "specserver.io"
FINALIZER = "specserver.io/finalizer"
RESOURCE = (GROUP, VERSION, PLURAL)
_CLIENT: list[KubeClient] = []


def kube() -> KubeClient:
    """The process-wide client (created after kopf's login settings are in place)."""
    if not _CLIENT:
        load_config()
        _CLIENT.append(KubeClient())
    return _CLIENT[0]


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep kopf's bookkeeping in our own annotations, not in the SpecServer status."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.finalizer = FINALIZER
    settings.posting.enabled = True
    # One replica by design (the Deployment in manifests/ runs one); no peering objects needed.
    settings.peering.standalone = True
    settings.watching.server_timeout = 60
    opmetrics.serve(int(os.environ.get("SPECSERVER_METRICS_PORT", "0")))


_SIGNALS: dict[str, SignalCache] = {}


def signals_for(body: kopf.Body) -> SignalCache | None:
    """The shared signal cache of this SpecServer's Prometheus (one query set per cycle)."""
    spec = body.get("spec") or {}
    url = (spec.get("autoSpeculation") or {}).get("prometheusUrl") or os.environ.get(
        "SPECSERVER_PROMETHEUS_URL"
    )
    if not url:
        return None
    if url not in _SIGNALS:
        interval = float(os.environ.get("SPECSERVER_QUERY_INTERVAL_SECONDS", "5"))
        _SIGNALS[url] = SignalCache(url, min_interval_s=interval)
    cache = _SIGNALS[url]
    cache.refresh()
    opmetrics.QUERY_ERRORS.set(sum(c.query_errors for c in _SIGNALS.values()))
    return cache


def _run(body: kopf.Body) -> None:
    outcome = controller.reconcile(kube(), dict(body), now(), signals=signals_for(body))
    for type_, reason, message in outcome.events:
        kopf.event(body, type=type_, reason=reason, message=message[:1000])
    if outcome.retry:
        raise kopf.TemporaryError(outcome.retry, delay=30)


@kopf.on.create(*RESOURCE, retries=None, backoff=10)
@kopf.on.update(*RESOURCE, retries=None, backoff=10)
@kopf.on.resume(*RESOURCE, retries=None, backoff=10)
def reconcile(body: kopf.Body, **_: Any) -> None:
    """Level-based reconcile of one SpecServer."""
    _run(body)


@kopf.timer(
    *RESOURCE,
    interval=float(os.environ.get("SPECSERVER_TIMER_SECONDS", "5")),
    initial_delay=2,
    idle=2,
)
def observe(body: kopf.Body, **_: Any) -> None:
    """Follow the engine's readiness and repair drift; writes only what changed."""
    _run(body)
