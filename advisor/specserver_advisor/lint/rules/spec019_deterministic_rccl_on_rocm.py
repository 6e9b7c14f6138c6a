"""SPEC019 deterministic-rccl-on-rocm.

What it does:
    Flags deterministic inference (``--enable-deterministic-inference``, or
    ``--rl-on-policy-target``, which turns it on) with ``--disable-custom-all-reduce`` above
    ``--tp-size 2`` on an AMD card (the launch's GPU type: ``--gpu``, a SpecServer's gpuType).
Why it matters:
    SGLang 0.5.23 keeps deterministic tensor parallelism on ROCm batch-invariant with its
    one-stage custom all-reduce; RCCL's results change with the batch above two ranks, so it
    raises ValueError at startup (``_deterministic_rocm_rccl_check``). On an NVIDIA card the
    same flags start (deterministic inference turns the custom all-reduce off there itself).
Example (fails):
    --tp-size 4 --enable-deterministic-inference --disable-custom-all-reduce   (on MI300X)
Use instead:
    Drop --disable-custom-all-reduce (the custom all-reduce is what keeps it deterministic),
    or run --tp-size 2 or less.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag, resolution
from specserver_advisor.sglang.resolve_deterministic import ROCM_RCCL_MESSAGE

CODE = "SPEC019"
NAME = "deterministic-rccl-on-rocm"
SEVERITY = "error"
SUMMARY = "Deterministic inference without the custom all-reduce above TP 2 on an AMD card."
FIX = "Drop --disable-custom-all-reduce on ROCm, or run --tp-size 2 or less."
APPLIES_TO = ("server", "specserver")
FIELDS = ("disable_custom_all_reduce", "enable_deterministic_inference", "tp_size")


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    if launch.unresolved_fields & set(FIELDS):
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("disable_custom_all_reduce"),
            f"SGLang raises ValueError at startup: {e.message}",
        )
        for e in resolution(launch).errors
        if e.message == ROCM_RCCL_MESSAGE
    ]
