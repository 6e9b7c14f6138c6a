"""extraArgs that let clients or a model repository run code in the engine (issue 25, finding 7):
refused in every spelling argparse accepts unless the admin allows them (podpolicy.py)."""

from __future__ import annotations

import copy

import pytest
from operatorfakes import SPEC, FakeClient

from specserver_advisor.models import SpecServer
from specserver_operator.core import podpolicy
from specserver_operator.reconcile import controller
from specserver_operator.reconcile.runsettings import Settings

SPELLINGS = [
    "--trust-remote-code",
    "--trust-remote",  # a unique prefix: argparse takes it
    "--enable-custom-logit-processor",
    "--enable-custom-logit",
    "--trust-remote-code=true",
]


def spec_with(*extra: str) -> SpecServer:
    doc = copy.deepcopy(SPEC)
    doc["spec"]["engine"]["extraArgs"] = list(extra)
    return SpecServer.model_validate(doc)


@pytest.mark.parametrize("flag", SPELLINGS)
def test_every_spelling_is_refused_naming_the_flag_and_the_setting(flag: str) -> None:
    refused = podpolicy.refusal(
        spec_with("--kv-cache-dtype", "fp8_e4m3", flag).spec, podpolicy.PodPolicy()
    )
    assert refused is not None
    assert refused.startswith("spec.engine.extraArgs[2]: ")
    assert "SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS" in refused
    canonical = next(f for f in podpolicy.CODE_EXECUTION_FLAGS if f.startswith(flag.split("=")[0]))
    assert canonical in refused


def test_the_admin_setting_allows_them_and_other_flags_pass() -> None:
    allowed = podpolicy.PodPolicy.from_env({"SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS": "true"})
    assert podpolicy.refusal(spec_with("--trust-remote-code").spec, allowed) is None
    plain = spec_with("--kv-cache-dtype", "fp8_e4m3", "--enable-metrics")
    assert podpolicy.refusal(plain.spec, podpolicy.PodPolicy()) is None
    # A value that merely looks like the flag is not an option.
    assert (
        podpolicy.refusal(spec_with("--served-model-name", "trust").spec, podpolicy.PodPolicy())
        is None
    )


def test_a_refused_flag_renders_no_engine() -> None:
    client = FakeClient()
    body = copy.deepcopy(SPEC)
    body["spec"]["mode"] = "Enabled"
    body["spec"]["engine"]["extraArgs"] = ["--enable-custom-logit-processor"]
    body["status"] = {}
    controller.clear_caches()
    controller.reconcile(client, body, "2026-01-01T00:00:00Z", Settings(), now_ts=1000.0)  # type: ignore[arg-type]
    valid = next(c for c in client.status["conditions"] if c["type"] == "ConfigValid")
    assert (valid["status"], valid["reason"]) == ("False", "PodPolicyRefused")
    assert "--enable-custom-logit-processor" in valid["message"]
    assert client.deployment is None
