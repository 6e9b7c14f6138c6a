"""The admission webhook without an apiserver: the review, its failures, the certificates.

tests/operator/webhook/test_webhook_server.py runs the HTTPS server;
tests/cluster/test_webhook.py runs the operator against the real apiserver.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
from typing import Any

import pytest
import yaml
from cryptography import x509

from specserver_advisor.launch.model import extra_args_refusal
from specserver_advisor.models import SpecServer
from specserver_operator.core import podpolicy
from specserver_operator.reconcile.runsettings import read_settings
from specserver_operator.webhook.admission import (
    ReviewSettings,
    admission_response,
    answer_body,
    review_specserver,
)
from specserver_operator.webhook.certs import RENEW_BEFORE, VALIDITY, build_bundle, usable
from specserver_operator.webhook.secretreview import (
    AccessSettings,
    Caller,
    ReviewAccess,
    secret_access_review,
)
from stack import REPO

#: A review the API server sent (its client certificate verified by the webhook's TLS).
APISERVER = Caller(True, "CN=kube-apiserver")
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
    answer = admission_response(_review("CREATE", doc), deny, APISERVER)["response"]
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
    assert admission_response(_review("CREATE", doc), lambda r: {"allowed": True}, APISERVER)[
        "response"
    ]["allowed"]
    # An UPDATE that only touches metadata (a finalizer) asks nothing; a spec change asks again.
    changed = flagship()
    changed["metadata"]["finalizers"] = ["kopf.zalando.org/KopfFinalizerMarker"]
    asked.clear()
    assert admission_response(_review("UPDATE", changed, doc), deny, APISERVER)["response"][
        "allowed"
    ]
    assert asked == []
    changed["spec"]["modelSource"]["hfEndpoint"] = "https://mirror.example/hf"
    assert not admission_response(_review("UPDATE", changed, doc), deny, APISERVER)["response"][
        "allowed"
    ]
    assert len(asked) == 1
    # No hfTokenSecretRef: nothing to ask.
    del doc["spec"]["modelSource"]["hfTokenSecretRef"]
    asked.clear()
    assert admission_response(_review("CREATE", doc), deny, APISERVER)["response"]["allowed"]
    assert asked == []


def test_an_access_review_that_cannot_be_made_refuses() -> None:
    answer = admission_response(
        _review("CREATE", flagship()),
        lambda r: {"allowed": False, "evaluationError": "SubjectAccessReview: 403 forbidden"},
        APISERVER,
    )["response"]
    assert answer["allowed"] is False
    assert "could not check that bob may get Secret team-a/hf-token" in answer["status"]["message"]


CONFIGS = REPO / "advisor/specserver_advisor/data/configs"


def inline(doc: dict[str, Any], target: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with these model configs given inline (spec.modelSource.inline)."""
    doc = copy.deepcopy(doc)
    doc["spec"]["modelSource"]["inline"] = {
        "targetConfig": json.dumps(target),
        "draftConfig": json.dumps(draft),
    }
    return doc


