"""The webhook's HTTPS server on loopback: peers that stall, reviews in flight together, the
API server's client certificate, /healthz's view of it, and bodies that fail closed.

Fakes only our own client seam (the Secret, the webhook configuration, the SubjectAccessReview);
tests/cluster/test_webhook.py runs the operator against the real apiserver.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import webhookpeers
from specserver_operator.kube.errors import ApiError
from specserver_operator.webhook import server as webhookserver
from specserver_operator.webhook.admission import ReviewSettings
from specserver_operator.webhook.secretreview import AccessSettings, Caller
from specserver_operator.webhook.server import READ_DEADLINE_S, Server, caller_of
from specserver_operator.webhook.service import Webhook
from stack import REPO


def flagship() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    )
    return doc


def review(user: str = "alice", obj: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "request": {
            "uid": f"uid-{user}",
            "operation": "CREATE",
            "namespace": "team-a",
            "object": obj or flagship(),
            "userInfo": {"username": user},
        }
    }


class FakeClient:
    """Our client seam: one Secret, one webhook configuration; any other call fails."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, str]] = {}
        self.ca_bundle: str | None = None
        #: users the SubjectAccessReviews allow; "error" makes the API call fail
        self.readers: set[str] = {"alice"}
        self.asked: list[str] = []

    def review_access(self, review: dict[str, Any]) -> dict[str, Any]:
        user = review["spec"]["user"]
        self.asked.append(user)
        if user == "error":
            raise ApiError("SubjectAccessReview: 403 forbidden", 403)
        return {"allowed": user in self.readers}

    def get_secret_data(self, namespace: str, name: str) -> dict[str, str] | None:
        return self.secrets.get(f"{namespace}/{name}")

    def put_secret(
        self, namespace: str, name: str, data: dict[str, str], labels: dict[str, str]
    ) -> None:
        assert labels["app.kubernetes.io/managed-by"] == "specserver"
        self.secrets[f"{namespace}/{name}"] = data

    def ensure_webhook_ca_bundle(self, name: str, ca_pem: str) -> bool | None:
        changed = self.ca_bundle != ca_pem
        self.ca_bundle = ca_pem
        return changed

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call {name}")


class Running:
    """A Webhook serving on a free loopback port, its client, its API-server client pair."""

    def __init__(self, tmp: Path, names: frozenset[str] = frozenset()) -> None:
        self.ca_crt, crt, key = webhookpeers.client_pair(tmp)
        self.apiserver = (crt, key)
        self.client = FakeClient()
        settings = ReviewSettings(access=AccessSettings(client_ca=str(self.ca_crt)))
        self.grants: list[tuple[Any, ...]] = []
        self.hook = Webhook(
            self.client,  # type: ignore[arg-type]
            0,
            "127.0.0.1",
            "ops/tls",
            "cfg",
            ["127.0.0.1"],
            settings,
            names,
            lambda *g: self.grants.append(g),
        )
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.hook.serve, args=(self.stop,), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while self.hook.server is None or not self.hook.server.port:
            assert time.monotonic() < deadline, "the webhook did not start"
            time.sleep(0.05)
        self.port = self.hook.server.port

    @property
    def ca(self) -> str:
        assert self.client.ca_bundle
        return self.client.ca_bundle

    def post(self, body: bytes | dict[str, Any], as_apiserver: bool = True) -> Any:
        return webhookpeers.post(self.port, body, self.ca, self.apiserver if as_apiserver else None)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=15)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    r = Running(tmp_path)
    try:
        yield r
    finally:
        r.close()


def test_the_server_answers_over_tls_signed_by_the_ca_it_publishes(running: Running) -> None:
    assert running.ca == running.client.secrets["ops/tls"]["ca.crt"]
    status, answer, _ = running.post(review("alice"))
    assert status == 200 and answer["response"] == {"uid": "uid-alice", "allowed": True}
    assert running.grants == [("team-a", "qwen3-8b", "", 0, "hf-token", "alice")]
    for user, refused in (("mallory", "may not get"), ("error", "could not check")):
        _, denied, _ = running.post(review(user))
        assert denied["response"]["allowed"] is False
        assert refused in denied["response"]["status"]["message"]
    # A restart reuses the stored certificate: the published CA does not change.
    again = Webhook(running.client, 0, "127.0.0.1", "ops/tls", "cfg", ["127.0.0.1"])  # type: ignore[arg-type]
    again.upkeep()
    assert again.bundle == running.hook.bundle


