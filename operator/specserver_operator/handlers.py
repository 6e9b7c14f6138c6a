"""The only module with ``@kopf.on.*`` handlers; loaded by ``specserver-operator`` (main.py).

So far: operator-wide settings at start-up. Reconciliation of SpecServers into engine
workloads comes with the operator work (issue: reconcile SpecServers).
"""

from __future__ import annotations

from typing import Any

import kopf

ANNOTATION_PREFIX = "specserver.io"
FINALIZER = "specserver.io/finalizer"


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
