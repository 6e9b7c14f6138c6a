"""An adversarial probe of the webhook's server (issue 25, after the asyncio rewrite): peers
that crowd the connection cap, and requests that are almost HTTP.

Runs the real server on loopback (test_webhook_server.Running: the fakes are only our own client
seam); tests/cluster/test_webhook_hostile.py runs the same peers against the real apiserver.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_webhook_server import FakeClient, Running, flagship, review

import webhookpeers
from specserver_operator.webhook import server as webhookserver
from specserver_operator.webhook.admission import (
    ReviewSettings,
    admission_response,
    answer_body,
    review_uid,
)
from specserver_operator.webhook.secretreview import AccessSettings, Caller
from specserver_operator.webhook.server import (
    MAX_CONNECTIONS,
    MAX_PENDING_PER_PEER,
    Server,
    caller_of,
)
from specserver_operator.webhook.service import Webhook


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    r = Running(tmp_path)
    try:
        yield r
    finally:
        r.close()


def test_a_peer_holding_more_idle_connections_than_the_cap_cuts_off_only_its_own(
    running: Running,
) -> None:
    """600 idle connections from one address (re-opened as fast as it likes) used to fill the
    512 slots, and the API server's next connection was closed at accept: with failurePolicy
    Fail every SpecServer write failed. Now that peer holds at most MAX_PENDING_PER_PEER
    still-reading connections, and past the global cap (many addresses) the oldest still-reading
    one makes room, so the API server's fresh connection is reviewed."""
    socks = webhookpeers.idle(running.port, 600, source="127.0.0.2")
    try:
        time.sleep(0.3)
        status, answer, took = running.post(review("alice"))
        assert status == 200 and answer["response"]["allowed"] is True and took < 3.0
        server = running.hook.server
        assert server is not None and server.open <= MAX_PENDING_PER_PEER + 1
        for source in range(3, 3 + MAX_CONNECTIONS // MAX_PENDING_PER_PEER + 1):
            socks += webhookpeers.idle(running.port, MAX_PENDING_PER_PEER, f"127.0.0.{source}")
        time.sleep(0.3)
        assert server.open <= MAX_CONNECTIONS
        status, answer, took = running.post(review("alice"))
        assert status == 200 and answer["response"]["allowed"] is True and took < 3.0
        cut = 0
        for sock in socks[:600]:  # the crowding peer's oldest were closed by the server
            sock.settimeout(0.01)
            with contextlib.suppress(TimeoutError):
                cut += sock.recv(1) == b""
        assert cut >= 600 - MAX_PENDING_PER_PEER
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.parametrize(
    ("request_head", "answer"),
    [
        # '²' is a digit to str.isdigit() but not to int(): the connection was dropped unanswered
        # with a ValueError logged as a warning, one line per request.
        ("POST /validate HTTP/1.1\r\nContent-Length: \u00b2\r\n\r\n{}", b"HTTP/1.1 400 "),
        ("POST /validate HTTP/1.1\r\nContent-Length: -1\r\n\r\n", b"HTTP/1.1 400 "),
        # Two lengths (request smuggling's framing): which one is the body? Neither.
        (
            "POST /validate HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 400 ",
        ),
        (
            "POST /validate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
            b"HTTP/1.1 411 ",
        ),
        ("POST /validate HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),
        ("GET /validate HTTP/1.1\r\n\r\n", b"HTTP/1.1 405 "),
        ("POST /validate HTTP/1.1\r\nX: " + "a" * 20000 + "\r\n\r\n", b"HTTP/1.1 431 "),
    ],
)
def test_a_request_that_is_almost_http_gets_an_answer_saying_so(
    running: Running, request_head: str, answer: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    out = webhookpeers.raw(running.port, running.ca, request_head.encode("latin-1"))
    assert out.startswith(answer), out[:200]
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def _server(tmp: Path, answer: webhookserver.Review) -> tuple[Server, str, tuple[Path, Path]]:
    """A Server on loopback asking for the API server's client certificate (the admin's client
    CA), answering with ``answer``; (server, its CA, the API server's client pair)."""
    ca_crt, crt, key = webhookpeers.client_pair(tmp)
    settings = ReviewSettings(access=AccessSettings(client_ca=str(ca_crt)))
    hook = Webhook(FakeClient(), 0, "127.0.0.1", "ops/tls", "cfg", ["127.0.0.1"], settings)  # type: ignore[arg-type]
    hook.ensure_certificate(dt.datetime.now(dt.UTC))
    assert hook.bundle is not None
    server = Server("127.0.0.1", 0, hook.context, answer, workers=2)
    server.start()
    return server, hook.bundle.ca_crt, (crt, key)


def _concurrently(calls: list[Callable[[], Any]]) -> list[Any]:
    results: list[Any] = []
    threads = [threading.Thread(target=lambda c=c: results.append(c())) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_costly_reviews_from_a_stranger_never_delay_the_apiservers_or_fail_healthz(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured: a 4 MiB review of ``inline.target.x: [{}] * 1_000_000`` costs the advisor
    ~8 s of CPU, and anyone who reaches the port may send it. Four at once held all 4 workers
    past the 8 s deadline: the apiserver's reviews were refused as "busy" (every SpecServer
    write with failurePolicy Fail) and /healthz failed, so the kubelet restarted the operator
    and the webhook was gone (Ignore admits unchecked). Here a stranger's reviews never end;
    the apiserver's are answered at once, and health stays up."""
    monkeypatch.setattr(webhookserver, "ANSWER_DEADLINE_S", 1.0)
    release = threading.Event()

    def answer(body: bytes, caller: Caller, deadline: float, seen: dict[str, str]) -> Any:
        if not caller.authenticated:
            release.wait(30)  # as costly as it likes
        return {"response": {"uid": json.loads(body)["request"]["uid"], "allowed": True}}

    server, ca, apiserver = _server(tmp_path, answer)
    try:
        strangers = [
            lambda u=u: webhookpeers.post(server.port, review(f"s{u}"), ca) for u in range(6)
        ]
        ours = [
            lambda u=u: (
                time.sleep(0.3),
                webhookpeers.post(server.port, review(u), ca, apiserver),
            )[1]
            for u in ("a", "b", "c", "d")
        ]
        results = _concurrently(strangers + ours)
        answered = {
            a["response"]["uid"]: (a["response"]["allowed"], took) for _, a, took in results
        }
        for uid in ("uid-a", "uid-b", "uid-c", "uid-d"):
            assert answered[uid][0] is True and answered[uid][1] < 1.0, answered
        assert all(not ok for uid, (ok, _) in answered.items() if uid.startswith("uid-s"))
        assert server.health() is None
    finally:
        release.set()
        server.stop()


def test_a_pool_busy_with_reviews_that_finish_is_not_reported_wedged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The apiserver's own reviews may be costly too (a tenant's 1.5 MB inline config: ~3 s of
    CPU each, 4 at once ~12 s): every worker was past the deadline, /healthz failed and the
    operator was restarted although reviews kept finishing. Health now fails only when no
    review finished for WEDGED_S as well (a wedge, not a load)."""
    monkeypatch.setattr(webhookserver, "ANSWER_DEADLINE_S", 1.0)
    monkeypatch.setattr(webhookserver, "WEDGED_S", 2.5)

    def answer(body: bytes, caller: Caller, deadline: float, seen: dict[str, str]) -> Any:
        time.sleep(1.5)  # past the deadline, but done
        return {"response": {"uid": json.loads(body)["request"]["uid"], "allowed": True}}

    server, ca, apiserver = _server(tmp_path, answer)
    health: list[str | None] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.1):
            health.append(server.health())

    try:
        threading.Thread(target=watch, daemon=True).start()
        for _ in range(3):
            _concurrently(
                [lambda u=u: webhookpeers.post(server.port, review(u), ca, apiserver) for u in "ab"]
            )
        stop.set()
        assert len(health) > 20 and not [h for h in health if h], health
    finally:
        stop.set()
        server.stop()


def test_an_update_that_leaves_the_spec_as_it_was_is_admitted_even_if_the_spec_is_refused_now() -> (
    None
):
    """A SpecServer stored before a rule refused it (created while the webhook was down, or
    before the admin tightened the pod policy) could not get a label, and a foreground delete
    never ended: the garbage collector's PATCH removing its finalizer was refused. An UPDATE
    that leaves the spec as it was is admitted; one that changes it is reviewed as before."""
    host = flagship()
    host["spec"]["modelSource"]["volume"] = {"hostPath": "/data/models", "mountPath": "/models"}
    del host["spec"]["modelSource"]["hfTokenSecretRef"]
    labelled = copy.deepcopy(host)
    labelled["metadata"]["labels"] = {"team": "a"}
    labelled["metadata"]["finalizers"] = []

    def update(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        request = {"uid": "u", "operation": "UPDATE", "object": new, "oldObject": old}
        answer: dict[str, Any] = admission_response({"request": request})["response"]
        return answer

    assert update(host, labelled) == {"uid": "u", "allowed": True}
    changed = copy.deepcopy(labelled)
    changed["spec"]["replicas"] = 2
    refused = update(host, changed)
    assert refused["allowed"] is False and "hostPath" in refused["status"]["message"]
    no_old = admission_response({"request": {"uid": "u", "operation": "UPDATE", "object": host}})
    assert no_old["response"]["allowed"] is False


def in_namespace(namespace: str, user: str) -> dict[str, Any]:
    r = review(user)
    r["request"]["namespace"] = namespace
    return r


def test_one_namespaces_costly_reviews_leave_workers_for_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the apiserver a tenant can send ~1.5 MB SpecServers that cost ~3 s of CPU to
    review (inline.target: [{}, ...]); four dry-run applies at a time held all 4 workers past
    the deadline, so every other tenant's SpecServer write was refused as "busy". One
    namespace's reviews now hold at most PER_NAMESPACE workers: another namespace's are
    answered at once, and the flooding namespace's extra ones are refused naming it."""
    monkeypatch.setattr(webhookserver, "ANSWER_DEADLINE_S", 1.5)
    release = threading.Event()

    def answer(body: bytes, caller: Caller, deadline: float, seen: dict[str, str]) -> Any:
        request = json.loads(body)["request"]
        if request["namespace"] == "flood":
            release.wait(30)
        return {"response": {"uid": request["uid"], "allowed": True}}

    ca_crt, crt, key = webhookpeers.client_pair(tmp_path)
    settings = ReviewSettings(access=AccessSettings(client_ca=str(ca_crt)))
    hook = Webhook(FakeClient(), 0, "127.0.0.1", "ops/tls", "cfg", ["127.0.0.1"], settings)  # type: ignore[arg-type]
    hook.ensure_certificate(dt.datetime.now(dt.UTC))
    assert hook.bundle is not None
    ca = hook.bundle.ca_crt
    server = Server("127.0.0.1", 0, hook.context, answer, workers=4)
    server.start()
    try:
        flood = [
            lambda u=u: webhookpeers.post(
                server.port, in_namespace("flood", f"f{u}"), ca, (crt, key)
            )
            for u in range(6)
        ]
        others = [
            lambda u=u: (
                time.sleep(0.3),
                webhookpeers.post(server.port, in_namespace("team-b", u), ca, (crt, key)),
            )[1]
            for u in ("a", "b", "c")
        ]
        results = _concurrently(flood + others)
        by_uid = {a["response"]["uid"]: (a["response"], took) for _, a, took in results}
        assert len(by_uid) == 9  # each answer carries its own uid, the refused ones' too
        for uid in ("uid-a", "uid-b", "uid-c"):
            assert by_uid[uid][0]["allowed"] is True and by_uid[uid][1] < 1.0, by_uid
        refused = [a for a, _ in by_uid.values() if not a["allowed"]]
        assert refused and any(
            "namespace 'flood' already has" in a["status"]["message"] for a in refused
        )
        release.set()
        time.sleep(0.3)
        assert server.shares == {}
    finally:
        release.set()
        server.stop()


def test_the_namespace_of_a_review_is_read_from_the_apiservers_field_order() -> None:
    head = b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u",'
    body = head + b'"name":"x","namespace":"team-a","operation":"CREATE","object":{}}}'
    assert webhookserver.review_namespace(body) == "team-a"
    assert webhookserver.review_namespace(b'{"request":{"uid":"u"}}') == ""
    assert webhookserver.review_namespace(b" " * 5000 + b'"namespace":"late"') == ""


def test_the_uid_of_a_review_is_read_from_the_head_of_its_body() -> None:
    body = b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":'
    assert review_uid(body + b'"705ab4f5-6393-11e8-b7cc-42010a800002"}}') == (
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    )
    assert review_uid(b'{"request":{"uid":"a\\"b"}}') == ""
    assert review_uid(b" " * 5000 + b'"uid":"late"') == ""


def test_a_body_that_cannot_be_read_is_refused_with_its_uid(running: Running) -> None:
    """Finding: a SpecServer whose inline target is nested past the body's 64 levels, or a
    review body over 4 MiB (an UPDATE of a large object), was refused with uid "" (or a 400):
    to the apiserver a failed call, which failurePolicy Ignore admits, Secret name and all.
    Both are refusals of that review now, uid included."""
    deep: Any = 1
    for _ in range(80):
        deep = {"a": deep}
    obj = flagship()
    obj["spec"]["modelSource"]["inline"] = {"target": {"x": deep}}
    body = json.dumps(review("bob", obj)).encode()
    answer = answer_body(body, lambda _r: {})["response"]
    assert answer["uid"] == "uid-bob" and answer["allowed"] is False
    assert "nested more than" in answer["status"]["message"]
    big = review("bob")
    big["request"]["object"]["metadata"]["annotations"] = {"x": "y" * (5 * 1024 * 1024)}
    status, over, _ = running.post(big)
    assert status == 200 and over["response"]["uid"] == "uid-bob"
    assert over["response"]["allowed"] is False
    assert "over 4194304" in over["response"]["status"]["message"]
    assert running.client.asked == []


def test_memory_held_for_bodies_is_bounded_for_strangers_and_the_apiserver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured: reviewing a 4 MiB body of ``[{}, ...]`` costs +136 MB RSS, and the operator's
    limit is 256Mi. Four such reviews from anyone who reaches the port ran at once (and every
    queued one's 4 MiB stayed buffered): the operator was OOM-killed and the webhook gone
    (failurePolicy Ignore then admits unchecked). Now a stranger may send at most
    STRANGER_MAX_BODY (413), the bodies under review at once are at most REVIEW_BYTES (any one
    alone), and the bodies held at once at most MAX_HELD: past either the apiserver's review
    is refused with its uid, never dropped."""
    monkeypatch.setattr(webhookserver, "ANSWER_DEADLINE_S", 1.5)
    monkeypatch.setattr(webhookserver, "REVIEW_BYTES", 40_000)
    monkeypatch.setattr(webhookserver, "STRANGER_MAX_BODY", 40_000)
    release = threading.Event()
    reviewed: list[str] = []

    def answer(body: bytes, caller: Caller, deadline: float, seen: dict[str, str]) -> Any:
        request = json.loads(body)["request"]
        reviewed.append(request["uid"])
        if request["namespace"] == "big":
            release.wait(30)
        return {"response": {"uid": request["uid"], "allowed": True}}

    server, ca, apiserver = _server(tmp_path, answer)
    try:
        padded = in_namespace("big", "big")
        padded["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * 50_000}
        status, stranger, _ = webhookpeers.post(server.port, padded, ca)  # 413: never read
        assert status == 413 and "is not the API server" in stranger["message"]
        assert reviewed == []

        def small(user: str) -> Callable[[], Any]:
            return lambda: (
                time.sleep(0.3),
                webhookpeers.post(server.port, in_namespace("team-b", user), ca, apiserver),
            )[1]

        big = lambda: webhookpeers.post(server.port, padded, ca, apiserver)  # noqa: E731
        results = _concurrently([big, small("a")])
        by_uid = {a["response"]["uid"]: a["response"] for _, a, _ in results}
        assert by_uid["uid-big"]["allowed"] is False  # alone over the budget, yet reviewed
        assert "uid-big" in reviewed
        assert by_uid["uid-a"]["allowed"] is False
        assert "reviewing" in by_uid["uid-a"]["status"]["message"]
        release.set()
        time.sleep(0.3)
        assert server.reviewing == 0 and server.held == 0
        monkeypatch.setattr(webhookserver, "MAX_HELD", 100)
        status, held, _ = webhookpeers.post(server.port, in_namespace("team-b", "c"), ca, apiserver)
        assert status == 200 and held["response"]["uid"] == "uid-c"
        assert "already holds" in held["response"]["status"]["message"]
    finally:
        release.set()
        server.stop()


def test_a_certificate_with_several_common_names_is_not_the_apiserver() -> None:
    """getpeercert() lists every RDN; the name check read only the last commonName (and the
    first attribute of each RDN), so a subject CN=tenant, CN=kube-apiserver passed it."""
    names = frozenset({"kube-apiserver"})
    two = {"subject": ((("commonName", "tenant"),), (("commonName", "kube-apiserver"),))}
    multi = {"subject": ((("organizationName", "x"), ("commonName", "kube-apiserver")),)}
    one = {"subject": ((("commonName", "kube-apiserver"),),)}
    assert not caller_of(two, names).authenticated
    assert caller_of(multi, names).authenticated  # one CN, in a multi-valued RDN
    assert caller_of(one, names).authenticated


def test_a_strangers_reviews_waiting_for_their_worker_do_not_fill_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection stopped being one to cut off once its request was read, so 600 quick
    reviews from a stranger, queued for its one worker, held all 512 slots and the apiserver's
    connection was closed at accept. A stranger's connection now stays one to cut off until
    it is answered."""
    monkeypatch.setattr(webhookserver, "ANSWER_DEADLINE_S", 6.0)
    release = threading.Event()

    def answer(body: bytes, caller: Caller, deadline: float, seen: dict[str, str]) -> Any:
        if not caller.authenticated:
            release.wait(30)
        return {"response": {"uid": json.loads(body)["request"]["uid"], "allowed": True}}

    server, ca, apiserver = _server(tmp_path, answer)
    data = json.dumps(review("s")).encode()
    request = b"POST /validate HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(data) + data
    ctx = ssl.create_default_context(cadata=ca)
    socks: list[ssl.SSLSocket] = []
    try:
        for i in range(600):
            raw = socket.create_connection(
                ("127.0.0.1", server.port), 5, (f"127.0.0.{2 + i % 10}", 0)
            )
            try:
                tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                tls.sendall(request)
                socks.append(tls)
            except (ssl.SSLError, OSError):
                raw.close()  # cut off already: room was made
        time.sleep(0.3)
        assert server.open <= MAX_CONNECTIONS
        status, answered, took = webhookpeers.post(server.port, review("alice"), ca, apiserver)
        assert status == 200 and answered["response"]["allowed"] is True and took < 3.0
    finally:
        release.set()
        for sock in socks:
            sock.close()
        server.stop()
