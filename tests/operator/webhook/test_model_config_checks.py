"""Issue 31: the admission webhook reads a tenant's inline model config through the advisor's
one check (``configcheck.check_model_config``) and refuses a bad value naming the key, where it
raised a KeyError/AttributeError/ValueError before (ConfigValid:
tests/operator/core/test_desired.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from specserver_operator.webhook.admission import review_specserver
from stack import load_config


@pytest.mark.parametrize(
    ("role", "change", "says"),
    [
        ("target", {"architectures": {"a": 1}}, "target config: architectures: expected a list"),
        ("target", {"num_attention_heads": 0}, "target config: num_attention_heads: 0 is out"),
        ("target", {"rope_scaling": [1]}, "target config: rope_scaling: expected an object"),
        ("draft", {"max_position_embeddings": "NaN"}, "draft config: max_position_embeddings"),
        ("target", {"quantization_config": "fp8"}, "quantization_config: expected an object"),
    ],
)
def test_admission_refuses_a_bad_inline_config_naming_the_key(
    role: str, change: dict[str, Any], says: str
) -> None:
    configs = {"target": load_config("qwen3-8b"), "draft": load_config("qwen3-8b-eagle3")}
    configs[role] = {**configs[role], **change}
    obj = {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": "SpecServer",
        "metadata": {"name": "chat", "namespace": "team"},
        "spec": {
            "model": {"path": "Qwen/Qwen3-8B"},
            "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
            "speculative": {"algorithm": "EAGLE3"},
            "resources": {"gpuType": "L4"},
            "modelSource": {
                "inline": {
                    "targetConfig": json.dumps(configs["target"]),
                    "draftConfig": json.dumps(configs["draft"]),
                }
            },
        },
    }
    problems = review_specserver(obj).problems
    assert any(p.startswith("InvalidModelConfig: inline model config: ") for p in problems)
    assert any(says in p for p in problems), problems


def test_a_configmap_nested_deep_or_with_an_odd_index_names_the_key() -> None:
    from specserver_advisor.loaders.configchain import ConfigSourceError
    from specserver_operator.reconcile.configsource import from_configmap

    target = json.dumps(load_config("qwen3-8b"))
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(ConfigSourceError, match=r"ConfigMap m key target-config\.json: nested"):
        from_configmap("m", {"target-config.json": deep}, want_draft=False)
    odd = {"target-config.json": target, "target-index.json": '{"metadata": [1]}'}
    assert from_configmap("m", odd, want_draft=False).target_weight_bytes is None
    inf = {"target-config.json": target, "target-index.json": '{"metadata": {"total_size": 1e999}}'}
    assert from_configmap("m", inf, want_draft=False).target_weight_bytes is None
