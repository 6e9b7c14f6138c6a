"""Choosing ``--mem-fraction-static`` when SGLang's heuristic leaves no KV cache.

SGLang 0.5.23 sizes the KV pool as ``pre_load_free * mem_fraction_static - weights``
(``memory.plan_memory``); its heuristic fraction (0.701 on a 22.5 GiB L4) is below what an 8B
BF16 target plus an EAGLE-3 head need for their weights alone. The operator then renders the
smallest fraction whose pool holds the planned requests, never above ``CEILING``, or says
how many GPUs the model needs. Called by the launch model (``launch.settle``). Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specserver_advisor.sglang.memory import GIB, MemoryPlan

#: The highest fraction the operator renders on its own: SGLang keeps the rest of the card
#: (10%, 2.2 GiB on an L4) for activations, CUDA graphs and the allocator; above it engines
#: run out of memory at the first long prefill. A spec may still set more explicitly.
CEILING = 0.90


@dataclass(frozen=True)
class FractionChoice:
    """The outcome: a fraction to render, or why none fits."""

    fraction: float | None
    message: str


def fraction_for_tokens(mem: MemoryPlan, tokens: int, with_draft: bool) -> float:
    """The smallest fraction (3 decimals, rounded up) whose KV pool holds ``tokens`` tokens."""
    cell = mem.cell_bytes_with_draft if with_draft else mem.cell_bytes_target
    weights = mem.target_weight_gib + (mem.draft_weight_gib if with_draft else 0.0)
    need = weights + tokens * cell / GIB
    return math.ceil(need / mem.pre_load_free_gib * 1000) / 1000


def gpus_needed(mem: MemoryPlan, request_tokens: int, with_draft: bool, gpus: int) -> int:
    """A lower bound on the tensor-parallel size at which one request fits under ``CEILING``.

    Weights and KV heads split across ranks (at best evenly), so this never overstates.
    """
    cell = mem.cell_bytes_with_draft if with_draft else mem.cell_bytes_target
    weights = (mem.target_weight_gib + (mem.draft_weight_gib if with_draft else 0.0)) * gpus
    kv = request_tokens * cell * gpus / GIB
    usable = mem.pre_load_free_gib * CEILING
    n = 1
    while (weights + kv) / n > usable and n < 1024:
        n *= 2
    return max(n, gpus + 1)


def choose_fraction(
    mem: MemoryPlan,
    *,
    request_tokens: int,
    planned_requests: int,
    with_draft: bool,
    gpus: int,
    gpu_name: str,
) -> FractionChoice:
    """The fraction for ``planned_requests`` requests of ``request_tokens`` KV tokens each.

    Args:
        mem: the memory plan under SGLang's heuristic (the one that left no KV).
        request_tokens: KV tokens one request holds at its longest (input, output, draft slots).
        planned_requests: the cap the pool should hold (the spec's, else the card's batch tier).
        with_draft: the draft is loaded (speculation on).
        gpus: the tensor-parallel size; ``gpu_name`` the card, for the message.
    """
    heuristic = mem.settings.mem_fraction_static
    weights = mem.target_weight_gib + (mem.draft_weight_gib if with_draft else 0.0)
    one = fraction_for_tokens(mem, request_tokens, with_draft)
    if one > CEILING:
        need = gpus_needed(mem, request_tokens, with_draft, gpus)
        return FractionChoice(
            None,
            f"does not fit on {gpus} x {gpu_name}: needs >= {need} GPUs or a quantized "
            f"checkpoint ({weights:.1f} GiB of weights per GPU"
            f"{' with the draft' if with_draft else ''}; at most "
            f"{mem.pre_load_free_gib * CEILING:.1f} GiB usable at --mem-fraction-static "
            f"{CEILING})",
        )
    wanted = fraction_for_tokens(mem, request_tokens * max(1, planned_requests), with_draft)
    fraction = min(max(wanted, one), CEILING)
    why = (
        f"SGLang's heuristic --mem-fraction-static {heuristic} leaves no KV cache after "
        f"{weights:.1f} GiB of weights{' with the draft' if with_draft else ''}"
    )
    if wanted > CEILING:
        return FractionChoice(
            fraction,
            f"{why}; rendered {fraction}, the safe ceiling: the KV pool holds fewer than the "
            f"{planned_requests} planned requests of {request_tokens} tokens",
        )
    return FractionChoice(
        fraction,
        f"{why}; rendered {fraction}, the least whose KV pool holds the {planned_requests} "
        f"planned requests of {request_tokens} tokens",
    )
