"""What one step of the simulated engine's scheduler runs, and how long it takes (pure).

SGLang 0.5.23's ``get_next_batch_to_run`` runs a prefill batch whenever one is waiting, ahead of
the decode batch. ``PrefillAdder`` builds it from the prompt in progress (``add_chunked_req``)
and then the waiting queue in order (``add_one_req``) under two budgets: ``rem_chunk_tokens``
(``--chunked-prefill-size``; the last prompt is cut to it, its rest goes in the next step) and
``rem_input_tokens`` (``--max-prefill-tokens``, 16384 by default). Both start lower by the running
decodes with ``--enable-mixed-chunk``; admission stops once either is spent (``budget_state``),
and without chunking a further prompt is admitted only if it is shorter than what is left of
``rem_input_tokens``, while the first one goes in whole however long it is
(``_select_prefill_admission``). So a long prompt is prefilled over several steps and the
running decodes wait for all of them. With ``--enable-mixed-chunk`` each prefill chunk runs in
one forward with the decodes in flight, so they advance one step per chunk. A step's time is
the performance model's: the chunks' prefill compute (``perfmodel.prefill_chunk_time``) plus the
decode step's GPU time, no less than one forward's launches from Python when it prefills
(``perfmodel.prefill_floor_s``: prefill runs without a graph), combined with the scheduler's
CPU work as the overlap scheduler does or, with it off, in series
(``perfmodel.scheduled_step_time``). Used by engine.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specserver_advisor.perf.constants import Calibration
from specserver_advisor.perf.model import (
    Scenario,
    prefill_chunk_time,
    prefill_floor_s,
    scheduled_step_time,
)


@dataclass(frozen=True)
class PrefillPiece:
    """Prompt tokens ``start``..``end`` of pending request ``index`` prefilled in one step."""

    index: int
    start: int
    end: int


def prefill_pieces(
    pending: Sequence[tuple[int, int]],
    chunk: int | None,
    max_prefill: int | None = None,
    mixed_decodes: int = 0,
) -> list[PrefillPiece]:
    """The prefill batch of one step over ``pending`` (tokens prefilled so far, prompt tokens),
    in order: the prompt in progress first, then the admissible waiting prompts. As SGLang
    0.5.23's ``PrefillAdder`` with ``chunk`` = ``--chunked-prefill-size`` (None: no chunking),
    ``max_prefill`` = ``--max-prefill-tokens`` (None: no limit) and ``mixed_decodes`` running
    requests decoding in the same forward (``--enable-mixed-chunk``). A prompt not in the
    result stays where it is (waiting) for a later step.
    """
    rem_input = None if max_prefill is None else max_prefill - mixed_decodes
    rem_chunk = None if chunk is None else chunk - mixed_decodes
    pieces: list[PrefillPiece] = []
    for index, (done, prompt) in enumerate(pending):
        # budget_state: a spent budget admits no one, even before the first prompt.
        if (rem_input is not None and rem_input <= 0) or (rem_chunk is not None and rem_chunk <= 0):
            break
        left = prompt - done
        if left <= 0:
            continue
        # _select_prefill_admission: without chunking the first prompt goes in whole, even
        # above the input budget; a later one only if shorter than what the budget has left.
        if rem_chunk is None and pieces and rem_input is not None and left >= rem_input:
            break
        take = left if rem_chunk is None else min(left, rem_chunk)
        pieces.append(PrefillPiece(index, done, done + take))
        if rem_input is not None:
            rem_input -= take
        if rem_chunk is not None:
            rem_chunk -= take
    return pieces


def decodes_run(pieces: Sequence[PrefillPiece], mixed_chunk: bool) -> bool:
    """Whether the running decodes advance in a step with this prefill batch."""
    return not pieces or mixed_chunk


def step_seconds(
    scn: Scenario,
    pieces: Sequence[PrefillPiece],
    decode_gpu_s: float,
    decoding: int,
    speculative: bool,
    cal: Calibration,
    steps: int | None = None,
) -> float:
    """Modelled seconds of one step: its prefill chunks and (``decoding`` requests) decode
    (``steps``: the draft steps that decode runs, SGLang's adaptive tier; None: the launch's)."""
    gpu = sum(prefill_chunk_time(scn, p.start, p.end, speculative, cal) for p in pieces)
    if pieces:
        # A step with prefill pieces is one forward launched from Python (no graph): it takes
        # at least its launches, the decodes mixed into it included.
        gpu = max(gpu, prefill_floor_s(scn, speculative, cal) - decode_gpu_s)
    # Only a step whose decodes speculate pays a synchronous speculative worker's host work.
    speculating = speculative and decoding > 0
    return scheduled_step_time(
        scn, gpu + decode_gpu_s, decoding + len(pieces), cal, speculating, steps
    )
