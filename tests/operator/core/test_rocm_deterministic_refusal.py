"""A SpecServer that SGLang 0.5.23 refuses only on ROCm: deterministic inference with the custom
all-reduce off above TP 2 (``_deterministic_rocm_rccl_check``). The operator refuses it on an
AMD gpuType in both modes (ConfigValid False, reason SPEC019, SGLang's own words) and renders the
same spec on an NVIDIA card, where the flags start; without ``--disable-custom-all-reduce`` the
AMD spec renders. The lint fixtures of SPEC019 are the two specs. An attention backend that
deterministic inference refuses (``sglang.cardchecks``) is refused the same way on any card."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.models import SpecServer
from stack import REPO, load_config

QWEN = ModelConfigs(load_config("qwen3-8b"), load_config("qwen3-8b-eagle3"), None, None, "t")
FIXTURES = REPO / "tests" / "advisor" / "fixtures" / "spec019"


def spec(name: str, **resources: Any) -> SpecServer:
    doc: dict[str, Any] = yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())
    doc["spec"]["resources"].update(resources)
    return SpecServer.model_validate(doc)


@pytest.mark.parametrize("speculative", [True, False])
def test_the_operator_refuses_it_on_an_amd_card_in_either_mode(speculative: bool) -> None:
    cfg = build_engine_config(spec("fail").spec, QWEN, speculative)
    assert not cfg.valid and cfg.reason == "SPEC019" and cfg.args == []
    assert "--disable-custom-all-reduce cannot be combined with" in cfg.message
    assert "on ROCm when --tp-size is above 2" in cfg.message


@pytest.mark.parametrize(
    ("name", "resources"),
    [
        ("fail", {"gpuType": "H100", "gpuResourceName": "nvidia.com/gpu"}),
        ("fail", {"gpus": 2}),
        ("pass", {}),
    ],
    ids=["same flags on H100", "TP 2 on MI300X", "custom all-reduce kept"],
)
def test_it_renders_where_sglang_starts(name: str, resources: dict[str, Any]) -> None:
    cfg = build_engine_config(spec(name, **resources).spec, QWEN, True)
    assert cfg.valid, cfg.message
    assert "--enable-deterministic-inference" in cfg.args


def test_the_operator_refuses_an_attention_backend_deterministic_inference_refuses() -> None:
    server = spec("pass", gpuType="H100", gpuResourceName="nvidia.com/gpu")
    args = server.spec.engine.extra_args
    for backend, refused in (("trtllm_mha", True), ("fa3", False)):
        server.spec.engine.extra_args = [*args, "--attention-backend", backend]
        cfg = build_engine_config(server.spec, QWEN, True)
        assert cfg.valid is not refused, cfg.message
        if refused:
            assert cfg.reason == "StartupError"
            assert f"but you explicitly specified '{backend}'" in cfg.message
