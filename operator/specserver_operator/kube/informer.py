"""A watch-fed cache of SpecServers and the children this operator manages (an informer).

kopf's ``on.event`` handlers (handlers.py) put every watch event here; the shared cycle
(cycle.py) reads snapshots from it, so a cycle over a thousand SpecServers reads nothing from
the API. The first cycle, and one every ``RESYNC_S``, LISTs instead and replaces the cache
(priming it, and repairing anything a lost event left stale). Every write's answer is put back
at once, so the next cycle never sees an older copy of what it wrote; a late event carrying a
copy older than what we wrote is ignored.

Which of two copies is newer: resourceVersions of one resource are comparable integers since
Kubernetes 1.35 (KEP-5504, stable: a positive decimal integer without leading zeros, compared by
value), so the newer copy is kept whichever arrives first. Our write's answer can reach the cache
after the watch has already delivered that version and the next one (the deployment controller
writes its status at once; on a busy machine the watch thread runs first): storing the answer
then would put an older copy back, and an older rule that waited for our own version's event
skipped every later event for ``PENDING_S`` -- a standby's Ready status among them -- and left
the cache stale until the next resync. Where a version is not of that form (an API server that
does not follow KEP-5504) the watch's order decides: after we stored version V, events up to V's
own are older than V and are skipped (for at most ``PENDING_S``).

A LIST's copy of an object is older than anything the watch (or our own write) said about it
after the LIST began (unless its version says it is newer): such an object keeps what the cache
holds, and one deleted meanwhile stays deleted (a resync never resurrects a child deleted while
it ran, which would hide the deletion until the next resync).

Every string of a cached object is interned (``apiobjects.compact``; a LIST's objects come so
from the client, page by page): a thousand SpecServers repeat the same keys, reasons and messages,
and one copy of each takes about half the memory of a thousand (the cache of a SpecServer with
its Deployment and Service: ~27 KB -> ~12 KB).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from specserver_advisor.models import KIND
from specserver_operator.kube.objects import compact, slim, slim_specserver

Key = tuple[str, str, str]  # (kind, namespace, name)
RESYNC_S = 300.0
#: Longest we wait for the watch event of our own write before trusting events again.
PENDING_S = 30.0


def _version(obj: dict[str, Any]) -> str | None:
    """The resourceVersion (ordered by ``newer`` where it is of KEP-5504's form)."""
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None


def trimmed(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps: children slimmed, SpecServers without managedFields and other
    tools' annotations (``apiobjects.slim_specserver``); compacted."""
    kept: dict[str, Any] = compact(slim_specserver(obj) if kind == KIND else slim(kind, obj))
    return kept


def comparable(version: str | None) -> tuple[int, str] | None:
    """A resourceVersion's order key where it is of KEP-5504's form (a positive decimal integer
    with no leading zero: by length, then digit by digit, as client-go's
    ``CompareResourceVersion``; no ``int()`` of an unbounded string), else None (only equality
    means anything then)."""
    if version and version.isascii() and version.isdigit() and version[0] != "0":
        return (len(version), version)
    return None


def newer(a: str | None, b: str | None) -> bool | None:
    """Whether version ``a`` is newer than ``b`` (None: they cannot be compared)."""
    va, vb = comparable(a), comparable(b)
    if va is None or vb is None:
        return None
    return va > vb


def _identity(obj: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What a spec change moves: generation, labels and annotations (not status)."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    return (meta.get("uid"), meta.get("generation"), meta.get("labels"), meta.get("annotations"))


class ObjectCache:
    """Objects by (kind, namespace, name), safe to share between kopf's loop and the cycle."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.synced_at: float | None = None
        #: versions we wrote (or read fresh) whose watch event has not arrived yet, and when
        self.pending: dict[Key, tuple[str, float]] = {}
        #: keys put or removed while a LIST runs (``list_began`` .. ``replace``)
        self.touched: set[Key] = set()
        #: the version of each watched deletion since the last LIST: a copy older than it (our
        #: write's answer, a fresh GET, arriving late) is not put back
        self.deleted: dict[Key, str] = {}
        self.listing = False

    def put(self, kind: str, obj: dict[str, Any], written: bool = False) -> bool:
        """Store an object: ``written`` for the answer of our own write or a fresh GET, else a
        watch event. The newer of the cached copy and this one is kept (KEP-5504 versions);
        versions that cannot be compared are ordered by the watch itself: after we stored
        version V, events up to V's own are older than V and are skipped.

        Returns:
            True when the object is new to the cache or its generation, labels or annotations
            changed (what calls for an immediate pass); False for anything else (a status
            write, a skipped event).
        """
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            return False
        key = (kind, meta.get("namespace") or "", meta["name"])
        new = trimmed(kind, obj)
        version, now = _version(new), time.monotonic()
        with self.lock:
            cached = self.objects.get(key)
            if self.listing:
                self.touched.add(key)
            if cached is None and key in self.deleted:
                gone = newer(version, self.deleted[key])
                if gone is False:
                    return False  # older than its deletion: it stays deleted
                self.deleted.pop(key, None)
            order = None if cached is None else newer(version, _version(cached))
            if order is not None:  # KEP-5504: the newer copy wins, whoever brought it
                self.pending.pop(key, None)
                if not order:
                    return False
                self.objects[key] = new
                return _identity(cached) != _identity(new)
            if written:
                if version is not None and (cached is None or _version(cached) != version):
                    self.pending[key] = (version, now)
                self.objects[key] = new
                return _identity(cached) != _identity(new)
            waiting = self.pending.get(key)
            if waiting is not None and version != waiting[0] and now - waiting[1] < PENDING_S:
                return False  # an event older than what we wrote
            self.pending.pop(key, None)
            self.objects[key] = new
            return _identity(cached) != _identity(new)

    def remove(self, kind: str, namespace: str, name: str) -> None:
        """Our own delete: the object leaves the cache."""
        with self.lock:
            self._drop((kind, namespace, name))

    def _drop(self, key: Key) -> None:
        self.objects.pop(key, None)
        self.pending.pop(key, None)
        if self.listing:
            self.touched.add(key)

    def observe(self, kind: str, event: dict[str, Any]) -> bool:
        """A kopf watch event (``type`` ADDED/MODIFIED/DELETED, or None while listing); True
        when it brought a new object or a new generation, labels or annotations (``put``)."""
        obj = event.get("object") or {}
        if event.get("type") == "DELETED":
            meta = obj.get("metadata") or {}
            self.removed(kind, meta.get("namespace") or "", meta.get("name") or "", _version(obj))
            return False
        return self.put(kind, obj)

    def removed(self, kind: str, namespace: str, name: str, version: str | None) -> None:
        """A watched deletion at ``version``: the object leaves the cache unless the copy there
        is newer (recreated under the same name, our write's answer first), and a later copy
        older than the deletion is not put back."""
        key = (kind, namespace, name)
        with self.lock:
            cached = self.objects.get(key)
            if cached is not None and newer(_version(cached), version):
                return
            self._drop(key)
            if comparable(version) is not None:
                self.deleted[key] = str(version)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.objects.get((kind, namespace, name))

    def needs_resync(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        return self.synced_at is None or now - self.synced_at >= RESYNC_S

    def list_began(self) -> None:
        """A LIST that will ``replace`` the cache starts now: note what events touch meanwhile."""
        with self.lock:
            self.listing, self.touched = True, set()

    def replace(self, listed: dict[Key, dict[str, Any]]) -> None:
        """Take a full LIST (begun at ``list_began``) as the truth, except for objects an event
        or our own write touched after the LIST began: those keep what the cache holds
        (created meanwhile: kept; deleted meanwhile: stay gone)."""
        with self.lock:
            touched = self.touched
            objects = {key: self.objects[key] for key in touched if key in self.objects}
            for key, obj in listed.items():
                kept = objects.get(key)
                if key not in touched or (
                    kept is not None and newer(_version(obj), _version(kept))
                ):
                    objects[key] = obj  # the client compacted it (client.list_*)
                    self.pending.pop(key, None)
            self.objects = objects
            self.deleted = {k: v for k, v in self.deleted.items() if k in touched}
            self.listing, self.touched = False, set()
            self.pending = {k: v for k, v in self.pending.items() if k in objects}
            self.synced_at = time.monotonic()

    def specservers(self) -> list[dict[str, Any]]:
        with self.lock:
            return [obj for (kind, _, _), obj in self.objects.items() if kind == KIND]
