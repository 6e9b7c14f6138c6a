"""``plan --plot FILE.svg``: output tok/s and TTFT P99 against concurrency, on and off.

Two panels sharing a log2 concurrency axis; the crossover (where speculation stops paying) and
the KV cap (requests the pool holds with the draft) are marked. Written as plain SVG (no
plotting dependency). Pure: ``svg(plan)`` returns the document; the CLI writes it.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from specserver_advisor.perf.plan import Plan

WIDTH, PANEL_H, MARGIN_L, MARGIN_R, MARGIN_T, GAP = 720, 260, 70, 30, 40, 60
COLORS = {"on": "#1f77b4", "off": "#d62728"}


class PlotError(ValueError):
    """The plot cannot be drawn (unsupported file type, nothing predicted)."""


def _x(c: float, lo: float, hi: float) -> float:
    span = math.log2(hi) - math.log2(lo) or 1.0
    return MARGIN_L + (math.log2(c) - math.log2(lo)) / span * (WIDTH - MARGIN_L - MARGIN_R)


def _ticks(top: float) -> list[float]:
    if top <= 0:
        return [0.0]
    step = 10 ** math.floor(math.log10(top))
    for mult in (1, 2, 5, 10):
        if top / (step * mult) <= 6:
            step *= mult
            break
    return [step * k for k in range(int(top / step) + 2)]


def svg(plan: Plan, title: str = "") -> str:
    """The two-panel chart of ``plan``'s curves as an SVG document."""
    points = plan.curves
    if not points:
        raise PlotError("no concurrency points to plot")
    conc = [float(p["concurrency"]) for p in points]
    lo, hi = min(conc), max(max(conc), min(conc) * 2)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{MARGIN_T + 2 * PANEL_H + GAP + 50}" font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">'
        f"{escape(title or 'speculation on vs off')}</text>",
    ]
    panels = [("output_tok_s", "output tok/s"), ("ttft_p99_ms", "TTFT P99 (ms)")]
    for k, (key, label) in enumerate(panels):
        top_y = MARGIN_T + k * (PANEL_H + GAP)
        values = [
            float(p[mode][key]) for p in points for mode in ("on", "off") if p.get(mode) is not None
        ]
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise PlotError(f"{label}: predictions are not finite")
        ticks = _ticks(max(values) if values else 1.0)
        ymax = ticks[-1] or 1.0

        def y(v: float, top_y: float = top_y, ymax: float = ymax) -> float:
            return top_y + PANEL_H - v / ymax * PANEL_H

        parts.append(
            f'<rect x="{MARGIN_L}" y="{top_y}" width="{WIDTH - MARGIN_L - MARGIN_R}" '
            f'height="{PANEL_H}" fill="none" stroke="#888"/>'
        )
        for t in ticks:
            parts.append(
                f'<text x="{MARGIN_L - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t:g}</text>'
            )
        parts.append(
            f'<text x="16" y="{top_y + PANEL_H / 2}" transform="rotate(-90 16 '
            f'{top_y + PANEL_H / 2})" text-anchor="middle">{escape(label)}</text>'
        )
        for mode in ("on", "off"):
            xy = [
                (_x(float(p["concurrency"]), lo, hi), y(float(p[mode][key])))
                for p in points
                if p.get(mode) is not None
            ]
            if xy:
                path = " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)
                parts.append(
                    f'<polyline class="{mode}" points="{path}" fill="none" '
                    f'stroke="{COLORS[mode]}" stroke-width="2"/>'
                )
        for c in conc:
            parts.append(
                f'<text x="{_x(c, lo, hi):.1f}" y="{top_y + PANEL_H + 16}" '
                f'text-anchor="middle">{c:g}</text>'
            )
        parts += _markers(plan, lo, hi, top_y)
    legend_y = MARGIN_T + 2 * PANEL_H + GAP + 36
    parts.append(
        f'<text x="{MARGIN_L}" y="{legend_y}"><tspan fill="{COLORS["on"]}">— speculation on'
        f'</tspan>   <tspan fill="{COLORS["off"]}">— off</tspan>   concurrency (log scale)'
        "</text>"
    )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _markers(plan: Plan, lo: float, hi: float, top_y: float) -> list[str]:
    out = []
    marks = [("crossover", plan.crossover_concurrency, "#2ca02c")]
    if plan.resolution.speculative:
        marks.append(("KV cap", float(plan.fits_on), "#7f7f7f"))
    for row, (name, value, color) in enumerate(marks):
        if value is None or not lo <= value <= hi:
            continue
        x = _x(value, lo, hi)
        out.append(
            f'<line class="{name.replace(" ", "-").lower()}" x1="{x:.1f}" y1="{top_y}" '
            f'x2="{x:.1f}" y2="{top_y + PANEL_H}" stroke="{color}" stroke-dasharray="5,4"/>'
        )
        out.append(
            f'<text x="{x + 4:.1f}" y="{top_y + 14 * (row + 1)}" fill="{color}">'
            f"{name} {value:.0f}</text>"
        )
    return out
