"""``plan --search-shape`` as text: the bands, the crossover, the choice and its launch.

Pure: a ``plan_search.Search`` and the launch searched in, lines out (``plan_command`` prints
them; ``--format json`` prints ``Search.to_json()`` instead).
"""

from __future__ import annotations

from specserver_advisor.cli.planfrom import Planned
from specserver_advisor.cli.plansearch import Search, bound_text, choice_argv
from specserver_advisor.cli.plantext import flags_block, specserver_snippet, verdict


def render(result: Search, given: Planned) -> list[str]:
    """``plan --search-shape`` as text: the bands, the crossover, the choice and its launch."""
    lines = [
        f"given launch: {verdict(given).line}",
        f"search: {result.accepted} of {result.tried} shapes start under SGLang 0.5.23 "
        f"({bound_text()})",
        "",
        f"{'concurrency':>11} | {'best shape (steps,topk,tokens)':<31} | {'out tok/s':>9}"
        f" {'given':>8} {'off':>8}",
    ]
    if not result.accepted:
        return [*lines[:2], "", "no shape SGLang accepts starts on this launch"]
    lines.append("-" * len(lines[-1]))
    for band in result.bands:
        label = band.shape.label if band.shape else "off (no speculation)"
        for c, best, given_tok_s, off in band.points:
            shown = f"{given_tok_s:.1f}" if given_tok_s is not None else "-"
            tok_s = best if band.shape else off
            lines.append(f"{c:>11} | {label:<31} | {tok_s:>9.1f} {shown:>8} {off:>8.1f}")
    lines.append("")
    lines += [
        "bands: "
        + "; ".join(
            f"{b.low}-{b.high}: {b.shape.label if b.shape else 'off'}" for b in result.bands
        ),
        "crossover (speculation stops paying, best shape vs off): "
        + (
            f"{result.crossover:.1f} users"
            if result.crossover is not None
            else _no_crossover(result)
        ),
    ]
    if result.choice is None or result.choice_plan is None:
        lines.append("no shape to launch: speculation does not pay at any load searched")
        return lines
    assert result.choice_plan.plan is not None
    argv = choice_argv(result)
    lines += [
        f"choice: {result.choice.label}, the best over the loads where speculation pays; "
        f"set --max-running-requests {result.max_running_requests} ({result.cap_reason})",
        "",
        "# flags (the choice)",
        *flags_block(argv),
        "",
        "# SpecServer (the choice)",
        *specserver_snippet(argv, result.choice_plan.plan, given.gpu, given.env),
    ]
    return lines


def _no_crossover(result: Search) -> str:
    """Why the search found no crossover in the loads it planned."""
    first, last = result.bands[0].low, result.bands[-1].high
    if all(b.shape is None for b in result.bands):
        return f"none in range: speculation off wins at every load searched ({first}-{last})"
    if result.bands[-1].shape is not None:
        return f"none in range: the best shape beats speculation off up to {last} users"
    return "none in range"
