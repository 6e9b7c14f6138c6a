"""``plan --search-shape`` as text: the bands, the crossover, the choice and its launch.

Pure: a ``plansearch.Search`` and the launch searched in, lines out (``plan_command`` prints
them; ``--format json`` prints ``Search.to_json()`` instead).
"""

from __future__ import annotations

from specserver_advisor.cli.planfrom import Planned
from specserver_advisor.cli.plansearch import Search, choice_argv
from specserver_advisor.cli.plansearchshape import bound_text
from specserver_advisor.cli.plantext import flags_block, specserver_snippet, verdict


def render(result: Search, given: Planned) -> list[str]:
    """``plan --search-shape`` as text: the bands, the crossover, the choice and its launch."""
    lines = [
        f"given launch: {verdict(given).line}",
        f"search: {result.accepted} of {result.tried} shapes start under SGLang 0.5.23 "
        f"({bound_text()})",
        f"ranked on mode Auto's score: out tok/s, scaled down where TTFT P99 misses its "
        f"{result.slo_s:g} s SLO",
        "",
        f"{'concurrency':>11} | {'best shape (steps,topk,tokens)':<31} | {'out tok/s':>9}"
        f" {'given':>8} {'off':>8} | {'TTFT p99 s':>10} {'off':>6}",
    ]
    if not result.accepted:
        return [*lines[:2], "", "no shape SGLang accepts starts on this launch"]
    lines.append("-" * len(lines[-1]))
    for band in result.bands:
        label = band.shape.label if band.shape else "off (no speculation)"
        for c, best, given_point, off in band.points:
            shown = f"{given_point.tok_s:.1f}" if given_point is not None else "-"
            mine = best if band.shape else off
            lines.append(
                f"{c:>11} | {label:<31} | {mine.tok_s:>9.1f} {shown:>8} {off.tok_s:>8.1f}"
                f" | {mine.ttft_p99_ms / 1000:>10.1f} {off.ttft_p99_ms / 1000:>6.1f}"
            )
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
            else f"none: {result.no_crossover_reason}"
        ),
    ]
    lines += _past_crossover(result)
    if result.choice is None or result.choice_plan is None:
        lines.append("no shape to launch: speculation does not pay at any load searched")
        return lines
    assert result.choice_plan.plan is not None
    argv = choice_argv(result)
    own = (
        f"it stops paying at {result.choice_crossover:.1f} users"
        if result.choice_crossover is not None
        else f"it pays up to {result.top_load} users"
    )
    lines += [
        f"choice: {result.choice.label}, the best over the loads where speculation pays ({own}); "
        f"set --max-running-requests {result.max_running_requests} ({result.cap_reason})",
        "",
        "# flags (the choice)",
        *flags_block(argv),
        "",
        "# SpecServer (the choice)",
        *specserver_snippet(argv, result.choice_plan.plan, given.gpu, given.env),
    ]
    return lines


def _past_crossover(result: Search) -> list[str]:
    """A note for bands that speculate again past the crossover: there both engines queue far
    past the SLO, the score favours the larger throughput, and Auto keeps speculation off."""
    cross = result.crossover
    late = [b for b in result.bands if b.shape is not None and cross is not None and b.low > cross]
    if not late:
        return []
    loads = ", ".join(f"{b.low}-{b.high}" for b in late)
    return [
        f"note: at {loads} users both engines' TTFT P99 is past the {result.slo_s:g} s SLO, where "
        "the score favours the larger throughput; mode Auto runs without speculation above the "
        "crossover"
    ]
