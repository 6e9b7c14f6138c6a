"""Secret grants (issue 25, no confused deputy): the engine pod gets the Secret a SpecServer names
only for a generation an admission review approved (secretgrants.py). The record format and the
decisions are pure; the reconcile runs on test_autopilot's fake of our client seam, the webhook's
review on a fake SubjectAccessReview seam, the cycle's grant reads on a recording client."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from operatorfakes import SPEC, FakeClient

from specserver_operator.kube import secretgrants
from specserver_operator.kube.informer import ObjectCache
from specserver_operator.loop.cycle import Cycle
from specserver_operator.reconcile import controller
from specserver_operator.webhook.admission import admission_response
from specserver_operator.webhook.secretreview import Caller
from stack import REPO

UID = "0b4f6c1e-1d2a-4c55-9d3e-5a8f0e2c7b10"


def test_a_grant_approves_one_secret_for_one_generation_of_one_uid() -> None:
    data = secretgrants.grant_patch(None, "llm", "x", UID, 3, "hf-token", "alice")
    assert secretgrants.approved(data, UID, 3, "hf-token")  # type: ignore[arg-type]
    assert not secretgrants.approved(data, UID, 4, "hf-token")  # type: ignore[arg-type]
    assert not secretgrants.approved(data, UID, 3, "db-creds")  # type: ignore[arg-type]
    assert not secretgrants.approved(data, "another-uid", 3, "hf-token")  # type: ignore[arg-type]
    assert not secretgrants.approved(None, UID, 3, "hf-token")
    assert not secretgrants.approved({"uid": UID, "generation-3": "{"}, UID, 3, "hf-token")
    assert json.loads(data["generation-3"] or "") == {"secret": "hf-token", "user": "alice"}


def test_only_the_newest_generations_are_kept() -> None:
    data: dict[str, str] = {}
    for generation in range(1, 12):
        patch = secretgrants.grant_patch(data, "llm", "x", UID, generation, "s", "alice")
        for key, value in patch.items():
            if value is None:
                data.pop(key)
            else:
                data[key] = value
    kept = sorted(int(k.split("-")[1]) for k in data if k.startswith("generation-"))
    assert kept == list(range(11 - secretgrants.KEEP + 1, 12))


def test_grants_of_specservers_that_are_gone_are_stale() -> None:
    now = 10_000.0
    grants = {
        "live": ({"namespace": "llm"}, 0.0),
        "gone": ({"namespace": "llm"}, now - 5),  # seen before, deleted since
        "young": ({"namespace": "llm"}, now - 5),  # not seen yet: its SpecServer may be new
        "old": ({"namespace": "llm"}, now - secretgrants.UNSEEN_GRACE_S),
        "elsewhere": ({"namespace": "other"}, 0.0),  # another operator's namespace
    }
    stale = secretgrants.stale(grants, {"live"}, {"live", "gone"}, ["llm"], now)
    assert sorted(stale) == ["gone", "old"]
    assert "elsewhere" in secretgrants.stale(grants, {"live"}, set(), [], now)


class GrantClient(FakeClient):
    """test_autopilot's fake plus the grant store and a Service."""

    def __init__(self, grant: dict[str, str] | None = None) -> None:
        super().__init__()
        self.grant = grant
        self.grant_reads = 0

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None:
        assert namespace == "specserver-system"
        self.grant_reads += 1
        return self.grant

    def secret_exists(self, namespace: str, name: str) -> bool:
        return True


def body_naming(secret: str, generation: int = 1) -> dict[str, Any]:
    body = copy.deepcopy(SPEC)
    body["metadata"].update(uid=UID, generation=generation)
    body["spec"]["mode"] = "Enabled"
    body["spec"]["modelSource"] = {"hfTokenSecretRef": {"name": secret, "key": "token"}}
    return body


def reconcile(client: GrantClient, body: dict[str, Any]) -> dict[str, Any]:
    body["status"] = copy.deepcopy(client.status)
    controller.clear_caches()
    controller.reconcile(client, body, "2026-01-01T00:00:00Z", now_ts=1000.0)  # type: ignore[arg-type]
    return next(c for c in client.status["conditions"] if c["type"] == "ConfigValid")


