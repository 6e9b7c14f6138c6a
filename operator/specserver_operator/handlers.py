"""The only module with ``@kopf.on.*`` handlers; loaded by ``specserver-operator`` (main.py).

kopf watches SpecServers and calls ``reconcile`` on create and on every spec change, which runs
an immediate pass through the shared cycle (cycle.py) on a fresh read. Everything periodic
(following engine readiness, the auto-speculation policy, drift repair, resuming after a
restart) is the shared cycle's: one thread, one LIST per kind per cycle, no per-object timer
and therefore no finalizer on SpecServers.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import kopf

from specserver_advisor.models import GROUP, PLURAL, VERSION
from specserver_operator import opmetrics
from specserver_operator.client import KubeClient, load_config
from specserver_operator.cycle import Cycle

ANNOTATION_PREFIX = "specserver.io"
RESOURCE = (GROUP, VERSION, PLURAL)
#: Namespaces to watch (set by main.py before kopf starts); empty: the whole cluster.
NAMESPACES: list[str] = []
_CYCLE: list[Cycle] = []
_STOP = threading.Event()


def cycle() -> Cycle:
    """The process-wide cycle (its client is created after kopf's login settings)."""
    if not _CYCLE:
        load_config()
        _CYCLE.append(
            Cycle(
                KubeClient(),
                list(NAMESPACES),
                query_interval_s=float(os.environ.get("SPECSERVER_QUERY_INTERVAL_SECONDS", "5")),
            )
        )
    return _CYCLE[0]


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep kopf's bookkeeping in our own annotations; start the metrics and the cycle."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX
    )
    settings.posting.enabled = False  # events are posted by client.post_event
    # One replica by design (the Deployment in manifests/ runs one); no peering objects needed.
    settings.peering.standalone = True
    settings.watching.server_timeout = 60
    opmetrics.serve(int(os.environ.get("SPECSERVER_METRICS_PORT", "0")))
    interval = float(os.environ.get("SPECSERVER_CYCLE_SECONDS", "5"))
    _STOP.clear()
    threading.Thread(
        target=cycle().run_forever, args=(_STOP, interval), name="specserver-cycle", daemon=True
    ).start()


@kopf.on.cleanup()
def stop_cycle(**_: Any) -> None:
    """Let the cycle thread finish its current pass and stop."""
    _STOP.set()


@kopf.on.create(*RESOURCE, retries=None, backoff=10)
@kopf.on.update(*RESOURCE, retries=None, backoff=10)
def reconcile(body: kopf.Body, **_: Any) -> None:
    """An immediate, level-based pass for a new or changed SpecServer."""
    meta = body["metadata"]
    cycle().reconcile_one(meta["namespace"], meta["name"], meta["uid"])
