"""SGLang 0.5.23's ``sglang serve`` flag table, loaded from the committed dump.

``data/flags-0.5.23.json`` is every action of SGLang's real parser (``ServerArgs.add_cli_args``:
the dataclass fields, the flags registered by hand and the deprecated spellings), dumped by
``scripts/oracle-env flags`` from the cached SGLang environment, so the advisor never imports
sglang. This module turns it into ``Flag`` records: by field, by option string, defaults, and
argparse's display name for an action. Pure: no I/O beyond reading the data file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

SGLANG_VERSION = "0.5.23"
PROG = "sglang serve"
#: argparse actions that take no value.
_NO_VALUE_ACTIONS = {"_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_HelpAction"}


@dataclass(frozen=True)
class Flag:
    """One argparse action of ``sglang serve`` (a ServerArgs field or a hand-registered flag)."""

    field: str
    cli: str
    aliases: tuple[str, ...]
    type: str
    default: Any
    boolean_optional: bool
    action: str = "_StoreAction"
    nargs: int | str | None = None
    const: Any = None
    choices: tuple[str, ...] | None = None
    deprecated: bool = False
    required: bool = False

    @property
    def is_bool(self) -> bool:
        """Takes no value on the command line (store_true/false/const, deprecated switches)."""
        return self.nargs == 0

    @property
    def options(self) -> tuple[str, ...]:
        return (self.cli, *self.aliases)


def _flag_from_action(raw: dict[str, Any]) -> Flag:
    options = [o for o in raw["options"] if o.startswith("--")] or list(raw["options"])
    nargs = raw["nargs"]
    action = str(raw["action"])
    if action in _NO_VALUE_ACTIONS:
        nargs = 0
    boolean_optional = action == "BooleanOptionalAction"
    if boolean_optional:
        nargs = 0
        options = [o for o in options if not o.startswith("--no-")] or options
    typ = "bool" if nargs == 0 else str(raw["type"] or "str")
    return Flag(
        field=str(raw["dest"]),
        cli=options[0],
        aliases=tuple(options[1:]),
        type=typ,
        default=raw["default"],
        boolean_optional=boolean_optional,
        action=action,
        nargs=nargs,
        const=raw["const"],
        choices=tuple(raw["choices"]) if raw["choices"] is not None else None,
        deprecated=bool(raw["deprecated"]),
        required=bool(raw.get("required")),
    )


@cache
def _table() -> tuple[dict[str, Flag], tuple[tuple[str, Flag], ...]]:
    raw = json.loads(
        resources.files("specserver_advisor.sglang")
        .joinpath(f"data/flags-{SGLANG_VERSION}.json")
        .read_text()
    )
    by_field: dict[str, Flag] = {}
    ordered: list[tuple[str, Flag]] = []
    for action in raw["actions"]:
        flag = _flag_from_action(action)
        for option in action["options"]:
            ordered.append((option, flag))
        if flag.action == "_HelpAction":
            continue
        # Several actions may share a dest (a deprecated spelling beside the field's own flag):
        # the field's entry is the non-deprecated one.
        if flag.field not in by_field or by_field[flag.field].deprecated:
            by_field[flag.field] = flag
    return by_field, tuple(ordered)


def flag_table() -> dict[str, Flag]:
    """Field (argparse dest) -> Flag, for every destination ``sglang serve`` can set."""
    return _table()[0]


@cache
def option_strings() -> dict[str, Flag]:
    """Every accepted option string (names, aliases, --no-X forms), in registration order (a
    copy; ``option_index`` is the shared, read-only one the parser looks up in)."""
    return dict(_table()[1])


@dataclass(frozen=True)
class OptionIndex:
    """The option strings indexed for argparse's prefix rule in O(log n) per lookup:
    ``by_name`` (read-only, registration order), ``ordered`` (sorted, for ``bisect``) and
    ``rank`` (each string's registration position: argparse lists matches in that order)."""

    by_name: Mapping[str, Flag]
    ordered: tuple[str, ...]
    rank: Mapping[str, int]


@cache
def option_index() -> OptionIndex:
    """The one :class:`OptionIndex` of the committed table."""
    by_name = dict(_table()[1])
    return OptionIndex(
        MappingProxyType(by_name),
        tuple(sorted(by_name)),
        MappingProxyType({name: k for k, name in enumerate(by_name)}),
    )


def default_of(field_name: str) -> Any:
    """SGLang's parser default for a field (None for fields the table does not hold)."""
    return _defaults().get(field_name)


@cache
def _defaults() -> dict[str, Any]:
    """Field -> default, once (``default_of`` is asked for every field of every launch)."""
    return {name: flag.default for name, flag in flag_table().items()}


def cli_name(field_name: str) -> str:
    """The canonical CLI spelling of a field."""
    return flag_table()[field_name].cli


def values_from_config(mapping: dict[str, Any]) -> dict[str, Any]:
    """Field values from an SGLang ``--config`` YAML mapping (keys with dashes or underscores)."""
    out: dict[str, Any] = {}
    table = flag_table()
    for key, value in mapping.items():
        fname = str(key).lstrip("-").replace("-", "_")
        if fname in table:
            out[fname] = value
    return out


def display_name(flag: Flag) -> str:
    """How argparse names an action in its errors: its option strings joined by '/'."""
    opts = [flag.cli, *flag.aliases]
    if flag.boolean_optional:
        opts = [o for pair in ((o, "--no-" + o[2:]) for o in opts) for o in pair]
    return "/".join(opts)
