"""The admission webhook without an apiserver: the review, the certificates, the HTTPS server.

The server test fakes only our own client seam (the Secret and the webhook configuration);
tests/cluster/test_webhook.py runs the operator against the real apiserver.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import threading
import urllib.request
from typing import Any

import pytest
import yaml
from cryptography import x509

from conftest import REPO
from specserver_advisor.models import SpecServer
from specserver_engine.ports import free_loopback_port
from specserver_operator.admission import (
    admission_response,
    review_specserver,
    secret_access_review,
)
from specserver_operator.client import ApiError
from specserver_operator.engineconfig import extra_args_refusal
from specserver_operator.webhook import PATH, Webhook
from specserver_operator.webhookcerts import RENEW_BEFORE, VALIDITY, build_bundle, usable

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def flagship(**engine: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    )
    doc["spec"]["engine"].update(engine)
    return doc


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_is_admitted(path: Any) -> None:
    verdict = review_specserver(yaml.safe_load(path.read_text()))
    assert verdict.allowed, verdict.problems


def test_schema_errors_come_all_at_once_with_their_fields() -> None:
    doc = flagship()
    doc["spec"]["mode"] = "On"
    doc["spec"]["speculative"]["numSteps"] = 0
    verdict = review_specserver(doc)
    assert len(verdict.problems) == 2
    assert any(p.startswith("spec.mode: ") and "'Enabled'" in p for p in verdict.problems)
    assert any(p.startswith("spec.speculative.numSteps: ") for p in verdict.problems)


def test_config_errors_come_all_at_once_with_spec_codes() -> None:
    verdict = review_specserver(flagship(memFractionStatic=0.5, contextLength=100_000))
    codes = [p.split(":", 1)[0] for p in verdict.problems]
    assert codes == ["SPEC002", "SPEC016"], verdict.problems


def test_a_fraction_the_operator_would_compute_is_not_a_problem() -> None:
    doc = flagship()
    del doc["spec"]["engine"]["memFractionStatic"]
    assert review_specserver(doc).allowed


def test_a_model_that_cannot_fit_is_refused_with_the_gpu_count() -> None:
    doc = flagship()
    del doc["spec"]["engine"]["memFractionStatic"]
    doc["spec"]["model"] = {"path": "Qwen/Qwen3-30B-A3B-Instruct-2507"}
    doc["spec"]["draft"] = {"path": "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex"}
    doc["spec"]["mode"] = "Disabled"
    verdict = review_specserver(doc)
    assert any("does not fit on 1 x L4: needs >= 4 GPUs" in p for p in verdict.problems)


def test_owned_flags_and_warnings() -> None:
    doc = flagship(extraArgs=["--max-running-requests", "3"])
    doc["spec"]["speculative"]["acceptThresholdSingle"] = 0.5
    verdict = review_specserver(doc)
    assert any(p.startswith("OwnedFlagInExtraArgs: ") for p in verdict.problems)
    assert any(w.startswith("SPEC006: ") for w in verdict.warnings), verdict.warnings


def test_a_model_config_override_in_extra_args_is_refused() -> None:
    override = '{"max_position_embeddings": 1048576, "architectures": ["LlamaForCausalLM"]}'
    verdict = review_specserver(flagship(extraArgs=["--json-model-override-args", override]))
    assert any(
        p.startswith("OwnedFlagInExtraArgs: extraArgs may not set --json-model-override-args")
        for p in verdict.problems
    ), verdict.problems


@pytest.mark.parametrize(
    "extra",
    [["--json-model-override-args", "{}"], ["--config", "x.yaml"], ["--max-running-requests=9"]],
)
def test_owned_flags_are_refused_when_the_model_config_is_not_readable_offline(
    extra: list[str],
) -> None:
    """A SpecServer whose configs come from a ConfigMap (read by the operator, not the webhook)
    still has its extraArgs checked: refusing them needs no model config."""
    doc = flagship(extraArgs=extra)
    doc["spec"]["model"]["path"] = "acme/private-model"
    doc["spec"].setdefault("modelSource", {})["configMapName"] = "acme-configs"
    verdict = review_specserver(doc)
    assert [p for p in verdict.problems if p.startswith("OwnedFlagInExtraArgs: ")], verdict.problems


@pytest.mark.parametrize(
    ("extra", "code"),
    [(["--speculative-skip-dp-mlp-sync"], "SPEC015"), (["--no-such-flag-anywhere"], "InvalidFlag")],
)
def test_flags_sglang_refuses_are_refused_when_the_model_config_is_not_readable_offline(
    extra: list[str], code: str
) -> None:
    """The same extraArgs check as the operator's render (launch.extra_args_refusal), also
    without a model config: ConfigValid would say the same once the operator reads it."""
    doc = flagship(extraArgs=extra)
    doc["spec"]["model"]["path"] = "acme/private-model"
    doc["spec"].setdefault("modelSource", {})["configMapName"] = "acme-configs"
    verdict = review_specserver(doc)
    assert [p for p in verdict.problems if p.startswith(f"{code}: extraArgs: ")], verdict.problems
    server = SpecServer.model_validate(doc)
    assert extra_args_refusal(server.spec) is not None
    assert extra_args_refusal(server.spec)[0] == code  # type: ignore[index]


def test_admission_review_answer() -> None:
    bad = flagship(memFractionStatic=0.5, contextLength=100_000)
    review = {"request": {"uid": "u1", "operation": "CREATE", "object": bad}}
    answer = admission_response(review)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == "u1" and response["allowed"] is False
    assert response["status"]["code"] == 422
    assert response["status"]["message"].startswith("2 problem(s): SPEC002: ")
    delete = {"request": {"uid": "u2", "operation": "DELETE", "object": None}}
    assert admission_response(delete)["response"] == {"uid": "u2", "allowed": True}


def test_certificates_cover_the_names_and_are_renewed_before_expiry() -> None:
    names = ["specserver-operator-webhook.specserver-system.svc", "127.0.0.1"]
    bundle = build_bundle(names, NOW)
    assert usable(bundle, names, NOW)
    assert not usable(bundle, ["other.svc"], NOW)
    assert not usable(bundle, names, NOW + VALIDITY - RENEW_BEFORE + dt.timedelta(days=1))
    ca = x509.load_pem_x509_certificate(bundle.ca_crt.encode())
    cert = x509.load_pem_x509_certificate(bundle.tls_crt.encode())
    cert.verify_directly_issued_by(ca)


class FakeClient:
    """Our client seam: one Secret, one webhook configuration; any other call fails."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, str]] = {}
        self.ca_bundle: str | None = None
        #: users the SubjectAccessReviews allow; "error" makes the API call fail
        self.readers: set[str] = {"alice"}
        #: Secret grants by namespace/uid (secretgrants.py)
        self.grants: dict[str, dict[str, str]] = {}

    def review_access(self, review: dict[str, Any]) -> dict[str, Any]:
        user = review["spec"]["user"]
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

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None:
        return self.grants.get(f"{namespace}/{uid}")

    def put_secret_grant(
        self, namespace: str, uid: str, patch: dict[str, str | None], labels: dict[str, str]
    ) -> None:
        assert labels["app.kubernetes.io/component"] == "secret-grant"
        data = self.grants.setdefault(f"{namespace}/{uid}", {})
        data.update({k: v for k, v in patch.items() if v is not None})

    def ensure_webhook_ca_bundle(self, name: str, ca_pem: str) -> bool | None:
        changed = self.ca_bundle != ca_pem
        self.ca_bundle = ca_pem
        return changed

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call {name}")