def test_a_review_without_the_apiservers_certificate_gets_no_access_review(
    running: Running, tmp_path: Path
) -> None:
    """A hand-written AdmissionReview learns nothing about any user's Secret access."""
    answers = []
    for user in ("alice", "mallory"):
        _, answer, _ = running.post(review(user), as_apiserver=False)
        answers.append(answer["response"]["status"]["message"])
    assert running.client.asked == [] and running.grants == []
    assert answers[0] == answers[1]
    assert "did not come from the API server (no client certificate)" in answers[0]
    # A certificate from another CA does not even finish the handshake.
    other = tmp_path / "other"
    other.mkdir()
    _, crt, key = webhookpeers.client_pair(other)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        webhookpeers.post(running.port, review("alice"), running.ca, (crt, key))
    assert running.client.asked == []
    # Everything but the Secret check still answers for such a caller.
    del_secret = review("mallory")
    del del_secret["request"]["object"]["spec"]["modelSource"]["hfTokenSecretRef"]
    _, answer, _ = running.post(del_secret, as_apiserver=False)
    assert answer["response"]["allowed"] is True


def test_only_the_configured_client_names_are_the_apiserver() -> None:
    cert = {"subject": ((("commonName", "kube-apiserver"),),)}
    assert caller_of(cert, frozenset()).authenticated
    assert caller_of(cert, frozenset({"kube-apiserver"})).authenticated
    assert not caller_of(cert, frozenset({"apiserver-webhook-client"})).authenticated
    assert not caller_of(None, frozenset()).authenticated


def test_idle_and_dripping_peers_stall_only_themselves(running: Running) -> None:
    """Finding 3: one idle TCP connection held the single serving thread in its TLS handshake;
    here 40 idle connections, a dripped handshake and a dripped request stay open while reviews
    from the API server are answered at once, several in flight together, and each stalled
    peer is cut off at its read deadline."""
    idle = webhookpeers.idle(running.port, 40)
    drips = [
        webhookpeers.Dripper(running.port, 0.2),
        webhookpeers.Dripper(running.port, 0.2, tls_ca=running.ca),
    ]
    try:
        time.sleep(0.5)
        results: list[tuple[int, Any, float]] = []

        def one(user: str) -> None:
            results.append(running.post(review(user)))

        threads = [threading.Thread(target=one, args=(u,)) for u in ("alice", "mallory") * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(results) == 8
        assert all(took < 3.0 for _, _, took in results), [r[2] for r in results]
        allowed = sorted(a["response"]["allowed"] for _, a, _ in results)
        assert allowed == [False] * 4 + [True] * 4
        assert running.hook.health() is None
        time.sleep(READ_DEADLINE_S + 1.0)
        for drip in drips:
            assert drip.closed_after is not None, "a dripping peer was never cut off"
            assert drip.closed_after < READ_DEADLINE_S + 1.5
        for sock in idle:  # closed by the server: a read returns end-of-file at once
            sock.settimeout(1)
            assert sock.recv(1) == b""
    finally:
        for drip in drips:
            drip.close()
        for sock in idle:
            sock.close()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"kind": "AdmissionReview"}', "no request object"),
        (b"[" * 3000 + b"]" * 3000, "nested more than"),
    ],
)
def test_a_body_that_is_not_a_review_is_refused_over_the_wire(
    running: Running, body: bytes, says: str
) -> None:
    status, answer, _ = running.post(body)
    assert status == 200 and answer["response"]["allowed"] is False
    assert says in answer["response"]["status"]["message"]


def readyz(port: int, ca_pem: str) -> tuple[int, bool]:
    """GET /readyz over the webhook's TLS, as the kubelet's readinessProbe (no client cert)."""
    import http.client
    import ssl

    context = ssl.create_default_context(cadata=ca_pem)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("GET", webhookserver.READY_PATH)
        resp = conn.getresponse()
        return resp.status, bool(json.loads(resp.read())["ready"])
    finally:
        conn.close()


