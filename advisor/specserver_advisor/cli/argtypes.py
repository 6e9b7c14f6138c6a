"""Range-checked argparse types for the three CLIs (issue 38): every numeric argument is checked
at the edge, so a value no run can use is a usage error naming the option (argparse prints
``argument --X: ...`` and exits 2), never a traceback deep inside a plan.

``real`` (finite, within bounds; ``nan``, ``inf`` and ``1e308`` refused where they cannot
mean anything), ``whole`` (an integer within bounds, its text bounded before conversion),
``whole_list`` (comma-separated integers, the item count checked before any is converted),
``port`` (0-65535) and ``host`` (an IP address or a DNS name). Used by ``specserver-advisor``
(``plan``, ``replay``), ``specserver-engine`` (``simulate``) and ``specserver-operator``.
Pure.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import re
from collections.abc import Callable

from specserver_advisor.bounded import MAX_NUMBER_CHARS
from specserver_advisor.errors import shown

_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?")


def _number_text(text: str, kind: str) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise argparse.ArgumentTypeError(
            f"expected {kind}, got {len(text):,} characters (at most {MAX_NUMBER_CHARS})"
        )
    return text.strip()


def real(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    name: str = "a number",
) -> Callable[[str], float]:
    """A finite float in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    bounds = (
        f"{'(' if low_open else '['}{'-inf' if low is None else f'{low:g}'}, "
        f"{'inf' if high is None else f'{high:g}'}]"
    )

    def parse(text: str) -> float:
        try:
            value = float(_number_text(text, name))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {name}, got {shown(text)!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {shown(text)!r}")
        below = low is not None and (value <= low if low_open else value < low)
        if below or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value:g} is outside {bounds}")
        return value

    parse.__name__ = name
    return parse


def whole(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """A base-10 integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(_number_text(text, "an integer"), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {shown(text)!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            lo = "-inf" if low is None else str(low)
            hi = "inf" if high is None else str(high)
            raise argparse.ArgumentTypeError(f"{value} is outside [{lo}, {hi}]")
        return value

    parse.__name__ = "an integer"
    return parse


def whole_list(
    low: int, high: int, max_items: int, what: str = "values"
) -> Callable[[str], list[int]]:
    """Comma-separated integers in ``[low, high]``, at most ``max_items`` of them (counted by
    the commas before any item is converted)."""
    one = whole(low, high)

    def parse(text: str) -> list[int]:
        if text.count(",") >= max_items:
            raise argparse.ArgumentTypeError(
                f"{text.count(',') + 1:,} {what} given; at most {max_items}"
            )
        items = [x for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected integers like 1,8,32, got {shown(text)!r}")
        return [one(x) for x in items]

    parse.__name__ = "a list of integers"
    return parse


port = whole(0, 65535)


def host(text: str) -> str:
    """An IP address (v4 or v6) or a DNS name a socket can bind or connect to."""
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        pass
    labels = text[:-1].split(".") if text.endswith(".") else text.split(".")
    if 0 < len(text) <= 253 and all(_LABEL.fullmatch(label) for label in labels):
        return text
    raise argparse.ArgumentTypeError(f"{shown(text)!r} is not an IP address or a host name")
