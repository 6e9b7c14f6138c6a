"""Suppressions: ``# specserver-advisor: ignore[CODE,name] reason`` comments and the
``specserver.io/ignore: "CODE: reason"`` annotation, with an exact scope.

A comment counts for the finding on its own line or, standing alone, on the line right above
any finding (a block of such lines too), for the whole command or object it sits in
(any line of a shell command, any line of a Kubernetes document, ``metadata:`` included; for a
launch inside a shell function, the line calling it too), and, when it stands alone on its
line, for the command or object right below it. It never reaches
the next command after a trailing comment. Items are codes, rule names or prefixes. A
suppression that matches no finding of an enabled rule is reported as SUPP001. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specserver_advisor.lint.model import Diagnostic, Launch
from specserver_advisor.lint.rules import ENGINE_CODES
from specserver_advisor.lint.selection import codes_for, known_codes

PATTERN = re.compile(r"specserver-advisor:\s*ignore\[([A-Za-z0-9_,\s-]+)\]\s*(.*)")


@dataclass(frozen=True)
class Comment:
    """One suppression comment."""

    line: int
    items: dict[str, str]  # item as written -> reason
    standalone: bool  # the line holds only the comment


def comments(text: str) -> dict[int, Comment]:
    """Line -> the suppression comment on it."""
    out: dict[int, Comment] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        m = PATTERN.search(line)
        if not m:
            continue
        hash_at = line.rfind("#", 0, m.start() + 1)
        if hash_at < 0:
            continue
        items = {c.strip(): m.group(2).strip() for c in m.group(1).split(",") if c.strip()}
        out[number] = Comment(number, items, not line[:hash_at].strip())
    return out


def _scope_lines(launch: Launch, found: dict[int, Comment]) -> list[int]:
    """Lines whose comments apply to a launch: its own, and standalone comments just above."""
    lines = list(range(launch.first_line, launch.last_line + 1)) + launch.call_lines
    for first in [launch.first_line, *launch.call_lines]:
        above = first - 1
        while above in found and found[above].standalone:
            lines.append(above)
            above -= 1
    return lines


def _standalone_above(line: int, found: dict[int, Comment]) -> list[int]:
    """The standalone comment lines right above ``line`` (a comment block over a finding on a
    line of its own: an ``export``, an env entry, an ``args`` item)."""
    out = []
    above = line - 1
    while above in found and found[above].standalone:
        out.append(above)
        above -= 1
    return out


def _reportable(item: str, enabled: frozenset[str]) -> bool:
    """Unknown items always; known ones when one of their codes is enabled."""
    codes = codes_for(item)
    return bool(codes & enabled) or not codes & set(known_codes())


def _supp001(path: str, line: int, column: int, message: str, fix: str) -> Diagnostic:
    name, severity = ENGINE_CODES["SUPP001"]
    return Diagnostic(path, line, column, "SUPP001", name, severity, message, fix)


def apply(
    diagnostics: list[Diagnostic],
    launches: list[Launch],
    texts: dict[str, str],
    enabled: frozenset[str],
) -> list[Diagnostic]:
    """Diagnostics left after suppressions, plus SUPP001 for suppressions that matched nothing."""
    by_file = {path: comments(text) for path, text in texts.items()}
    used: set[tuple[str, int, str]] = set()
    used_doc: set[tuple[str, int, str]] = set()
    kept = []
    for d in diagnostics:
        found = by_file.get(d.path, {})
        owner = launches[d.origin] if d.origin is not None else None
        lines = [d.line, *_standalone_above(d.line, found)]
        if owner is not None and owner.path == d.path:
            lines += _scope_lines(owner, found)
        hit = next(
            (
                (d.path, line, item)
                for line in lines
                if line in found
                for item in found[line].items
                if d.code in codes_for(item)
            ),
            None,
        )
        if hit:
            used.add(hit)
            continue
        doc_hit = next(
            (i for i in (owner.document_suppressions if owner else {}) if d.code in codes_for(i)),
            None,
        )
        if owner is not None and doc_hit is not None:
            used_doc.add((owner.path, owner.first_line, doc_hit))
            continue
        kept.append(d)
    if "SUPP001" not in enabled:
        return kept
    for path, found in by_file.items():
        for line, comment in found.items():
            for item in comment.items:
                if (path, line, item) in used or not _reportable(item, enabled):
                    continue
                kept.append(
                    _supp001(
                        path,
                        line,
                        1,
                        f"suppression of {item} matches no finding",
                        "Remove the stale suppression comment.",
                    )
                )
    for launch in launches:
        for item in launch.document_suppressions:
            key = (launch.path, launch.first_line, item)
            if key in used_doc or not _reportable(item, enabled):
                continue
            kept.append(
                _supp001(
                    launch.path,
                    launch.start.line,
                    launch.start.column,
                    f"specserver.io/ignore of {item} matches no finding",
                    "Remove the stale annotation entry.",
                )
            )
    return kept
