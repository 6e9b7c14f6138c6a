"""Which codes a lint run reports: ``--select``/``--extend-select``/``--ignore`` resolved to codes.

Each item may be a code (``SPEC003``), a rule name (``context-override-env``), a prefix
(``SPEC``, ``SPEC00``, ``POD``) or ``ALL``, and items may be comma-separated. An item that
matches nothing is a usage error naming the valid choices: a typo must never turn a CI job into
one that checks nothing. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from specserver_advisor.errors import UsageError
from specserver_advisor.lint.rules import ENGINE_CODES, RULES


def known_codes() -> dict[str, str]:
    """Every code the tool can print -> its name, in registry order."""
    out = {code: module.NAME for code, module in RULES.items()}
    out.update({code: name for code, (name, _) in ENGINE_CODES.items()})
    return out


def split_items(values: Iterable[str]) -> list[str]:
    """Items of repeated and comma-separated options, stripped, empty ones dropped."""
    return [item.strip() for value in values for item in str(value).split(",") if item.strip()]


def valid_choices() -> str:
    """The valid choices, for error messages."""
    codes = known_codes()
    prefixes = sorted({code.rstrip("0123456789") for code in codes})
    listed = ", ".join(f"{code} ({name})" for code, name in codes.items())
    return f"valid: ALL, a prefix ({', '.join(prefixes)}), or a code or name: {listed}"


def resolve_item(item: str, option: str) -> set[str]:
    """The codes one item stands for; UsageError when it matches none."""
    codes = known_codes()
    key = item.strip()
    if key.upper() == "ALL":
        return set(codes)
    if key.upper() in codes:
        return {key.upper()}
    by_name = {name: code for code, name in codes.items()}
    if key.lower() in by_name:
        return {by_name[key.lower()]}
    if key.isalnum():
        matched = {code for code in codes if code.startswith(key.upper())}
        if matched:
            return matched
    raise UsageError(f"{option}: unknown rule {item!r}; {valid_choices()}")


def resolve_items(values: Iterable[str], option: str) -> set[str]:
    """The union of what every item of an option stands for."""
    out: set[str] = set()
    for item in split_items(values):
        out |= resolve_item(item, option)
    return out


def enabled_codes(
    select: Iterable[str] | None, extend_select: Iterable[str], ignore: Iterable[str]
) -> frozenset[str]:
    """The codes to report: select (default ALL) plus extend-select, minus ignore."""
    chosen = (
        resolve_items(select, "--select") if select is not None else set(known_codes())
    ) | resolve_items(extend_select, "--extend-select")
    return frozenset(chosen - resolve_items(ignore, "--ignore"))


def codes_for(item: str) -> frozenset[str]:
    """Codes one suppression item (code, name or prefix) covers; an unknown item covers itself."""
    try:
        return frozenset(resolve_item(item, "ignore"))
    except UsageError:
        return frozenset({item.strip().upper()})
