"""Ready's reason and message carry the first real cause (pure compute_status)."""

from __future__ import annotations

from typing import Any

from specserver_advisor.launch.model import EngineConfig
from specserver_operator.core import conditions as cond
from specserver_operator.core.status import compute_status

DOES_NOT_FIT = "does not fit on 1 x L4: needs >= 4 GPUs or a quantized checkpoint"


def ready(
    cfg: EngineConfig | None,
    config_error: str | None = None,
    deployment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    status = compute_status(
        generation=2,
        current={},
        cfg=cfg,
        config_error=config_error,
        deployment=deployment,
        replicas=1,
        now="2026-01-01T00:00:00Z",
    )
    found = cond.get_condition(status["conditions"], cond.READY)
    assert found is not None
    return cond.as_api([found])[0]


def deployment(ready_replicas: int) -> dict[str, Any]:
    return {
        "metadata": {"generation": 3, "labels": {"specserver.io/mode": "on"}},
        "status": {
            "observedGeneration": 3,
            "readyReplicas": ready_replicas,
            "updatedReplicas": 1,
        },
    }


def approved(uid: str) -> dict[str, str]:
    """A grant approving Secret hf-token for generation 1 (secretgrants.py)."""
    from specserver_operator.kube.secretgrants import grant_patch

    patch = grant_patch(None, "llm", "x", uid, 1, "hf-token", "alice")
    return {k: v for k, v in patch.items() if v is not None}


def test_an_invalid_spec_names_its_rule_code_and_message_in_ready() -> None:
    got = ready(EngineConfig(False, "SPEC016", DOES_NOT_FIT))
    assert got["status"] == "False" and got["reason"] == "SPEC016"
    assert got["message"].startswith(DOES_NOT_FIT) and "nothing deployed" in got["message"]


def test_unreadable_configs_name_the_missing_secret() -> None:
    got = ready(None, config_error="Secret llm/hf-token not found")
    assert got["reason"] == "ConfigUnavailable"
    assert got["message"].startswith("Secret llm/hf-token not found")


def test_an_invalid_change_keeps_the_running_engine_and_says_so() -> None:
    got = ready(EngineConfig(False, "SPEC002", "draft context shorter"), deployment=deployment(0))
    assert got["reason"] == "SPEC002" and "the running engine is kept" in got["message"]
    serving = ready(EngineConfig(False, "SPEC002", "draft context shorter"), None, deployment(1))
    assert serving["status"] == "True"  # the old engine still serves


def test_a_valid_spec_waiting_for_its_engine_says_engine_not_ready() -> None:
    got = ready(EngineConfig(True, "Valid", "ok"), deployment=deployment(0))
    assert (got["reason"], got["message"]) == ("EngineNotReady", "0/1 engine replicas ready")


def test_no_prometheus_url_is_named_as_the_cause_not_metrics_stale() -> None:
    from specserver_advisor.models import SpecServerSpec
    from specserver_advisor.policy.model import NEUTRAL_CONTEXT, SpecMode
    from specserver_operator.core.autopilot import NO_PROMETHEUS_URL, auto_step

    spec = SpecServerSpec.model_validate(
        {
            "model": {"path": "Qwen/Qwen3-8B"},
            "speculative": {"algorithm": "NGRAM"},
            "resources": {"gpuType": "L4"},
        }
    )
    step = auto_step(
        spec, {}, None, None, None, NO_PROMETHEUS_URL, NEUTRAL_CONTEXT, SpecMode.ON, True, 1000.0
    )
    assert step.metrics_condition[:2] == ("False", "NoPrometheusURL")
    ((kind, reason, message),) = step.events
    assert (kind, reason) == ("Warning", "MetricsStale")
    assert message.startswith("kept speculation on: no Prometheus URL configured")
    again = auto_step(
        spec,
        {"lastDecisionReason": "MetricsStale"},
        None,
        None,
        None,
        NO_PROMETHEUS_URL,
        NEUTRAL_CONTEXT,
        SpecMode.ON,
        True,
        1010.0,
    )
    assert not again.events  # once, not every cycle


def test_a_missing_token_secret_warns_once_whatever_the_config_source() -> None:
    import copy

    from operatorfakes import SPEC, FakeClient

    from specserver_operator.reconcile import controller

    class NoSecret(FakeClient):
        secret = False
        reads = 0

        def secret_exists(self, namespace: str, name: str) -> bool:
            self.reads += 1
            return self.secret

        def get_secret_grant(self, namespace: str, uid: str, generation: int) -> dict[str, str]:
            return approved(uid)

    client = NoSecret()
    body = copy.deepcopy(SPEC)
    body["metadata"]["uid"] = "u-secret"
    body["spec"]["mode"] = "Enabled"  # bundled configs: the Secret is not needed to read them
    body["spec"]["modelSource"] = {"hfTokenSecretRef": {"name": "hf-token"}}

    def reconcile(now: float) -> list[tuple[str, str, str]]:
        body["status"] = copy.deepcopy(client.status)
        out = controller.reconcile(client, body, "2026-01-01T00:00:00Z", now_ts=now)  # type: ignore[arg-type]
        return out.events

    first = reconcile(1000.0)
    warned = [(t, m) for t, r, m in first if r == "SecretNotFound"]
    assert warned and warned[0][0] == "Warning"
    assert "Secret llm/hf-token not found" in warned[0][1]
    valid = next(c for c in client.status["conditions"] if c["type"] == "ConfigValid")
    assert valid["status"] == "True" and "SecretNotFound" in valid["message"]
    assert not [r for _, r, _ in reconcile(1005.0) if r == "SecretNotFound"]  # once
    assert client.reads == 1  # not re-read every pass
    client.secret = True
    reconcile(1070.0)
    valid = next(c for c in client.status["conditions"] if c["type"] == "ConfigValid")
    assert "SecretNotFound" not in valid["message"]


def test_a_lasting_problem_is_logged_once_not_every_cycle(monkeypatch: Any, caplog: Any) -> None:
    import logging

    from specserver_operator.loop.cycle import Cycle
    from specserver_operator.reconcile import controller

    answers = iter(["Secret llm/hf-token not found"] * 3 + [None, None])
    monkeypatch.setattr(
        controller, "reconcile", lambda *a, **k: controller.Outcome(retry=next(answers))
    )
    cycle = Cycle(client=None)  # type: ignore[arg-type]
    body = {"metadata": {"namespace": "llm", "name": "x", "uid": "u-log"}}
    with caplog.at_level(logging.INFO):
        for _ in range(5):
            cycle._pass(None, body)  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records if "llm/x" in r.getMessage()]
    assert lines == ["llm/x: Secret llm/hf-token not found", "llm/x: recovered"]


