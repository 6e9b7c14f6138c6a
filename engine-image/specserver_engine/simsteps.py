"""What one step of the simulated engine's scheduler runs, and how long it takes (pure).

SGLang 0.5.23's ``get_next_batch_to_run`` runs a prefill batch whenever one is waiting, ahead of
the decode batch: a prefill batch takes at most ``--chunked-prefill-size`` prompt tokens (the
prompt in progress first, then new ones; the last one may be cut, and its rest goes in the next
step), so a long prompt is prefilled over several steps and the running decodes wait for all of
them. With ``--enable-mixed-chunk`` each prefill chunk runs in one forward with the decodes in
flight, so they advance one step per chunk. A step's time is the performance model's: the
chunks' prefill compute (``perfmodel.prefill_chunk_time``) plus the decode step's GPU time,
combined with the scheduler's CPU work as the overlap scheduler does or, with it off, in series
(``perfmodel.scheduled_step_time``). Used by simengine.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specserver_advisor.perfmodel import (
    Calibration,
    Scenario,
    prefill_chunk_time,
    scheduled_step_time,
)


@dataclass(frozen=True)
class Piece:
    """Prompt tokens ``start``..``end`` of pending request ``index`` prefilled in one step."""

    index: int
    start: int
    end: int


def prefill_pieces(pending: Sequence[tuple[int, int]], chunk: int | None) -> list[Piece]:
    """The prefill batch of one step over ``pending`` (tokens prefilled so far, prompt tokens),
    in admission order: whole prompts while the chunk budget lasts, the last one cut to it.
    """
    budget = chunk
    pieces: list[Piece] = []
    for index, (done, prompt) in enumerate(pending):
        if budget is not None and budget <= 0:
            break
        left = prompt - done
        take = left if budget is None else min(left, budget)
        if take <= 0:
            continue
        pieces.append(Piece(index, done, done + take))
        if budget is not None:
            budget -= take
    return pieces


def decodes_run(pieces: Sequence[Piece], mixed_chunk: bool) -> bool:
    """Whether the running decodes advance in a step with this prefill batch."""
    return not pieces or mixed_chunk


def step_seconds(
    scn: Scenario,
    pieces: Sequence[Piece],
    decode_gpu_s: float,
    decoding: int,
    speculative: bool,
    cal: Calibration,
) -> float:
    """Modelled seconds of one step: its prefill chunks and (``decoding`` requests) decode."""
    gpu = sum(prefill_chunk_time(scn, p.start, p.end, speculative, cal) for p in pieces)
    return scheduled_step_time(scn, gpu + decode_gpu_s, decoding + len(pieces), cal)
