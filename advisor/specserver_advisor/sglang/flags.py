"""An argv parser that behaves like SGLang 0.5.23's ``sglang serve`` argparse parser.

``parse_server_argv`` follows argparse's own rules over the committed flag table
(``flagtable``): exact match, then unique prefix (``allow_abbrev``), ``ambiguous option``
listing every match in registration order, ``nargs``, ``choices`` and ``type`` checks
(``flagvalues``), and argparse's order of errors. Used by the resolver, the linter (which needs
the position of every flag) and the engine entrypoint. The table's own names (``Flag``,
``flag_table``, ...) are imported from ``flagtable``. Pure: no I/O beyond reading the data file.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from specserver_advisor.sglang.flagtable import (
    PROG,
    Flag,
    default_of,
    display_name,
    flag_table,
    option_index,
)
from specserver_advisor.sglang.flagvalues import (
    convert_value,
    nargs_error,
    switch_value,
)

#: Flags that existed in earlier releases and are gone in 0.5.23 (name -> what to use instead).
#: Only consulted for flags the parser does not accept (the hint beside argparse's error).
REMOVED_FLAGS: dict[str, str] = {
    "--speculative-skip-dp-mlp-sync": "removed in 0.5.23; drop it",
    "--cuda-graph-max-bs": "use --cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)",
}

#: ``--config FILE``: SGLang merges the YAML into the argv before parsing.
CONFIG_FLAG = "--config"
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


@dataclass
class ArgvIssue:
    """Something argparse would reject, or that we flag, at argv position ``index``."""

    index: int
    token: str
    message: str
    kind: str  # "ambiguous" | "unknown" | "value"
    #: what to use instead, for flags earlier releases had (``REMOVED_FLAGS``)
    hint: str = ""
    #: values that followed an unknown option (argparse lists them among the unrecognized)
    values: tuple[str, ...] = ()


@dataclass
class ParsedArgs:
    """The result of parsing a server argv."""

    values: dict[str, Any] = field(default_factory=dict)
    #: field -> index in the argv of the option that set it (last one wins, as in argparse)
    positions: dict[str, int] = field(default_factory=dict)
    #: field -> the option string as written (e.g. an abbreviation)
    spelled: dict[str, str] = field(default_factory=dict)
    issues: list[ArgvIssue] = field(default_factory=list)
    config_file: str | None = None
    #: deprecated spellings used (option string as matched -> SGLang's replacement hint)
    deprecated: dict[str, str] = field(default_factory=dict)
    #: field -> (start, end): the argv items of the option that set it and its values
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)

    def is_set(self, field_name: str) -> bool:
        return field_name in self.values

    def get(self, field_name: str) -> Any:
        if field_name in self.values:
            return self.values[field_name]
        return default_of(field_name)

    @property
    def error(self) -> str | None:
        """The one message argparse would exit with (``sglang serve: error: ...``), or None."""
        order = {"ambiguous": 0, "value": 1, "required": 2, "unknown": 3}
        real = [i for i in self.issues if i.kind in order]
        missing = [
            display_name(f)
            for f in flag_table().values()
            if f.required and f.field not in self.values
        ]
        if missing:
            real.append(
                ArgvIssue(
                    -1,
                    "",
                    f"the following arguments are required: {', '.join(missing)}",
                    "required",
                )
            )
        if not real:
            return None
        first = min(real, key=lambda i: (order[i.kind], i.index))
        if first.kind == "unknown":
            tokens = [t for i in real if i.kind == "unknown" for t in (i.token, *i.values)]
            return f"{PROG}: error: unrecognized arguments: {' '.join(tokens)}"
        return f"{PROG}: error: {first.message}"


def match_option(token: str) -> tuple[Flag | None, str | None]:
    """Resolve an option string the way argparse does (exact, then unique prefix).

    ``token`` may carry ``=value``. Returns (flag, None) on success, (None, error) otherwise.
    O(log n) in the table's size for a token that matches nothing (``_prefix_candidates``).
    """
    table = option_index().by_name
    if token in table:
        return table[token], None
    name = token.split("=", 1)[0]
    if "=" in token and name in table:
        return table[name], None
    candidates = _prefix_candidates(name if token[:2] == "--" and len(token) > 1 else token)
    if len(candidates) == 1:
        return table[candidates[0]], None
    if len(candidates) > 1:
        return None, f"ambiguous option: {token} could match {', '.join(candidates)}"
    return None, f"unrecognized arguments: {token}"


def _starting_with(prefix: str) -> list[str]:
    """The option strings that start with ``prefix``: one ``bisect`` into the sorted strings,
    then only the matches (a contiguous run of them)."""
    ordered = option_index().ordered
    out = []
    at = bisect_left(ordered, prefix)
    while at < len(ordered) and ordered[at].startswith(prefix):
        out.append(ordered[at])
        at += 1
    return out


@lru_cache(maxsize=4096)
def _prefix_candidates(token: str) -> tuple[str, ...]:
    """The option strings ``token`` abbreviates, as Python 3.11's argparse finds them
    (``_get_option_tuples``: for ``--x`` every string starting with the text before ``=``; for
    ``-x...`` every string starting with the whole token, or equal to its first two
    characters), listed in registration order as argparse lists them. Found by bisection, not
    by a scan of the table, so many distinct unknown flags cost O(log n) each; memoised: lint
    asks the same abbreviations for every launch."""
    index = option_index()
    found = set(_starting_with(token))
    if token[:2] != "--" and token[:2] in index.by_name:
        found.add(token[:2])
    return tuple(sorted(found, key=index.rank.__getitem__))


def _matched_name(token: str) -> str:
    table = option_index().by_name
    if token in table:
        return token
    name = token.split("=", 1)[0]
    if name in table:
        return name
    candidates = _prefix_candidates(name if token[:2] == "--" and len(token) > 1 else token)
    return candidates[0] if candidates else name  # the one ``match_option`` matched


def _is_optional(token: str) -> bool:
    """argparse's classification of an argv item: an option ('O') or a value ('A')."""
    if not token or token[0] != "-" or token == "-":
        return False
    if token in option_index().by_name:
        return True
    if _NEGATIVE_NUMBER.match(token):
        return False
    return " " not in token or match_option(token)[0] is not None


