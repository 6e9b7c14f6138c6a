"""SGLang 0.5.23 server flags and an argv parser that behaves like its argparse.

The flag table (``data/flags-0.5.23.json``) is extracted from the pinned wheel by
``wheelsource.py``. ``parse_server_argv`` is used by the resolver, the linter (which needs the
position of every flag) and the engine entrypoint. Pure: no I/O beyond reading the data file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

SGLANG_VERSION = "0.5.23"

#: Flags that existed in earlier releases and are gone in 0.5.23 (name -> what to use instead).
REMOVED_FLAGS: dict[str, str] = {
    "--speculative-skip-dp-mlp-sync": "removed in 0.5.23; drop it",
    "--cuda-graph-max-bs": "use --cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)",
    "--disable-cuda-graph": "deprecated alias; use --disable-decode-cuda-graph "
    "and --disable-prefill-cuda-graph",
}

#: Flags that are not ServerArgs fields but are accepted by the server's parser.
EXTRA_SERVER_FLAGS = {"--config": "str"}


@dataclass(frozen=True)
class Flag:
    """One ServerArgs field as the CLI sees it."""

    field: str
    cli: str
    aliases: tuple[str, ...]
    type: str
    default: Any
    boolean_optional: bool

    @property
    def is_bool(self) -> bool:
        return self.type == "bool"


@cache
def flag_table() -> dict[str, Flag]:
    """Field name -> Flag, for every CLI-visible field of SGLang 0.5.23."""
    raw = json.loads(
        resources.files("specserver_advisor.sglang").joinpath("data/flags-0.5.23.json").read_text()
    )
    table: dict[str, Flag] = {}
    for name, info in raw["fields"].items():
        if info["no_cli"]:
            continue
        default = info["default"]
        if isinstance(default, dict) and "expr" in default:
            default = None
        table[name] = Flag(
            field=name,
            cli=info["cli"],
            aliases=tuple(info["aliases"] or ()),
            type=info["type"],
            default=default,
            boolean_optional=bool(info["action"] and "BooleanOptional" in info["action"]),
        )
    return table


@cache
def option_strings() -> dict[str, Flag]:
    """Every accepted option string (names, aliases, --no-X forms) -> Flag."""
    out: dict[str, Flag] = {}
    for flag in flag_table().values():
        for name in (flag.cli, *flag.aliases):
            out[name] = flag
            if flag.boolean_optional:
                out["--no-" + name[2:]] = flag
    return out


def default_of(field_name: str) -> Any:
    """SGLang's default for a field (None for fields the table does not hold)."""
    flag = flag_table().get(field_name)
    return flag.default if flag else None


def cli_name(field_name: str) -> str:
    """The canonical CLI spelling of a field."""
    return flag_table()[field_name].cli


@dataclass
class ArgvIssue:
    """Something argparse would reject, or that we flag, at argv position ``index``."""

    index: int
    token: str
    message: str
    kind: str  # "ambiguous" | "unknown" | "removed" | "value"


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

    def is_set(self, field_name: str) -> bool:
        return field_name in self.values

    def get(self, field_name: str) -> Any:
        if field_name in self.values:
            return self.values[field_name]
        return default_of(field_name)


def _coerce(flag: Flag, raw: str) -> Any:
    kind = flag.type
    if kind == "int":
        return int(raw)
    if kind == "float":
        return float(raw)
    return raw


def match_option(token: str) -> tuple[Flag | None, str | None]:
    """Resolve an option string the way argparse does (exact, then unique prefix).

    Returns:
        (flag, None) on success, (None, error message) otherwise.
    """
    table = option_strings()
    if token in table:
        return table[token], None
    candidates = sorted(name for name in table if name.startswith(token))
    if len(candidates) == 1:
        return table[candidates[0]], None
    if len(candidates) > 1:
        shown = ", ".join(candidates[:6]) + (", ..." if len(candidates) > 6 else "")
        return None, f"ambiguous option: {token} could match {shown}"
    return None, f"unrecognized arguments: {token}"


def parse_server_argv(argv: list[str], positional_model: bool = False) -> ParsedArgs:
    """Parse SGLang server arguments (what follows ``launch_server`` or ``sglang serve``).

    Args:
        argv: the arguments, one item each.
        positional_model: ``sglang serve MODEL`` form: a first bare word is the model path.
    """
    parsed = ParsedArgs()
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--"):
            if positional_model and "model_path" not in parsed.values and i == 0:
                parsed.values["model_path"] = token
                parsed.positions["model_path"] = i
                parsed.spelled["model_path"] = "<positional>"
            else:
                parsed.issues.append(
                    ArgvIssue(i, token, f"unexpected argument {token!r}", "unknown")
                )
            i += 1
            continue
        name, has_eq, inline = token.partition("=")
        if name in REMOVED_FLAGS and name not in option_strings():
            parsed.issues.append(ArgvIssue(i, name, f"{name}: {REMOVED_FLAGS[name]}", "removed"))
        if name in EXTRA_SERVER_FLAGS:
            value = inline if has_eq else (argv[i + 1] if i + 1 < len(argv) else "")
            parsed.config_file = value
            i += 1 if has_eq else 2
            continue
        flag, error = match_option(name)
        if flag is None:
            if not any(iss.index == i for iss in parsed.issues):
                kind = "ambiguous" if error and error.startswith("ambiguous") else "unknown"
                parsed.issues.append(ArgvIssue(i, name, error or "unknown", kind))
            # Skip a following value so one mistake is reported once.
            skip = 1 if has_eq or i + 1 >= len(argv) or argv[i + 1].startswith("--") else 2
            i += skip
            continue
        parsed.positions[flag.field] = i
        parsed.spelled[flag.field] = name
        if flag.is_bool and not has_eq:
            negative = name.startswith("--no-") and not flag.cli.startswith("--no-")
            parsed.values[flag.field] = not negative
            i += 1
            continue
        if has_eq:
            raw = inline
            i += 1
        elif i + 1 < len(argv):
            raw = argv[i + 1]
            i += 2
        else:
            parsed.issues.append(
                ArgvIssue(i, name, f"argument {name}: expected one argument", "value")
            )
            i += 1
            continue
        try:
            parsed.values[flag.field] = _coerce(flag, raw)
        except ValueError:
            parsed.issues.append(
                ArgvIssue(i, name, f"argument {name}: invalid {flag.type} value: {raw!r}", "value")
            )
    return parsed


def values_from_config(mapping: dict[str, Any]) -> dict[str, Any]:
    """Field values from an SGLang ``--config`` YAML mapping (keys with dashes or underscores)."""
    out: dict[str, Any] = {}
    table = flag_table()
    for key, value in mapping.items():
        fname = str(key).lstrip("-").replace("-", "_")
        if fname in table:
            out[fname] = value
    return out
