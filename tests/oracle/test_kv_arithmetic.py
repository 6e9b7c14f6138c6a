"""KV arithmetic against SGLang's own pool-sizing functions, called with explicit numbers.

``configure_kv_cache_dtype`` (mem_cache/kv_cache_dtype.py) runs on a CPU: the advisor's bytes
per KV element must match it for every ``--kv-cache-dtype``, checkpoint quant config and draft
override. What cannot be called on a CPU is listed in docs/advisor.md with the reason.
"""

from __future__ import annotations

import pytest

import oracle
from specserver_advisor.sglang import memory
from specserver_advisor.sglang.modelshape import shape_from_config, with_launch_dtype
from stack import load_config


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8_e4m3", "fp8_e5m2", "bf16", "bfloat16"])
@pytest.mark.parametrize("kv_quant", [None, "FP8", "fp8", "INT8"])
@pytest.mark.parametrize("model_dtype", ["bfloat16", "float16", "float32"])
def test_kv_element_bytes_match_configure_kv_cache_dtype(
    sglang: oracle.Oracle, kv_cache_dtype: str, kv_quant: str | None, model_dtype: str
) -> None:
    quant = {"quant_method": "fp8", "kv_cache_quant_algo": kv_quant} if kv_quant else None
    cfg = dict(load_config("qwen3-8b"), torch_dtype=model_dtype, quantization_config=quant)
    theirs = sglang.kv_dtype_bytes(
        kv_cache_dtype=kv_cache_dtype, kv_cache_quant_algo=kv_quant, model_dtype=model_dtype
    )
    assert theirs["outcome"] == "accepted", theirs
    assert memory.kv_dtype_bytes(kv_cache_dtype, shape_from_config(cfg)) == theirs["bytes"]


@pytest.mark.parametrize(
    "launch_dtype", ["auto", "half", "float16", "bfloat16", "float", "float32"]
)
@pytest.mark.parametrize("config_dtype", ["bfloat16", "float16", "float32", None])
def test_launch_dtype_sets_weight_and_kv_bytes_as_sglang_resolves_it(
    sglang: oracle.Oracle, launch_dtype: str, config_dtype: str | None
) -> None:
    # --dtype against the config's torch_dtype (_get_and_verify_dtype): auto runs a float32
    # (or dtype-less) checkpoint in float16; KV auto follows the resolved model dtype.
    cfg = dict(load_config("qwen3-8b"), torch_dtype=config_dtype)
    theirs = sglang.kv_dtype_bytes(kv_cache_dtype="auto", launch_dtype=launch_dtype, config=cfg)
    assert theirs["outcome"] == "accepted", theirs
    ours = with_launch_dtype(shape_from_config(cfg), launch_dtype)
    assert ours.dtype_bytes == theirs["model_bytes"]
    assert memory.kv_dtype_bytes("auto", ours) == theirs["bytes"]


def test_eagle_draft_kv_dtype_is_not_what_sizes_the_pool(sglang: oracle.Oracle) -> None:
    # The draft worker may run FP8 KV, but the pool's draft share is sized in the target's
    # dtype (pool_configurator.py); only a DFLASH fa4 draft keeps a different dtype.
    draft = sglang.kv_dtype_bytes(
        kv_cache_dtype="auto", draft=True, draft_kv_cache_dtype="fp8_e4m3"
    )
    assert draft["bytes"] == 1
    target = shape_from_config(load_config("qwen3-8b"))
    eagle = shape_from_config(load_config("qwen3-8b-eagle3"))
    plan = memory.plan_memory
    args = (target, target.weight_bytes(), eagle, 10**9, "EAGLE3")
    from specserver_advisor.gpus import lookup_gpu

    gpu = lookup_gpu("L4")
    assert (
        plan(
            gpu, *args, draft_kv_cache_dtype="fp8_e4m3", mem_fraction_static=0.85
        ).cell_bytes_with_draft
        == plan(gpu, *args, mem_fraction_static=0.85).cell_bytes_with_draft
    )
