"""A watch-fed cache of SpecServers and the children this operator manages (an informer).

kopf's ``on.event`` handlers (handlers.py) put every watch event here; the shared cycle
(cycle.py) reads snapshots from it, so a cycle over a thousand SpecServers reads nothing from
the API. The first cycle, and one every ``RESYNC_S``, LISTs instead and replaces the cache
(priming it, and repairing anything a lost event left stale). Every write's answer is put back
at once, so the next cycle never sees an older copy of what it wrote; a late event carrying an
older ``resourceVersion`` than the cached copy is ignored.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from specserver_advisor.models import KIND
from specserver_operator.client import slim

Key = tuple[str, str, str]  # (kind, namespace, name)
RESYNC_S = 300.0
KOPF_NOTES = ("last-handled-configuration", "kopf.zalando.org/touch-dummy")


def _version(obj: dict[str, Any]) -> int | None:
    try:
        return int(obj["metadata"].get("resourceVersion") or "")
    except ValueError:
        return None  # opaque on this API server: the newest arrival wins


def _older(new: dict[str, Any], cached: dict[str, Any] | None) -> bool:
    """True when ``new`` is an older version of what the cache holds (the cached one stays)."""
    if cached is None:
        return False
    new_v, cached_v = _version(new), _version(cached)
    return new_v is not None and cached_v is not None and new_v < cached_v


def trimmed(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps: children slimmed, SpecServers without managedFields."""
    if kind == KIND:
        meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
        notes = meta.get("annotations") or {}
        # kopf's own bookkeeping (a copy of the spec) is not read by a pass.
        meta["annotations"] = {k: v for k, v in notes.items() if not k.endswith(KOPF_NOTES)}
        return {**obj, "metadata": meta}
    return slim(kind, obj)


class ObjectCache:
    """Objects by (kind, namespace, name), safe to share between kopf's loop and the cycle."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.synced_at: float | None = None

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        """Store an object unless the cache holds a newer version of it."""
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            return
        key = (kind, meta.get("namespace") or "", meta["name"])
        new = trimmed(kind, obj)
        with self.lock:
            if not _older(new, self.objects.get(key)):
                self.objects[key] = new

    def remove(self, kind: str, namespace: str, name: str) -> None:
        with self.lock:
            self.objects.pop((kind, namespace, name), None)

    def observe(self, kind: str, event: dict[str, Any]) -> None:
        """A kopf watch event (``type`` ADDED/MODIFIED/DELETED, or None while listing)."""
        obj = event.get("object") or {}
        if event.get("type") == "DELETED":
            meta = obj.get("metadata") or {}
            self.remove(kind, meta.get("namespace") or "", meta.get("name") or "")
        else:
            self.put(kind, obj)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.objects.get((kind, namespace, name))

    def needs_resync(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        return self.synced_at is None or now - self.synced_at >= RESYNC_S

    def replace(self, listed: dict[Key, dict[str, Any]]) -> None:
        """Take a full LIST as the truth, except entries that are newer in the cache."""
        with self.lock:
            self.objects = {
                key: self.objects[key] if _older(obj, self.objects.get(key)) else obj
                for key, obj in listed.items()
            }
            self.synced_at = time.monotonic()

    def specservers(self) -> list[dict[str, Any]]:
        with self.lock:
            return [obj for (kind, _, _), obj in self.objects.items() if kind == KIND]