def test_the_pool_saturated_past_the_deadline_is_unhealthy_and_answers_refusals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reviews that never finish are answered allowed: false at the deadline (with the uid they
    were for), several at once, and /healthz reports the pool stuck (no review finished for
    WEDGED_S either)."""
    monkeypatch.setattr(webhookserver, "ANSWER_DEADLINE_S", 1.0)
    monkeypatch.setattr(webhookserver, "WEDGED_S", 1.0)
    monkeypatch.setattr(webhookserver, "PER_NAMESPACE", 3)  # one namespace may fill the pool
    release = threading.Event()

    def stuck(body: bytes, caller: Caller, deadline: float, seen: dict[str, str]) -> Any:
        seen["uid"] = json.loads(body)["request"]["uid"]
        release.wait(30)
        return {}

    bundle = Webhook(FakeClient(), 0, "127.0.0.1", "ops/tls", "cfg", ["127.0.0.1"])  # type: ignore[arg-type]
    bundle.ensure_certificate(dt.datetime.now(dt.UTC))
    assert bundle.bundle is not None
    server = Server("127.0.0.1", 0, bundle.context, stuck, workers=2)
    server.start()
    try:
        assert server.health() is None
        results: list[tuple[int, Any, float]] = []
        threads = [
            threading.Thread(
                target=lambda u=u: results.append(
                    webhookpeers.post(server.port, review(u), bundle.bundle.ca_crt)  # type: ignore[union-attr]
                )
            )
            for u in ("a", "b", "c")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(results) == 3
        # Even the one still queued (its body never parsed) carries its uid: an answer without
        # it is a failed call to the apiserver, which failurePolicy Ignore admits unchecked.
        uids = sorted(a["response"]["uid"] for _, a, _ in results)
        assert uids == ["uid-a", "uid-b", "uid-c"]
        for _, answer, took in results:
            assert answer["response"]["allowed"] is False and took < 2.5
            assert "did not finish within 1s" in answer["response"]["status"]["message"]
        time.sleep(0.2)
        assert "review workers are busy" in (server.health() or "")
        ca = bundle.bundle.ca_crt  # type: ignore[union-attr]
        assert readyz(server.port, ca) == (503, False)  # out of the Service while wedged
        release.set()
        time.sleep(0.3)
        assert server.health() is None
        assert readyz(server.port, ca) == (200, True)
    finally:
        release.set()
        server.stop()
    assert "not running" in (server.health() or "")


def test_a_client_ca_that_cannot_be_read_refuses_secret_names_instead_of_crashing(
    tmp_path: Path,
) -> None:
    for bad in (tmp_path / "missing.crt", tmp_path / "garbage.crt"):
        if bad.name == "garbage.crt":
            bad.write_text("not a certificate")
        settings = ReviewSettings(access=AccessSettings(client_ca=str(bad)))
        hook = Webhook(FakeClient(), 0, "127.0.0.1", "ops/tls", "cfg", ["127.0.0.1"], settings)  # type: ignore[arg-type]
        assert hook.settings.access.client_ca is None
        answer = hook.review(json.dumps(review("alice")).encode(), Caller(False, "x"), 1e12, {})
        assert answer["response"]["allowed"] is False
        assert "SPECSERVER_WEBHOOK_CLIENT_CA" in answer["response"]["status"]["message"]


def test_healthz_fails_when_the_webhook_cannot_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's /healthz probe (handlers.webhook_answers) reports the server's health."""
    import kopf

    from specserver_operator import handlers

    class Hook:
        problem: str | None = "all 4 review workers are busy past the 8s deadline"

        def health(self) -> str | None:
            return self.problem

    hook = Hook()
    monkeypatch.setenv("SPECSERVER_WEBHOOK_PORT", "9443")
    monkeypatch.setattr(handlers, "_WEBHOOK", [])
    assert handlers.webhook_answers() == "starting"
    monkeypatch.setattr(handlers, "_WEBHOOK", [hook])
    with pytest.raises(kopf.PermanentError, match="review workers are busy"):
        handlers.webhook_answers()
    hook.problem = None
    assert handlers.webhook_answers() == "answering"
    monkeypatch.setenv("SPECSERVER_WEBHOOK_PORT", "0")
    assert handlers.webhook_answers() == "off"
