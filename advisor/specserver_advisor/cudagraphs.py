"""SGLang's captured decode CUDA-graph batch sizes, and the batch a graph replay runs.

A decode batch up to the captured max replays the smallest captured graph that holds it
(``_pad_to_bucket``): the padding rows run every linear layer like real ones, so a verify of
``num_draft_tokens`` positions per request computes them for the padded batch. Used by the
performance model (``perfmodel.gpu_step_time``) and SGLang's adaptive mode (``adaptive``).
"""

from __future__ import annotations

import bisect


def graph_batch_sizes(max_bs: int | None) -> list[int] | None:
    """SGLang's captured decode batch sizes up to ``max_bs`` (1, 2, 4, 8, 12, then every 8)."""
    if max_bs is None:
        return None
    sizes = [b for b in (1, 2, 4, 8, 12) if b <= max_bs]
    sizes += list(range(16, max_bs + 1, 8))
    return sizes or [max_bs]


def replayed_batch(batch: int, max_bs: int | None) -> int:
    """The batch a decode forward of ``batch`` requests computes: the captured size it pads
    to, or ``batch`` itself above the captured max (eager) or with no graph sizes known."""
    sizes = graph_batch_sizes(max_bs)
    if not sizes or batch > sizes[-1]:
        return batch
    return sizes[bisect.bisect_left(sizes, batch)]
