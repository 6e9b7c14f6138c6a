"""The model hooks of SGLang 0.5.23 that decide speculative values, as a step of ``resolve_launch``.

``handle_model_specific_adjustments`` (``arg_groups/model_hook.py``) runs before the
speculative handler; for some architectures it sets ``max_running_requests`` itself, and the
speculative handler's reset to 48 (``if cfg.max_running_requests is None``) then never fires.
In 0.5.23 that is DeepSeek-V4 (``deepseek_v4_hook.apply_deepseek_v4_defaults``: 256, with or
without speculation, and only EAGLE with topk 1 or DSPARK, checked on the flags as given).
Called by ``resolve.Resolver.run``; records on the resolver. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specserver_advisor.sglang.resolve import Resolver

#: Architecture -> the ``max_running_requests`` its model hook sets when the flag is unset.
MODEL_MAX_RUNNING_REQUESTS = {"DeepseekV4ForCausalLM": 256}


def model_max_running_requests(arch: str) -> int | None:
    """The cap a model hook sets for ``arch`` when ``--max-running-requests`` is unset."""
    return MODEL_MAX_RUNNING_REQUESTS.get(arch)


def deepseek_v4(r: Resolver) -> None:
    """``apply_deepseek_v4_defaults``: the request limit and the speculative checks."""
    arch = r.arch
    if r.user("max_running_requests") is None:
        msg = f"Setting max_running_requests to {MODEL_MAX_RUNNING_REQUESTS[arch]} for {arch}."
        r.set("max_running_requests", MODEL_MAX_RUNNING_REQUESTS[arch], "forced", msg)
        r.warn(msg)
    algorithm = r.user("speculative_algorithm")
    if algorithm is None:
        return
    # The flag as given: the NEXTN -> EAGLE alias and upper-casing come later, in the
    # speculative handler, and the auto-chosen topk is not set yet.
    if algorithm not in ("EAGLE", "DSPARK"):
        r.fail(
            f"Only EAGLE and DSPARK speculative algorithms are supported for {arch}",
            "speculative_algorithm",
            exc="AssertionError",
        )
    elif algorithm == "EAGLE" and r.user("speculative_eagle_topk") != 1:
        r.fail(
            f"Only EAGLE speculative algorithm with topk == 1 is supported for {arch}",
            "speculative_eagle_topk",
            exc="AssertionError",
        )


def model_hooks(r: Resolver) -> None:
    """The hook for the target's architecture, if it has one that decides these values."""
    if r.arch == "DeepseekV4ForCausalLM":
        deepseek_v4(r)