def test_no_right_to_read_secrets_means_no_warning_and_no_retry_storm() -> None:
    import copy

    from operatorfakes import SPEC, FakeClient

    from specserver_operator.kube.errors import ApiError
    from specserver_operator.reconcile import controller

    class Forbidden(FakeClient):
        reads = 0

        def secret_exists(self, namespace: str, name: str) -> bool:
            self.reads += 1
            raise ApiError(f"Secret {namespace}/{name}: 403 forbidden", 403)

        def get_secret_grant(self, namespace: str, uid: str, generation: int) -> dict[str, str]:
            return approved(uid)

    client = Forbidden()
    body = copy.deepcopy(SPEC)
    body["metadata"]["uid"] = "u-forbidden"
    body["spec"]["mode"] = "Enabled"
    body["spec"]["modelSource"] = {"hfTokenSecretRef": {"name": "hf-token"}}
    body["status"] = {}
    out = controller.reconcile(client, body, "2026-01-01T00:00:00Z", now_ts=1000.0)  # type: ignore[arg-type]
    assert not [r for _, r, _ in out.events if r == "SecretNotFound"]
    valid = next(c for c in client.status["conditions"] if c["type"] == "ConfigValid")
    assert valid["status"] == "True"
    body["status"] = copy.deepcopy(client.status)
    controller.reconcile(client, body, "2026-01-01T00:00:00Z", now_ts=1005.0)  # type: ignore[arg-type]
    assert client.reads == 1  # unknown is remembered for the minute too