def _store(parsed: ParsedArgs, flag: Flag, name: str, index: int, value: Any) -> None:
    parsed.values[flag.field] = value
    parsed.positions[flag.field] = index
    parsed.spelled[flag.field] = name


def parse_server_argv(argv: list[str], positional_model: bool = False) -> ParsedArgs:
    """Parse SGLang server arguments (what follows ``launch_server`` or ``sglang serve``).

    Args:
        argv: the arguments, one item each.
        positional_model: ``sglang serve MODEL`` form: a first bare word is the model path.
    """
    parsed = ParsedArgs()
    i = 0
    # argparse classifies every item first: an ambiguous prefix anywhere stops it at once.
    for index, token in enumerate(argv):
        if token.startswith("--") and token != "--" and token not in option_index().by_name:
            flag, error = match_option(token)
            if flag is None and error and error.startswith("ambiguous"):
                name = token.split("=")[0]
                parsed.issues.append(
                    ArgvIssue(index, name, error, "ambiguous", REMOVED_FLAGS.get(name, ""))
                )
    while i < len(argv):
        token = argv[i]
        if not _is_optional(token):
            if positional_model and i == 0 and "model_path" not in parsed.values:
                _store(parsed, flag_table()["model_path"], "<positional>", i, token)
            else:
                parsed.issues.append(
                    ArgvIssue(i, token, f"unexpected argument {token!r}", "unknown")
                )
            i += 1
            continue
        name, has_eq, inline = token.partition("=")
        flag, error = match_option(token)
        if flag is not None and flag.cli == CONFIG_FLAG:  # also an abbreviation of it
            parsed.config_file = inline if has_eq else (argv[i + 1] if i + 1 < len(argv) else "")
            parsed.positions["config"] = i
            parsed.spelled["config"] = name
            i += 1 if has_eq else 2
            continue
        if flag is None:
            # One mistake is reported once: the values after it are its own.
            j = i + 1
            while j < len(argv) and not _is_optional(argv[j]) and argv[j] != "--":
                j += 1
            if error and not error.startswith("ambiguous"):
                parsed.issues.append(
                    ArgvIssue(
                        i,
                        token,
                        error,
                        "unknown",
                        REMOVED_FLAGS.get(name, ""),
                        tuple(argv[i + 1 : j]),
                    )
                )
            i = j
            continue
        matched = _matched_name(token)
        if flag.deprecated:
            parsed.deprecated[matched] = flag.cli
        if flag.is_bool:
            if has_eq:
                parsed.issues.append(
                    ArgvIssue(
                        i,
                        name,
                        f"argument {display_name(flag)}: ignored explicit argument {inline!r}",
                        "value",
                    )
                )
            else:
                _store(parsed, flag, name, i, switch_value(flag, matched))
                parsed.spans[flag.field] = (i, i + 1)
            i += 1
            continue
        values: list[str]
        at = i  # the option's own index: where argparse's complaint and the value belong
        parsed.positions[flag.field] = at
        parsed.spelled[flag.field] = name
        if has_eq:
            values, i = [inline], i + 1
        else:
            j = i + 1
            while j < len(argv) and not _is_optional(argv[j]) and argv[j] != "--":
                j += 1
            following = argv[i + 1 : j]
            want = flag.nargs
            if want is None or want == "?":
                values = following[:1]
            elif isinstance(want, int):
                values = following[:want]
            else:
                values = following
            i = i + 1 + len(values)
        if (
            (flag.nargs is None and len(values) != 1)
            or (flag.nargs == "+" and not values)
            or (isinstance(flag.nargs, int) and len(values) != flag.nargs)
        ):
            parsed.issues.append(ArgvIssue(at, name, nargs_error(flag), "value"))
            continue
        converted = []
        bad = None
        for raw in values:
            value, bad = convert_value(flag, name, raw)
            if bad:
                break
            converted.append(value)
        if bad:
            parsed.issues.append(ArgvIssue(at, name, bad, "value"))
            continue
        parsed.spans[flag.field] = (at, i)
        if flag.nargs is None or (flag.nargs == "?" and converted):
            _store(parsed, flag, name, at, converted[0])
        elif flag.nargs == "?":
            _store(parsed, flag, name, at, flag.const)
        else:
            _store(parsed, flag, name, at, converted)
    return parsed