def qwen(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return dict(loaded.get("config", loaded))


def _answered(doc: dict[str, Any] | bytes, access: ReviewAccess | None = None) -> dict[str, Any]:
    """The webhook's answer to ``doc`` (a SpecServer, or a raw body) from the API server."""
    body = doc if isinstance(doc, bytes) else json.dumps(_review("CREATE", doc)).encode()
    started = time.process_time()  # CPU time: the verdict holds on a busy machine
    answer = answer_body(
        body, lambda r: admission_response(r, access or (lambda _: {"allowed": True}), APISERVER)
    )
    assert time.process_time() - started < 2.0, "a review must answer well within its deadline"
    return dict(answer["response"])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_attention_heads", 0),  # was ZeroDivisionError, admitted by failurePolicy Ignore
        ("quantization_config", "fp8"),  # AttributeError
        ("rope_scaling", [1]),  # AttributeError
        ("rope_scaling", {"rope_type": "yarn", "factor": "x"}),  # ValueError: "not JSON" 400
    ],
)
def test_a_review_that_raises_is_refused_naming_the_exception(field: str, value: Any) -> None:
    target = qwen("qwen3-8b")
    target[field] = value
    doc = inline(flagship(), target, qwen("qwen3-8b-eagle3"))
    response = _answered(doc)
    assert response["allowed"] is False and response["uid"] == "r"
    message = response["status"]["message"]
    assert "Traceback" not in message and len(message) < 4000
    # The advisor's own check names the field; without it, the exception is named.
    assert field in message or "Error" in message, message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"request": 5}', "no request object"),
        (b'{"request": {"uid": 7, "operation": "CREATE"}}', "request.uid is not a string"),
        (b"[" * 5000 + b"]" * 5000, "nested more than"),
        (b'{"request": {"uid": "u", "object": ' + b"[" * 80 + b"]" * 80 + b"}}", "nested more"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_a_body_that_is_not_a_review_is_refused_saying_why(body: bytes, says: str) -> None:
    response = _answered(body)
    assert response["allowed"] is False
    assert says in response["status"]["message"], response["status"]["message"]
    assert response["uid"] in ("", "u")


def test_a_draft_kv_cache_dtype_sglang_refuses_is_refused_naming_the_field() -> None:
    doc = flagship()
    doc["spec"]["speculative"]["draftKvCacheDtype"] = "zzz"
    message = _answered(doc)["status"]["message"]
    assert "spec.speculative.draftKvCacheDtype: 'zzz' is not one of auto, bf16" in message
    assert "AssertionError" not in message
    doc["spec"]["speculative"]["draftKvCacheDtype"] = "fp8_e4m3"
    assert _answered(doc)["allowed"] is True


def test_the_webhook_refuses_what_the_pod_policy_refuses_with_the_operators_settings() -> None:
    """The same refusals as ConfigValid (speccheck.render_problems), under the admin's own
    settings: engine.env HF_TOKEN, a hostPath volume, a match-all toleration."""
    env = flagship(env=[{"name": "HF_TOKEN", "value": "x"}])
    assert "spec.engine.env[0].name: HF_TOKEN is set by the operator" in "".join(
        review_specserver(env).problems
    )
    host = flagship()
    host["spec"]["modelSource"]["volume"] = {"hostPath": "/data/models", "mountPath": "/models"}
    wildcard = flagship()
    wildcard["spec"]["resources"]["tolerations"] = [{"operator": "Exists"}]
    for doc, field in ((host, "volume.hostPath"), (wildcard, "tolerations[0]")):
        refused = review_specserver(doc).problems
        assert any(p.startswith("PodPolicyRefused: ") and field in p for p in refused), refused
        allowed = podpolicy.PodPolicy(allow_host_path=True, allow_wildcard_tolerations=True)
        assert review_specserver(doc, ReviewSettings(pod_policy=allowed)).allowed
    # The operator's settings object and the webhook's read the same variables.
    env_vars = {"SPECSERVER_ALLOW_HOST_PATH": "true"}
    assert podpolicy.PodPolicy.from_env(env_vars) == podpolicy.PodPolicy(allow_host_path=True)
    assert read_settings(env_vars).pod_policy == podpolicy.PodPolicy(allow_host_path=True)
    assert read_settings().pod_policy == ReviewSettings.from_env().pod_policy


def test_an_unauthenticated_review_learns_nothing_about_secret_access() -> None:
    """Without a verified client certificate no SubjectAccessReview is made: the answer is the
    same refusal whoever the userInfo names and whatever RBAC says."""
    asked: list[dict[str, Any]] = []

    def record(review: dict[str, Any]) -> dict[str, Any]:
        asked.append(review)
        return {"allowed": review["spec"]["user"] == "alice"}

    stranger = Caller(False, "no client certificate")
    answers = []
    for user in ("alice", "bob"):
        review = _review("CREATE", flagship())
        review["request"]["userInfo"] = {"username": user}
        for access in (AccessSettings(), AccessSettings(client_ca="/ca.crt")):
            settings = ReviewSettings(access=access)
            answer = admission_response(review, record, stranger, settings)["response"]
            answers.append((access.client_ca, answer["status"]["message"]))
            assert answer["allowed"] is False
    assert asked == []
    assert answers[0] == answers[2] and answers[1] == answers[3]  # alice's == bob's
    assert "SPECSERVER_WEBHOOK_CLIENT_CA" in answers[0][1]
    assert "spec.modelSource.hfTokenSecretRef.name" in answers[0][1]
    assert "did not come from the API server (no client certificate)" in answers[1][1]
    # The admin's opt-out: asked for any caller.
    trusting = ReviewSettings(access=AccessSettings(trust_unauthenticated=True))
    assert admission_response(_review("CREATE", flagship()), record, stranger, trusting)
    assert len(asked) == 1


def test_an_unauthenticated_review_records_no_grant_even_when_trusted() -> None:
    """Issue 37, finding 2: with SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED a hand-written review
    claiming system:masters was answered allowed and its grant recorded, so the tenant's pod
    got a Secret it cannot read. The review may be answered, but it approves nothing; the
    API server's own review still records its grant."""
    grants: list[tuple[Any, ...]] = []
    trusting = ReviewSettings(access=AccessSettings(trust_unauthenticated=True))
    doc = flagship()
    doc["metadata"].update(namespace="team-a", uid="obj-1", generation=7)
    review = _review("CREATE", doc)
    review["request"]["userInfo"] = {"username": "admin", "groups": ["system:masters"]}
    allow = lambda _: {"allowed": True}  # noqa: E731
    stranger = Caller(False, "no client certificate")
    answer = admission_response(review, allow, stranger, trusting, lambda *g: grants.append(g))
    assert answer["response"]["allowed"] is True
    assert grants == []
    admission_response(review, allow, APISERVER, trusting, lambda *g: grants.append(g))
    assert [g[2:4] for g in grants] == [("obj-1", 7)]


def test_an_allowed_review_records_its_grant_once_the_whole_verdict_is_allowed() -> None:
    grants: list[tuple[Any, ...]] = []

    def record(*grant: Any) -> None:
        grants.append(grant)

    doc = flagship()
    doc["metadata"].update(namespace="team-a", uid="obj-1", generation=3)
    allow = lambda _: {"allowed": True}  # noqa: E731
    review = _review("CREATE", doc)
    assert admission_response(review, allow, APISERVER, None, record)["response"]["allowed"]
    assert grants == [("team-a", "qwen3-8b", "obj-1", 3, "hf-token", "bob")]
    # Not for a dry run, nor when anything else refuses, nor for a caller not verified.
    grants.clear()
    dry = copy.deepcopy(review)
    dry["request"]["dryRun"] = True
    assert admission_response(dry, allow, APISERVER, None, record)["response"]["allowed"]
    bad = _review("CREATE", flagship(memFractionStatic=0.5, contextLength=100_000))
    assert not admission_response(bad, allow, APISERVER, None, record)["response"]["allowed"]
    assert not admission_response(review, allow, Caller(False, "x"), None, record)["response"][
        "allowed"
    ]
    assert grants == []

    # A grant record that fails refuses (fail closed), naming why.
    def broken(*_: Any) -> None:
        raise OSError("grant store unavailable")

    body = json.dumps(review).encode()
    answer = answer_body(body, lambda r: admission_response(r, allow, APISERVER, None, broken))[
        "response"
    ]
    assert answer["allowed"] is False and "OSError: grant store unavailable" in str(answer)
