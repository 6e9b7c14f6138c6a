"""SGLang 0.5.23's ``handle_deterministic_inference`` as far as a launch's acceptance goes (pure).

It runs after the model hooks and before the speculative hook
(``arg_groups/pipeline.py``):

- ``--rl-on-policy-target`` turns ``--enable-deterministic-inference`` on, with a warning, so
  every later step (the HIP rejection-sampling default, UNO's refusal) sees it on;
- on ROCm, deterministic tensor parallelism above two ranks relies on the one-stage custom
  all-reduce, so ``--disable-custom-all-reduce`` there is a startup error
  (``_deterministic_rocm_rccl_check``, ``arg_groups/overrides.py``).

What it does to the all-reduce itself on CUDA (NCCL's tree, custom all-reduce off) is the
performance model's (``perf.allreduceflags``); its attention-backend checks are not modelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specserver_advisor.sglang.resolve import Resolver

#: ``handle_deterministic_inference``'s warning, word for word.
RL_ON_POLICY_WARNING = "Enable deterministic inference because of rl_on_policy_target."
#: ``_deterministic_rocm_rccl_check``'s ValueError, word for word.
ROCM_RCCL_MESSAGE = (
    "--disable-custom-all-reduce cannot be combined with "
    "--enable-deterministic-inference on ROCm when --tp-size is above 2: "
    "the all-reduce would run through RCCL, which is not batch-invariant."
)


def deterministic(r: Resolver) -> None:
    """Record what deterministic inference decides about the launch, or the error it raises."""
    if r.cur("rl_on_policy_target") is not None:
        r.set("enable_deterministic_inference", True, "forced", RL_ON_POLICY_WARNING)
        r.warn(RL_ON_POLICY_WARNING)
    if not r.cur("enable_deterministic_inference"):
        return
    if r.hip and int(r.cur("tp_size") or 1) > 2 and r.cur("disable_custom_all_reduce"):
        r.fail(
            ROCM_RCCL_MESSAGE,
            "disable_custom_all_reduce",
            "enable_deterministic_inference",
            "tp_size",
        )