def secret_refs(deployment: dict[str, Any] | None) -> list[str]:
    if deployment is None:
        return []
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return [
        e["valueFrom"]["secretKeyRef"]["name"]
        for c in containers
        for e in c.get("env") or []
        if "valueFrom" in e
    ]


def test_a_secret_no_review_approved_reaches_no_pod() -> None:
    client = GrantClient()
    valid = reconcile(client, body_naming("db-creds"))
    assert (valid["status"], valid["reason"]) == ("False", "SecretNotApproved")
    assert "no admission review approved Secret llm/db-creds for generation 1" in valid["message"]
    assert client.deployment is None


def test_an_approved_secret_is_rendered_for_that_generation_only() -> None:
    grant = secretgrants.grant_patch(None, "llm", "x", UID, 1, "hf-token", "alice")
    client = GrantClient({k: v for k, v in grant.items() if v is not None})
    assert reconcile(client, body_naming("hf-token"))["status"] == "True"
    assert secret_refs(client.deployment) == ["hf-token"]
    running = copy.deepcopy(client.deployment)
    # Generation 2 names another Secret, written while the webhook did not answer: refused,
    # and the running engine (with the Secret approved for generation 1) is left as it is.
    valid = reconcile(client, body_naming("db-creds", generation=2))
    assert (valid["status"], valid["reason"]) == ("False", "SecretNotApproved")
    assert client.deployment == running and secret_refs(client.deployment) == ["hf-token"]
    assert "a running engine is kept as it was" in valid["message"]


def test_an_admin_may_turn_approval_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECSERVER_REQUIRE_SECRET_APPROVAL", "false")
    client = GrantClient()
    assert reconcile(client, body_naming("hf-token"))["status"] == "True"
    assert secret_refs(client.deployment) == ["hf-token"] and client.grant_reads == 0


# ------------------------------------------------------------------------ the webhook's record


def review(operation: str = "CREATE", **request: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    )
    doc["metadata"].update(namespace="llm", uid=UID, generation=4)
    return {
        "request": {
            "uid": "r-1",
            "operation": operation,
            "namespace": "llm",
            "userInfo": {"username": "alice"},
            "object": doc,
            **request,
        }
    }


def allowed(_: dict[str, Any]) -> dict[str, Any]:
    return {"allowed": True}


APISERVER = Caller(True, "CN=kube-apiserver")


def test_an_allowed_review_that_asked_records_the_grant() -> None:
    calls: list[tuple[Any, ...]] = []
    answer = admission_response(
        review(), allowed, caller=APISERVER, record_grant=lambda *a: calls.append(a)
    )
    assert answer["response"]["allowed"] is True
    assert calls == [("llm", "qwen3-8b", UID, 4, "hf-token", "alice")]


def test_no_grant_without_an_allowed_access_review() -> None:
    calls: list[tuple[Any, ...]] = []

    def record(*a: Any) -> None:
        calls.append(a)

    denied = admission_response(
        review(), lambda _: {"allowed": False}, caller=APISERVER, record_grant=record
    )
    assert denied["response"]["allowed"] is False
    dry = admission_response(review(dryRun=True), allowed, caller=APISERVER, record_grant=record)
    assert dry["response"]["allowed"] is True
    old = review()["request"]["object"]
    same = review("UPDATE", oldObject=copy.deepcopy(old))  # metadata only: nothing was asked
    assert (
        admission_response(same, allowed, caller=APISERVER, record_grant=record)["response"][
            "allowed"
        ]
        is True
    )
    invalid = review()
    invalid["request"]["object"]["spec"]["engine"]["extraArgs"] = ["--config", "x.yaml"]
    assert (
        admission_response(invalid, allowed, caller=APISERVER, record_grant=record)["response"][
            "allowed"
        ]
        is False
    )
    assert calls == []


