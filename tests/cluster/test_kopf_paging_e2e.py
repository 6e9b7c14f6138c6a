"""kopf's paged initial LIST survives an expired continue token (kopfpaging.py).

The operator has kopf list each watched kind in pages (handlers.py). When etcd compacts past a
listing's revision before its next page is asked for (an event loop starved between pages on
a loaded node), the real apiserver answers that page 410 Gone; kopf 1.45 raises it out of its
watch loop and the operator exits. Here kopf's own watch loop (``infinite_watch``, what the
operator runs per watched kind) lists ConfigMaps in pages of two from the real apiserver, and
the test compacts the real etcd to its newest revision after the first page."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.request
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import auth, fetching, watching
from kopf._cogs.structs import credentials, references

from specserver_operator.kube import kopfpaging
from stack import KubeHandle

pytestmark = pytest.mark.cluster

COUNT = 7


def etcd(kube: KubeHandle, call: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call to the session's etcd (v3 JSON gateway; the apiserver's port + 1, loopback)."""
    port = int(kube.server.rsplit(":", 1)[1]) + 1
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v3/{call}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return dict(json.loads(resp.read()))


def compact_to_newest(kube: KubeHandle) -> None:
    """Compact etcd to its newest revision: every older continue token is now too old."""
    key = base64.b64encode(b"/").decode()
    revision = etcd(kube, "kv/range", {"key": key, "limit": 1})["header"]["revision"]
    etcd(kube, "kv/compaction", {"revision": revision, "physical": True})


async def initial_listing(kube: KubeHandle, namespace: str, expiries: int) -> list[str]:
    """The names kopf's watch loop yields before its listing ends (paged by two). After the
    first page of each of the first ``expiries`` listings a ConfigMap is written (the revision
    moves on) and etcd compacted, so that listing's next page is answered 410 Gone."""
    settings = kopf.OperatorSettings()
    settings.watching.chunk_size = 2
    info = kopf.login_with_kubeconfig(settings=settings)
    assert info is not None
    vault = credentials.Vault({"kubeconfig": info})
    auth.vault_var.set(vault)
    resource = references.Resource("", "v1", "configmaps", namespaced=True)
    names: list[str] = []
    compacted = 0
    stream = watching.infinite_watch(settings=settings, resource=resource, namespace=namespace)
    try:
        async for event in stream:
            if event is watching.Bookmark.LISTED:
                break
            names.append(event["object"]["metadata"]["name"])
            if names[-1] == names[0] and compacted < expiries:  # a listing's first object
                compacted += 1
                kube.kubectl("-n", namespace, "create", "configmap", f"late-{compacted}")
                compact_to_newest(kube)
    finally:
        await stream.aclose()
        await vault.close()
    return names


@pytest.mark.parametrize("expiries", [1, kopfpaging.PAGED_ATTEMPTS])
def test_an_expired_continue_token_restarts_the_listing_instead_of_ending_kopf(
    kube: KubeHandle,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: Any,
    expiries: int,
) -> None:
    """One expiry: the listing starts again in pages. As many as ``PAGED_ATTEMPTS``: the last
    listing is one request (no continue token left to expire)."""
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    items = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}}
        for i in range(COUNT)
    ]
    kube.kubectl(
        "-n",
        namespace,
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )
    monkeypatch.setattr(fetching, "fetch_objs", fetching.fetch_objs)  # restored afterwards
    kopfpaging.install()
    with caplog.at_level(logging.WARNING, "specserver.kopfpaging"):
        seen = asyncio.run(initial_listing(kube, namespace, expiries))
    # The apiserver's real 410, once per expiry.
    assert caplog.text.count("continue token expired (410 Gone)") == expiries
    assert ("in one request" in caplog.text) == (expiries == kopfpaging.PAGED_ATTEMPTS)
    listed = json.loads(kube.kubectl("-n", namespace, "get", "configmaps", "-o", "json").stdout)
    every = {item["metadata"]["name"] for item in listed["items"]}
    late = {f"late-{k}" for k in range(1, expiries + 1)}
    assert {f"cm-{i}" for i in range(COUNT)} | late <= every
    assert set(seen) == every  # the restarted listing yielded every object, the late one too