def test_the_server_answers_over_tls_signed_by_the_ca_it_publishes() -> None:
    client = FakeClient()
    port = free_loopback_port()
    hook = Webhook(client, port, "127.0.0.1", "ops/tls", "cfg", ["127.0.0.1"])  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(target=hook.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if client.ca_bundle:
                break
            threading.Event().wait(0.05)
        assert client.ca_bundle == client.secrets["ops/tls"]["ca.crt"]
        ctx = ssl.create_default_context(cadata=client.ca_bundle)
        obj = flagship()
        obj["metadata"].update(namespace="llm", uid="sps-uid", generation=1)
        body: dict[str, Any] = {
            "request": {
                "uid": "u",
                "operation": "CREATE",
                "object": obj,
                "userInfo": {"username": "alice"},
            }
        }
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}{PATH}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        answer = None
        for _ in range(50):
            try:
                with urllib.request.urlopen(request, context=ctx, timeout=10) as resp:
                    answer = json.loads(resp.read())
                break
            except (ConnectionError, urllib.error.URLError):
                threading.Event().wait(0.1)
        assert answer is not None and answer["response"]["allowed"] is True
        grant = client.grants["specserver-system/sps-uid"]  # the approval, for the operator
        assert json.loads(grant["generation-1"]) == {"secret": "hf-token", "user": "alice"}
        for user, refused in (("mallory", "may not get"), ("error", "could not check")):
            body["request"]["userInfo"] = {"username": user}
            request.data = json.dumps(body).encode()
            with urllib.request.urlopen(request, context=ctx, timeout=10) as resp:
                denied = json.loads(resp.read())["response"]
            assert denied["allowed"] is False and refused in denied["status"]["message"]
        # A restart reuses the stored certificate: the published CA does not change.
        again = Webhook(client, 0, "127.0.0.1", "ops/tls", "cfg", ["127.0.0.1"])  # type: ignore[arg-type]
        again.upkeep()
        assert again.bundle == hook.bundle
    finally:
        stop.set()
        thread.join(timeout=10)


