"""SGLang's captured decode CUDA-graph batch sizes, and the batch a graph replay runs.

A decode batch up to the captured max replays the smallest captured graph that holds it
(``_pad_to_bucket``): the padding rows run every linear layer like real ones, so a verify of
``num_draft_tokens`` positions per request computes them for the padded batch. Used by the
performance model (``perfmodel.gpu_step_time``) and SGLang's adaptive mode (``adaptive``).
"""

from __future__ import annotations

import bisect
from functools import lru_cache


def graph_batch_sizes(max_bs: int | None, speculative: bool = False) -> list[int] | None:
    """SGLang 0.5.23's captured decode batch sizes up to ``max_bs``
    (``generate_decode_cuda_graph_batch_sizes``): 1, 2, 4, 8, 12, every 8 to 256, every 16 to
    512, every 32 beyond; a speculative launch captures a finer list (1-8, then every 2 to 32,
    every 4 to 64, every 8 to 256, every 16 beyond), the one SGLang's adaptive tiers pad to
    (tests/oracle/test_adaptive_tiers.py holds it); ``max_bs`` itself always."""
    sizes = _graph_batch_sizes(max_bs, speculative)
    return None if sizes is None else list(sizes)


@lru_cache(maxsize=256)
def _graph_batch_sizes(max_bs: int | None, speculative: bool) -> tuple[int, ...] | None:
    """``graph_batch_sizes`` computed once per (max, mode): every forward of a plan asks."""
    if max_bs is None:
        return None
    if not speculative:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16)]
        sizes += list(range(512, max_bs + 1, 32))
    else:
        sizes = [
            *range(1, 9),
            *range(10, 33, 2),
            *range(40, 65, 4),
            *range(72, 257, 8),
            *range(272, max_bs + 1, 16),
        ]
    sizes = [b for b in sizes if b <= max_bs]
    return tuple(sizes) if max_bs in sizes else (*sizes, max_bs)


def replayed_batch(batch: int, max_bs: int | None, speculative: bool = False) -> int:
    """The batch a decode forward of ``batch`` requests computes: the captured size it pads
    to, or ``batch`` itself above the captured max (eager) or with no graph sizes known."""
    sizes = _graph_batch_sizes(max_bs, speculative)
    if not sizes or batch > sizes[-1]:
        return batch
    return sizes[bisect.bisect_left(sizes, batch)]