def test_an_approval_that_cannot_be_recorded_refuses() -> None:
    def broken(*_: Any) -> None:
        raise OSError("apiserver unreachable")

    answer = admission_response(review(), allowed, caller=APISERVER, record_grant=broken)[
        "response"
    ]
    assert answer["allowed"] is False
    assert "SecretNotApproved" in answer["status"]["message"]
    assert "could not be recorded" in answer["status"]["message"]


# ------------------------------------------------------------------------- the cycle's reads


class ListingClient:
    """Records the grant calls of a cycle (our own client seam)."""

    def __init__(self, grants: dict[str, tuple[dict[str, str], float]]) -> None:
        self.grants = grants
        self.lists = 0
        self.deleted: list[str] = []

    def list_secret_grants(self, namespace: str) -> dict[str, tuple[dict[str, str], float]]:
        self.lists += 1
        return dict(self.grants)

    def delete_secret_grant(self, namespace: str, uid: str) -> None:
        self.deleted.append(uid)
        self.grants.pop(uid)


def test_a_cycle_lists_grants_rarely_and_deletes_those_of_deleted_specservers() -> None:
    bodies = [body_naming("hf-token") for _ in range(3)]
    for i, b in enumerate(bodies):
        b["metadata"].update(uid=f"u-{i}", name=f"s-{i}")
    grants = {f"u-{i}": ({"namespace": "llm", "uid": f"u-{i}"}, 0.0) for i in range(3)}
    client = ListingClient(grants)
    cycle = Cycle(client=client, cache=ObjectCache())  # type: ignore[arg-type]
    cycle.refresh_grants(bodies)
    assert client.lists == 1 and client.deleted == []  # one LIST for every SpecServer
    cycle.refresh_grants(bodies)
    assert client.lists == 1  # not every cycle: a new generation's grant is read by its pass
    cycle.refresh_grants(bodies[1:])  # s-0 was deleted: its grant is doomed, with no LIST
    assert client.lists == 1 and client.deleted == []  # the cycle deletes nothing itself
    assert cycle.grants.doomed == {"u-0"}
    sweeper = secretgrants.Sweeper(cycle.grants, client, "specserver-system")  # type: ignore[arg-type]
    assert sweeper.sweep_once() == 1 and client.deleted == ["u-0"]
    cycle.refresh_grants(bodies[1:])
    assert set(cycle.grants.grants) == {"u-1", "u-2"} and not cycle.grants.doomed
    assert cycle.grants.listed_at is not None
    cycle.grants.listed_at -= secretgrants.RELIST_S
    cycle.refresh_grants(bodies[1:])
    assert client.lists == 2
    plain = copy.deepcopy(SPEC)
    cycle.grants = secretgrants.Book()
    cycle.refresh_grants([plain])  # nothing names a Secret, no grants held: no LIST
    assert client.lists == 2


def test_deleting_many_stale_grants_is_bounded_and_off_the_cycle() -> None:
    """Issue 37, finding 3: 4,377 grants of refused CREATEs were deleted one by one on the
    shared cycle at start-up (~27 s of every tenant's repair). The cycle now only names them;
    the sweeper deletes DELETE_BATCH per SWEEP_S on its own thread."""
    grants = {f"g-{i}": ({"namespace": "llm", "uid": f"g-{i}"}, 0.0) for i in range(500)}
    client = ListingClient(grants)
    cycle = Cycle(client=client, cache=ObjectCache())  # type: ignore[arg-type]
    cycle.grants = secretgrants.Book(dict(grants))  # held from the last start's LIST
    cycle.refresh_grants([])
    assert client.lists == 1 and client.deleted == [] and len(cycle.grants.doomed) == 500
    sweeper = secretgrants.Sweeper(cycle.grants, client, "specserver-system")  # type: ignore[arg-type]
    assert sweeper.sweep_once() == secretgrants.DELETE_BATCH
    assert len(client.deleted) == secretgrants.DELETE_BATCH