def _review(
    operation: str, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> dict[str, Any]:
    user = {"username": "bob", "uid": "u-1", "groups": ["team-a"], "extra": {"scope": ["x"]}}
    request = {"uid": "r", "operation": operation, "namespace": "team-a", "object": obj}
    request["userInfo"] = user
    if old is not None:
        request["oldObject"] = old
    return {"request": request}


def test_the_author_must_be_allowed_to_get_the_hf_token_secret() -> None:
    asked: list[dict[str, Any]] = []

    def deny(review: dict[str, Any]) -> dict[str, Any]:
        asked.append(review)
        return {"allowed": False, "reason": "no RBAC rule"}

    doc = flagship()
    answer = admission_response(_review("CREATE", doc), deny)["response"]
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "SecretNotReadable: spec.modelSource.hfTokenSecretRef.name: bob may not get" in message
    assert "Secret team-a/hf-token" in message
    assert asked == [
        secret_access_review(_review("CREATE", doc)["request"]["userInfo"], "team-a", "hf-token")
    ]
    spec = asked[0]["spec"]
    assert spec["user"] == "bob" and spec["groups"] == ["team-a"] and spec["uid"] == "u-1"
    assert spec["extra"] == {"scope": ["x"]}
    assert spec["resourceAttributes"] == {
        "namespace": "team-a",
        "verb": "get",
        "group": "",
        "version": "v1",
        "resource": "secrets",
        "name": "hf-token",
    }
    # Allowed: no problem; the rest of the review still runs.
    assert admission_response(_review("CREATE", doc), lambda r: {"allowed": True})["response"][
        "allowed"
    ]
    # An UPDATE that only touches metadata (a finalizer) asks nothing; a spec change asks again.
    changed = flagship()
    changed["metadata"]["finalizers"] = ["kopf.zalando.org/KopfFinalizerMarker"]
    asked.clear()
    assert admission_response(_review("UPDATE", changed, doc), deny)["response"]["allowed"]
    assert asked == []
    changed["spec"]["modelSource"]["hfEndpoint"] = "https://mirror.example/hf"
    assert not admission_response(_review("UPDATE", changed, doc), deny)["response"]["allowed"]
    assert len(asked) == 1
    # No hfTokenSecretRef: nothing to ask.
    del doc["spec"]["modelSource"]["hfTokenSecretRef"]
    asked.clear()
    assert admission_response(_review("CREATE", doc), deny)["response"]["allowed"]
    assert asked == []


def test_an_access_review_that_cannot_be_made_refuses() -> None:
    answer = admission_response(
        _review("CREATE", flagship()),
        lambda r: {"allowed": False, "evaluationError": "SubjectAccessReview: 403 forbidden"},
    )["response"]
    assert answer["allowed"] is False
    assert "could not check that bob may get Secret team-a/hf-token" in answer["status"]["message"]
