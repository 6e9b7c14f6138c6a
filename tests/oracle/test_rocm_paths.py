"""SGLang 0.5.23's ROCm (``is_hip``) decisions that the launch model encodes, held to SGLang's
own functions: each is read out of the installed source and run here on stubbed platform facts
(the oracle worker simulates CUDA cards only: ``launches.ORACLE_GPUS``).

- ``get_default_attn_backend``'s HIP arms (``arg_groups/model_override_base.py``): aiter for MHA;
  for MLA aiter when the rank's KV heads are 16 or 128, else triton.
- ``_should_auto_enable_hip_rejection_sampling`` (``arg_groups/speculative_hook.py``): EAGLE
  chains verify by rejection sampling by default on HIP, EAGLE3 and trees do not.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

from oracle import sglang_function
from specserver_advisor.gpus import GPUS, lookup_gpu
from specserver_advisor.sglang.resolve import resolve_launch
from specserver_advisor.sglang.resolve_eagle import hip_rejection_sampling_default
from specserver_advisor.sglang.serverargs import _mla_heads, default_attention_backend

ROCM = sorted(name for name, gpu in GPUS.items() if gpu.rocm)


def _hip_platform() -> SimpleNamespace:
    return SimpleNamespace(
        is_hip=True,
        is_hopper_with_cuda_12_3=False,
        is_sm100=False,
        has_flashinfer=False,
        is_out_of_tree=lambda: False,
    )


def _sglang_default_backend() -> Any:
    platform = _hip_platform()
    return sglang_function(
        "srt/arg_groups/model_override_base.py",
        "get_default_attn_backend",
        {
            "resolving_view": lambda args: args,
            "resolved_view": lambda args: args,
            "current_platform": platform,
            "get_platform": lambda: platform,
            "is_mps": lambda: False,
            "is_no_spec_infer_or_topk_one": lambda args: True,
            "_forces_eagle_topk_one": lambda algorithm: False,
        },
    )


def _model_config(config: dict[str, Any]) -> SimpleNamespace:
    """SGLang's ``get_num_kv_heads`` on a config's attribute order (``get_total_num_kv_heads``)."""
    keys = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
    total = next((config[k] for k in keys if config.get(k) is not None), None)
    total = config["num_attention_heads"] if total is None else total
    return SimpleNamespace(
        hf_config=SimpleNamespace(architectures=["DeepseekV3ForCausalLM"]),
        has_asymmetric_kv=False,
        has_attention_sinks=False,
        get_num_kv_heads=lambda tp: max(1, total // tp),
    )


def test_rocm_attention_backend_defaults_match_sglangs() -> None:
    sglang_backend = _sglang_default_backend()
    configs = [
        {"num_attention_heads": 128, "num_key_value_heads": 128},  # DeepSeek-V3 / R1
        {"num_attention_heads": 64, "num_key_value_heads": 64},  # Kimi-K2
        {"num_attention_heads": 16, "num_key_value_heads": 16},  # DeepSeek-V2-Lite
        {"num_attention_heads": 128, "num_key_value_heads": 16},  # heads != KV heads
        {"num_attention_heads": 32},  # no KV-head attribute
    ]
    seen = set()
    for name, config, tp, mla in itertools.product(ROCM, configs, (1, 2, 4, 8, 16), (False, True)):
        args = SimpleNamespace(tp_size=tp, speculative_algorithm=None, speculative_eagle_topk=None)
        want = sglang_backend(args, mla, _model_config(config))
        full = {"architectures": ["DeepseekV3ForCausalLM"], "kv_lora_rank": 512, **config}
        got = default_attention_backend(
            lookup_gpu(name), mla, {"tp_size": tp}, "DeepseekV3ForCausalLM", _mla_heads(full)
        )
        assert got == want, (name, config, tp, mla)
        seen.add(want)
    assert seen == {"aiter", "triton"}


def test_hip_rejection_sampling_default_matches_sglangs() -> None:
    sglang_rule = sglang_function(
        "srt/arg_groups/speculative_hook.py",
        "_should_auto_enable_hip_rejection_sampling",
        {"Optional": Any},
    )
    grid = itertools.product(
        (False, True),
        ("EAGLE", "EAGLE3", "STANDALONE", "NGRAM"),
        (None, "/models/token_map.pt"),
        (1, 4),
        (1.0, 0.5),
        (1.0, 0.9),
        (False, True),
    )
    decided = set()
    for use, algorithm, token_map, topk, single, acc, deterministic in grid:
        kwargs = dict(
            use_rejection_sampling=use,
            algorithm=algorithm,
            token_map=token_map,
            eagle_topk=topk,
            accept_threshold_single=single,
            accept_threshold_acc=acc,
            enable_deterministic_inference=deterministic,
        )
        want = sglang_rule(is_hip=True, simulate_acc_len=-1.0, **kwargs)
        assert hip_rejection_sampling_default(**kwargs) == want, kwargs
        decided.add(want)
    assert decided == {True, False}


def test_resolver_turns_rejection_sampling_on_for_mtp_on_rocm_only() -> None:
    """DeepSeek's NEXTN (an EAGLE chain) on an AMD card verifies by rejection sampling; on an
    NVIDIA card, or as an EAGLE3 draft or a tree, it stays greedy-or-sampled as on CUDA."""
    config = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}
    chain = {
        "speculative_algorithm": "NEXTN",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
    }
    on_amd = resolve_launch(chain, config, None, hip=True)
    assert not on_amd.errors
    value = on_amd.values["speculative_use_rejection_sampling"]
    assert value.value is True and value.source == "derived"
    on_nvidia = resolve_launch(chain, config, None)
    assert not on_nvidia.get("speculative_use_rejection_sampling")
    tree = {**chain, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}
    assert not resolve_launch(tree, config, None, hip=True).get(
        "speculative_use_rejection_sampling"
    )


def _sglang_rccl_check(hip: bool) -> Any:
    platform = SimpleNamespace(is_hip=hip)
    return sglang_function(
        "srt/arg_groups/overrides.py",
        "_deterministic_rocm_rccl_check",
        {"Any": Any, "get_platform": lambda: platform},
    )


def _sglang_refuses(check: Any, view: SimpleNamespace) -> str | None:
    try:
        check(view)
    except ValueError as exc:
        return str(exc)
    return None


def test_deterministic_rocm_all_reduce_refusal_matches_sglangs() -> None:
    """``_deterministic_rocm_rccl_check``: deterministic inference on ROCm above TP 2 needs the
    custom all-reduce; --rl-on-policy-target turns deterministic inference on first
    (``handle_deterministic_inference``). The resolver refuses exactly those launches, with
    SGLang's message, and only on an AMD card."""
    config = {"architectures": ["Qwen3ForCausalLM"]}
    grid = itertools.product(
        (False, True), (None, "fsdp"), (1, 2, 3, 4, 8), (False, True), (False, True)
    )
    refused = 0
    for deterministic, rl_target, tp, disabled, hip in grid:
        args: dict[str, Any] = {"tp_size": tp}
        if deterministic:
            args["enable_deterministic_inference"] = True
        if rl_target:
            args["rl_on_policy_target"] = rl_target
        if disabled:
            args["disable_custom_all_reduce"] = True
        view = SimpleNamespace(
            enable_deterministic_inference=deterministic or rl_target is not None,
            tp_size=tp,
            disable_custom_all_reduce=disabled,
        )
        want = _sglang_refuses(_sglang_rccl_check(hip), view)
        got = resolve_launch(args, config, None, hip=hip)
        messages = [e.message for e in got.errors]
        assert messages == ([want] if want else []), (args, hip)
        if rl_target:
            assert got.get("enable_deterministic_inference") is True, args
        refused += bool(want)
    assert refused == 9  # (flag, rl target, both) x TP 3, 4, 8, custom all-reduce off, ROCm