class RecordingClient:
    """The Recorder's calls (our own client seam), with a SpecServer store."""

    def __init__(self, stored: dict[tuple[str, str], str]) -> None:
        self.stored = stored  # (namespace, name) -> uid
        self.grants: dict[str, dict[str, str]] = {}
        self.puts = 0

    def get_specserver(self, namespace: str, name: str) -> dict[str, Any] | None:
        uid = self.stored.get((namespace, name))
        return None if uid is None else {"metadata": {"uid": uid}}

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None:
        return self.grants.get(uid)

    def put_secret_grant(
        self, namespace: str, uid: str, patch: dict[str, str | None], labels: dict[str, str]
    ) -> None:
        self.puts += 1
        data = {**self.grants.get(uid, {}), **patch}
        self.grants[uid] = {k: v for k, v in data.items() if v is not None}


def test_a_create_of_a_taken_name_a_repeat_and_a_flood_write_no_grant() -> None:
    """Issue 37, finding 3: every refused CREATE (409 AlreadyExists after admission) wrote a
    grant. A name held by another uid writes none; the same approval twice writes once; one
    namespace writes at most WRITE_BURST at once and is then refused, naming it."""
    client = RecordingClient({("llm", "taken"): "stored-uid"})
    record = secretgrants.Recorder(client, "specserver-system")  # type: ignore[arg-type]
    for i in range(50):
        record("llm", "taken", f"new-uid-{i}", 1, "hf-token", "alice")
    assert client.puts == 0
    record("llm", "taken", "stored-uid", 2, "hf-token", "alice")  # the stored one's UPDATE
    record("llm", "taken", "stored-uid", 2, "hf-token", "alice")
    assert client.puts == 1
    with pytest.raises(secretgrants.GrantsRefused, match="namespace flood"):
        for i in range(100):
            record("flood", f"n-{i}", f"u-{i}", 1, "hf-token", "alice")
    assert client.puts == 1 + secretgrants.WRITE_BURST
    record("other", "n", "u-other", 1, "hf-token", "alice")  # another namespace is not held up
    assert client.puts == 2 + secretgrants.WRITE_BURST


def test_a_generation_the_list_did_not_approve_is_read_once_more() -> None:
    """The grant of a new generation may be written after the cycle's LIST and the generation
    seen (watch) before the pass: one GET, not a refusal; and not one GET every cycle."""
    from specserver_operator.kube.cachedclient import CachedClient

    fresh = secretgrants.grant_patch(None, "llm", "x", UID, 2, "hf-token", "alice")

    class Base:
        gets = 0

        def get_secret_grant(
            self, namespace: str, uid: str, generation: int | None = None
        ) -> dict[str, str]:
            self.gets += 1
            return {k: v for k, v in fresh.items() if v is not None}

    base = Base()
    book = secretgrants.Book({UID: ({"uid": UID, "generation-1": "{}"}, 0.0)})
    client = CachedClient(base, ObjectCache(), grants=book)  # type: ignore[arg-type]
    assert client.get_secret_grant("specserver-system", UID, 1) == book.data(UID)  # listed
    assert base.gets == 0
    found = client.get_secret_grant("specserver-system", UID, 2)
    assert secretgrants.approved(found, UID, 2, "hf-token") and base.gets == 1
    book.grants.clear()  # a refused generation: its grant never comes
    for _ in range(3):
        client.get_secret_grant("specserver-system", UID, 3)
    assert base.gets == 2


def test_a_list_that_fails_is_not_retried_every_cycle() -> None:
    from specserver_operator.kube.errors import ApiError

    class Forbidden(ListingClient):
        def list_secret_grants(self, namespace: str) -> dict[str, tuple[dict[str, str], float]]:
            self.lists += 1
            raise ApiError("ConfigMap list in specserver-system: 403 forbidden", 403)

    client = Forbidden({})
    cycle = Cycle(client=client, cache=ObjectCache())  # type: ignore[arg-type]
    for _ in range(5):
        cycle.refresh_grants([body_naming("hf-token")])  # no exception escapes
    assert client.lists == 1
