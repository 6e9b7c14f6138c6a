"""Replay recorded observations through the auto-speculation policy.

``specserver-advisor replay`` reads JSON lines (or Prometheus range queries through
``loaders.prometheus``), feeds them in order to ``autocycle.evaluate`` (the operator's own
evaluation) as if each decision had been applied, and returns one decision per observation.
Deterministic for the same input.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specserver_advisor.bounded import InputLimitError, json_object
from specserver_advisor.launch.multinode import effective_policy
from specserver_advisor.loaders.reading import read_text
from specserver_advisor.models import AutoSpeculation, SpecServerSpec
from specserver_advisor.policy.autocycle import evaluate
from specserver_advisor.policy.model import (
    NEUTRAL_CONTEXT,
    Decision,
    Observation,
    PolicyContext,
    PolicyState,
    SpecMode,
)


class ReplayInputError(ValueError):
    """An observation or policy file that cannot be used; the message names file and line."""


#: Bytes of an observations file (a week of 30 s samples is about 5 MB).
MAX_OBSERVATION_BYTES = 64_000_000


def read_observations(path: Path) -> list[Observation]:
    """Parse a JSON-lines file of observations (blank lines and # comments skipped).

    Read through ``loaders.reading`` (size before reading, UTF-8) and each line through
    ``loaders.bounded.json_object`` (depth): every failure names the file and line.
    """
    try:
        lines = read_text(path, max_bytes=MAX_OBSERVATION_BYTES).splitlines()
    except InputLimitError as exc:
        raise ReplayInputError(str(exc)) from exc
    out = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            out.append(Observation.from_json(json_object(text, f"{path}:{number}")))
        except InputLimitError as exc:
            raise ReplayInputError(str(exc)) from exc
        except (ValueError, TypeError) as exc:
            raise ReplayInputError(f"{path}:{number}: {exc}") from exc
    return out


def read_policy(path: Path) -> tuple[AutoSpeculation, SpecServerSpec | None]:
    """An ``autoSpeculation`` block, or a SpecServer whose spec holds one.

    Read as YAML 1.1, as kubectl reads it, through ``loaders.reading`` and ``lint.yamlnodes``
    (size, UTF-8, depth, alias expansion, tags that do not fit their value). Returns the policy
    and the SpecServer spec (None when the file is only the block); an invalid field is named
    in the error.
    """
    from pydantic import ValidationError

    from specserver_advisor.loaders import yamlnodes

    try:
        docs = yamlnodes.load_all(read_text(path), str(path))
    except InputLimitError as exc:
        raise ReplayInputError(f"{path}: cannot read YAML: {exc.reason}") from exc
    data = docs[0] if docs else {}
    if not isinstance(data, dict):
        raise ReplayInputError(f"{path}: expected a mapping")
    is_server = data.get("kind") == "SpecServer" or isinstance(data.get("spec"), dict)
    try:
        if is_server:
            spec = SpecServerSpec.model_validate(data.get("spec"))
            return effective_policy(spec), spec
        return AutoSpeculation.model_validate(data), None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        prefix = "spec." if is_server else ""
        raise ReplayInputError(f"{path}: {prefix}{where}: {err['msg']}") from exc


def replay(
    observations: Iterable[Observation],
    policy: AutoSpeculation,
    ctx: PolicyContext = NEUTRAL_CONTEXT,
    start_mode: str = SpecMode.ON,
) -> list[Decision]:
    """Decisions for each observation, as the operator's autopilot makes them.

    Each observation is evaluated with ``autocycle.evaluate`` (the operator's call, the state it
    stores handed back the next cycle) at its own ``ts``, as measured in the mode the policy
    runs; a switch is taken to complete before the next observation.
    """
    stored: PolicyState | None = None
    running = SpecMode(start_mode)
    decisions = []
    for obs in observations:
        decision, state, stored = evaluate(obs, stored, running, obs.ts, policy, ctx)
        running = state.mode
        decisions.append(decision)
    return decisions


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_table(decisions: list[Decision]) -> str:
    """A fixed-width table, one decision per line."""
    lines = [
        f"{'ts':>12} {'action':>8} {'mode':>4} {'reason':<22} {'load':>6} {'accept':>6} "
        f"{'ttft_p99':>8}"
    ]
    for d in decisions:
        lines.append(
            f"{d.ts:>12.0f} {d.action:>8} {d.mode:>4} {d.reason:<22} "
            f"{_fmt(d.inputs.load):>6} {_fmt(d.inputs.accept_length):>6} "
            f"{_fmt(d.inputs.ttft_p99_s):>8}"
        )
    return "\n".join(lines)
