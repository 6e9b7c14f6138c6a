"""The cycle's cached client is a composition: each of its public calls is either served from
the cache or forwarded, by name, and no other ``KubeClient`` call exists on it (cachedclient.py).

The client under it is a fake of our own ``KubeClient`` seam that records every call."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from specserver_advisor.models import KIND
from specserver_operator.kube import cachedclient, secretgrants
from specserver_operator.kube.cachedclient import CACHED, FORWARDED, WRITTEN_BACK, CachedClient
from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.informer import ObjectCache

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "llm", "namespace": "ns", "resourceVersion": "7", "uid": "d"},
}
SPECSERVER = {"kind": KIND, "metadata": {"name": "llm", "namespace": "ns", "uid": "s"}}


def public(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


class Recording(KubeClient):
    """Answers every call the cached client may forward, and records it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def _note(self, name: str) -> None:
        self.calls.append(name)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self._note("get")
        return dict(DEPLOYMENT)

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None:
        self._note("get_secret_grant")
        return {"uid": uid}

    def apply_over(
        self, obj: dict[str, Any], current: dict[str, Any] | None, desired_hash: str | None = None
    ) -> dict[str, Any] | None:
        self._note("apply")
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "8"}}

    def delete(self, kind: str, namespace: str, name: str) -> None:
        self._note("delete")

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        self._note("patch_status")
        return {**SPECSERVER, "status": status}

    def get_specserver(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._note("get_specserver")
        return dict(SPECSERVER)

    def get_configmap_data(self, namespace: str, name: str) -> dict[str, str]:
        self._note("get_configmap_data")
        return {}

    def secret_exists(self, namespace: str, name: str) -> bool:
        self._note("secret_exists")
        return True

    def list_autoscalers(self, namespace: str) -> list[tuple[str, str, str, str]]:
        self._note("list_autoscalers")
        return []

    def list_scheduling(
        self, namespace: str, names: list[str] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        self._note("list_scheduling")
        return [], []

    def post_event(
        self, involved: dict[str, Any], type_: str, reason: str, message: str, now: str
    ) -> None:
        self._note("post_event")


CALLS: dict[str, tuple[Any, ...]] = {
    "get": ("Deployment", "ns", "llm"),
    "get_secret_grant": ("specserver-system", "uid-1", 1),
    "apply": (DEPLOYMENT,),
    "delete": ("Deployment", "ns", "llm"),
    "patch_status": ("ns", "llm", {"observedGeneration": 1}),
    "get_specserver": ("ns", "llm"),
    "get_configmap_data": ("ns", "cm"),
    "secret_exists": ("ns", "hf-token"),
    "list_autoscalers": ("ns",),
    "list_scheduling": ("ns",),
    "post_event": (SPECSERVER, "Normal", "Reason", "message", "2026-01-01T00:00:00Z"),
}


def test_every_public_call_is_either_cached_or_forwarded() -> None:
    calls = public(CachedClient)
    assert not CACHED & WRITTEN_BACK and not CACHED & FORWARDED and not WRITTEN_BACK & FORWARDED
    assert calls == CACHED | WRITTEN_BACK | FORWARDED
    assert set(CALLS) == calls
    # The pass's protocol is exactly these calls less the handler's fresh read.
    assert public(cachedclient.PassClient) == calls - {"get_specserver"}
    # Each has the signature of the KubeClient call it stands for.
    for name in calls:
        assert inspect.signature(getattr(CachedClient, name)) == inspect.signature(
            getattr(KubeClient, name)
        ), name


@pytest.mark.parametrize("name", sorted(KubeClient.__dict__))
def test_no_other_client_call_reaches_the_api_behind_the_cache(name: str) -> None:
    """Not a subclass: a KubeClient call the cached client does not name is not on it."""
    client = CachedClient(Recording(), ObjectCache())
    if name in CACHED | WRITTEN_BACK | FORWARDED:
        assert callable(getattr(client, name))
    elif not name.startswith("__"):
        assert not hasattr(client, name)
    assert not isinstance(client, KubeClient)


@pytest.mark.parametrize("name", sorted(FORWARDED | WRITTEN_BACK))
def test_forwarded_calls_reach_the_client_once(name: str) -> None:
    base = Recording()
    getattr(CachedClient(base, ObjectCache()), name)(*CALLS[name])
    assert base.calls == [name]


def test_cached_reads_never_reach_the_client() -> None:
    base, cache = Recording(), ObjectCache()
    cache.put("Deployment", DEPLOYMENT)
    book = secretgrants.Book({"uid-1": ({"uid": "uid-1", "generation-1": "{}"}, 0.0)})
    client = CachedClient(base, cache, grants=book)
    assert client.get(*CALLS["get"]) == cache.get("Deployment", "ns", "llm")
    assert client.get_secret_grant("specserver-system", "uid-1", None) == book.data("uid-1")
    assert base.calls == []


def test_writes_and_fresh_reads_put_their_answers_into_the_cache() -> None:
    base, cache = Recording(), ObjectCache()
    client = CachedClient(base, cache)
    assert client.apply(DEPLOYMENT)
    stored = cache.get("Deployment", "ns", "llm")
    assert stored is not None and stored["metadata"]["resourceVersion"] == "8"
    client.delete("Deployment", "ns", "llm")
    assert cache.get("Deployment", "ns", "llm") is None
    client.patch_status("ns", "llm", {"observedGeneration": 3})
    status = (cache.get(KIND, "ns", "llm") or {}).get("status")
    assert status == {"observedGeneration": 3}
    fresh = CachedClient(base, cache, read_through=True)
    fresh.get("Deployment", "ns", "llm")
    assert base.calls[-1] == "get" and cache.get("Deployment", "ns", "llm") is not None
