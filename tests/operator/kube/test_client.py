"""The REST client against a loopback HTTP server that records every request: LISTs follow
continue tokens, a conflict is retried, a missing object is None, an
unchanged child is not written, and inline credentials leave no file behind."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from specserver_operator.core.hashes import HASH_ANNOTATION, object_hash
from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.connection import Connection, load_client_cert


class Api:
    """Canned answers by (method, path without query); every request is recorded."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.answers: dict[tuple[str, str], list[tuple[int, Any]]] = {}

    def answer(self, method: str, path: str, *replies: tuple[int, Any]) -> None:
        self.answers[(method, path)] = list(replies)


@pytest.fixture
def api() -> Iterator[tuple[Api, KubeClient]]:
    state = Api()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            state.requests.append((self.command, self.path, dict(self.headers), body))
            path = self.path.split("?")[0]
            replies = state.answers.get((self.command, path)) or [(404, {"message": "nope"})]
            status, payload = replies.pop(0) if len(replies) > 1 else replies[0]
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = KubeClient(Connection(f"http://127.0.0.1:{server.server_port}", token="t"))
    yield state, client
    server.shutdown()
    server.server_close()


def test_list_follows_continue_tokens(api: tuple[Api, KubeClient]) -> None:
    state, client = api
    path = "/apis/specserver.io/v1alpha1/namespaces/llm/specservers"
    item = {"metadata": {"name": "chat-server-one", "managedFields": [1]}}
    state.answer(
        "GET",
        path,
        (200, {"items": [item], "metadata": {"continue": "tok 1"}}),
        (200, {"items": [item], "metadata": {}}),
    )
    found = client.list_specservers(["llm"])
    assert len(found) == 2 and "managedFields" not in found[0]["metadata"]
    # Compacted page by page (each page is parsed apart): one copy of each string.
    assert found[0]["metadata"]["name"] is found[1]["metadata"]["name"]
    assert next(iter(found[0]["metadata"])) is next(iter(found[1]["metadata"]))
    queries = [r[1].split("?")[1] for r in state.requests]
    assert "continue=tok+1" in queries[1] and "limit=" in queries[0]
    assert state.requests[0][2]["Authorization"] == "Bearer t"


def test_a_missing_object_is_none(api: tuple[Api, KubeClient]) -> None:
    state, client = api
    assert client.get("Deployment", "llm", "x") is None
    assert state.requests[0][1] == "/apis/apps/v1/namespaces/llm/deployments/x"


def test_a_conflict_is_retried_and_an_unchanged_child_is_not_written(
    api: tuple[Api, KubeClient],
) -> None:
    state, client = api
    obj = {"kind": "Service", "metadata": {"name": "x", "namespace": "llm"}, "spec": {}}
    path = "/api/v1/namespaces/llm/services/x"
    state.answer("PATCH", path, (409, {"message": "conflict"}), (200, obj))
    assert client.apply_over(obj, None) == obj
    patches = [r for r in state.requests if r[0] == "PATCH"]
    assert len(patches) == 2
    assert patches[0][2]["Content-Type"] == "application/apply-patch+yaml"
    assert patches[0][3]["metadata"]["annotations"][HASH_ANNOTATION] == object_hash(obj)
    current = {"metadata": {"annotations": {HASH_ANNOTATION: object_hash(obj)}}}
    assert client.apply_over(obj, current) is None
    assert len([r for r in state.requests if r[0] == "PATCH"]) == 2


def test_status_is_a_merge_patch_of_the_status_subresource(api: tuple[Api, KubeClient]) -> None:
    state, client = api
    path = "/apis/specserver.io/v1alpha1/namespaces/llm/specservers/x/status"
    state.answer("PATCH", path, (200, {"status": {}}))
    client.patch_status("llm", "x", {"lastMetrics": {"ttftP99Seconds": None}})
    _, _, headers, body = state.requests[0]
    assert headers["Content-Type"] == "application/merge-patch+json"
    assert body == {"status": {"lastMetrics": {"ttftP99Seconds": None}}}


def test_an_inline_client_certificate_leaves_no_file(tmp_path: Path) -> None:
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=t",
         "-keyout", str(key), "-out", str(cert), "-days", "1"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    before = set(os.listdir(tempfile.gettempdir()))
    ctx = ssl.create_default_context()
    load_client_cert(ctx, cert.read_bytes(), key.read_bytes())
    conn = Connection("https://127.0.0.1:1", cert_data=cert.read_bytes(), key_data=key.read_bytes())
    KubeClient(conn)
    after = set(os.listdir(tempfile.gettempdir()))
    assert not {n for n in after - before if n.startswith("specserver-cred-")}
