"""What one reconcile pass may call on the API (``PassClient``), and the cycle's cached client.

A pass (controller.py: observe.py reads, reconcile/apply.py and cycle.py write) is typed against
``PassClient``: the ten calls a pass makes. ``client.KubeClient`` is one (a pass on the API
itself, as tests run it); ``CachedClient`` is the other, built by cycle.py for every pass: it
holds a ``KubeClient`` and exposes exactly those ten calls, each either served from the
watch-fed cache (``CACHED``), forwarded with its answer put back into the cache
(``WRITTEN_BACK``), or forwarded as is (``FORWARDED``), plus the fresh SpecServer read of a
handler's pass. It is a composition, not a subclass: a call it does not name does not exist on
it, so nothing a pass calls can bypass the cache unnoticed
(tests/operator/kube/test_cached_client.py).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from specserver_advisor.models import KIND
from specserver_operator.kube import secretgrants
from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.informer import ObjectCache
from specserver_operator.kube.objects import AutoscalerRef

#: Reads answered by the cache (children) or the grants' book, unless ``read_through``.
CACHED = frozenset({"get", "get_secret_grant"})
#: Writes forwarded to the client whose answer is put back into the cache at once.
WRITTEN_BACK = frozenset({"apply", "delete", "patch_status"})
#: Calls forwarded to the client as they are (nothing of theirs is cached).
FORWARDED = frozenset(
    {
        "get_specserver",
        "get_configmap_data",
        "secret_exists",
        "list_autoscalers",
        "list_scheduling",
        "post_event",
    }
)


class PassClient(Protocol):
    """The calls one reconcile pass makes (``client.KubeClient`` and ``CachedClient``)."""

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None: ...

    def get_configmap_data(self, namespace: str, name: str) -> dict[str, str]: ...

    def secret_exists(self, namespace: str, name: str) -> bool: ...

    def list_autoscalers(self, namespace: str) -> list[AutoscalerRef]: ...

    def list_scheduling(
        self, namespace: str, names: list[str] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]: ...

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> dict[str, Any] | None: ...

    def delete(self, kind: str, namespace: str, name: str) -> None: ...

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]: ...

    def post_event(
        self, involved: dict[str, Any], type_: str, reason: str, message: str, now: str
    ) -> None: ...


class CachedClient:
    """A pass's client over ``base``: children read from the cache (or, ``read_through``, from
    the API and then cached), every write's answer put back into the cache. Every call that
    reaches the API goes to ``base`` (so a test's fake of ``KubeClient`` sees all of them)."""

    def __init__(
        self,
        base: KubeClient,
        cache: ObjectCache,
        read_through: bool = False,
        grants: secretgrants.Book | None = None,
    ) -> None:
        self._base = base
        self._cache = cache
        self._read_through = read_through
        self._grants = grants

    # Cached reads.

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if self._read_through:
            found = self._base.get(kind, namespace, name)
            if found is not None:
                self._cache.put(kind, found, written=True)
            return found
        return self._cache.get(kind, namespace, name)

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None:
        """The grant as the cycle last listed it; read fresh (and noted) for a handler's pass,
        and once for a generation the list did not approve (its grant may have been written
        after the LIST, before the watch brought that generation: no refusal for a moment)."""
        grants = self._grants
        if grants is not None and not self._read_through:
            data = grants.data(uid)
            if generation is None or not grants.fresh_read_due(uid, generation, data):
                return data
        found = self._base.get_secret_grant(namespace, uid, generation)
        if grants is not None:
            if found is None:
                grants.grants.pop(uid, None)
            else:
                grants.grants[uid] = (found, time.time())
        return found

    # Writes whose answer goes back into the cache.

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> dict[str, Any] | None:
        meta = obj["metadata"]
        current = None if force else self.get(obj["kind"], meta["namespace"], meta["name"])
        written = self._base.apply_over(obj, current, desired_hash)
        if written is not None:
            self._cache.put(obj["kind"], written, written=True)
        return written

    def delete(self, kind: str, namespace: str, name: str) -> None:
        self._base.delete(kind, namespace, name)
        self._cache.remove(kind, namespace, name)

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        answer = self._base.patch_status(namespace, name, status)
        if answer:
            self._cache.put(KIND, answer, written=True)
        return answer

    # Forwarded as they are.

    def get_specserver(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A fresh read (a handler's pass; the cycle's passes take the cache's copy)."""
        return self._base.get_specserver(namespace, name)

    def get_configmap_data(self, namespace: str, name: str) -> dict[str, str]:
        return self._base.get_configmap_data(namespace, name)

    def secret_exists(self, namespace: str, name: str) -> bool:
        return self._base.secret_exists(namespace, name)

    def list_autoscalers(self, namespace: str) -> list[AutoscalerRef]:
        return self._base.list_autoscalers(namespace)

    def list_scheduling(
        self, namespace: str, names: list[str] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The engine pods of SpecServers ``names`` and the namespace's FailedCreate events:
        read only while a workload there is not Ready (observe.py), at most every few
        seconds; not watched, not cached here."""
        return self._base.list_scheduling(namespace, names)

    def post_event(
        self, involved: dict[str, Any], type_: str, reason: str, message: str, now: str
    ) -> None:
        self._base.post_event(involved, type_, reason, message, now)
