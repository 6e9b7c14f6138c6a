"""``specserver-operator render FILE``: the objects the operator would create for a SpecServer,
offline (like ``helm template``), decided by the operator's own pass.

The document is snapshotted as a first pass would see it (no children yet, no signals, no
status) and handed to the pure core, ``core.desired``: the same validation (the advisor's
``launch.validation``), the same engine config, pod policy checks and children templates the
running operator uses; only the reads differ. Model configs come from the spec's inline configs,
local folders (``--model-dir``), the HF cache and the advisor's bundled configs
(``loaders.specserver.configs_for_spec``), never the network unless an endpoint is given; the
namespace's Secrets, grants and ConfigMaps are not read (a cluster may still refuse what renders
here: a missing Secret, an unapproved grant). I/O: reads the file and the model configs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from specserver_advisor.loaders.configs import ConfigNotFoundError, ConfigUnreadableError
from specserver_advisor.loaders.specserver import configs_for_spec
from specserver_operator.core import speccheck
from specserver_operator.core.desired import desired
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.reconcile.runsettings import Settings

#: The uid and clock of the snapshot (an object not yet created has neither).
OFFLINE_UID = "00000000-0000-0000-0000-000000000000"
OFFLINE_NOW = "1970-01-01T00:00:00Z"
#: The namespace a document without one is rendered in (as ``kubectl apply`` would).
DEFAULT_NAMESPACE = "default"


@dataclass
class Rendered:
    """What the operator would create (in the order it writes), or why it would refuse."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    #: (reason, message) of ConfigValid=False; None when the SpecServer renders
    refused: tuple[str, str] | None = None
    warnings: list[tuple[str, str]] = field(default_factory=list)


class RenderInputError(ValueError):
    """The file holds no SpecServer the operator could read (the message says why)."""


def read_specservers(path: Path) -> list[dict[str, Any]]:
    """The SpecServer documents of a YAML file (``-`` is not accepted: a path)."""
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except (OSError, UnicodeDecodeError) as exc:
        raise RenderInputError(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise RenderInputError(f"{path}: not YAML: {exc}") from exc
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == "SpecServer"]
    if not found:
        raise RenderInputError(f"{path}: no SpecServer document")
    return found


def render_specserver(
    doc: dict[str, Any],
    settings: Settings | None = None,
    hf_endpoint: str | None = None,
    dirs: list[Path] | None = None,
    maps: list[tuple[str, Path]] | None = None,
) -> Rendered:
    """The children a first reconcile pass of ``doc`` writes (``core.desired``)."""
    meta = dict(doc.get("metadata") or {}) if isinstance(doc.get("metadata"), dict) else {}
    meta.setdefault("namespace", DEFAULT_NAMESPACE)
    meta.update(uid=OFFLINE_UID, generation=1)
    body = {**doc, "metadata": meta}
    body.pop("status", None)
    server, problems = speccheck.parse(body)
    if server is None:
        return Rendered(refused=(speccheck.INVALID_SPEC, "; ".join(problems)))
    try:
        configs = configs_for_spec(server.spec, dict(os.environ), hf_endpoint, dirs, maps)
    except (ConfigNotFoundError, ConfigUnreadableError) as exc:
        return Rendered(refused=("ModelConfigNotFound", str(exc)))
    observed = Observed(
        body=body,
        server=server,
        invalid=None,
        configs=configs,
        now=OFFLINE_NOW,
        now_ts=0.0,
    )
    plan = desired(observed, settings or Settings(), PassCache())
    cfg = plan.decided.cfg
    if cfg is None or not cfg.valid:
        why = (cfg.reason, cfg.message) if cfg is not None else ("NotRendered", "no engine")
        return Rendered(refused=why)
    wanted = plan.rendered
    if wanted is None:  # pragma: no cover - a valid config always plans its children
        return Rendered(refused=("NotRendered", "the pass planned no children"))
    order = {(w.child.kind, w.child.name): k for k, w in enumerate(plan.writes)}
    objects = [wanted.object(child) for child in wanted.apply]
    objects.sort(key=lambda o: order.get((o["kind"], o["metadata"]["name"]), len(order)))
    return Rendered(objects, None, list(cfg.warnings))
