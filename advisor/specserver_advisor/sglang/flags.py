"""SGLang 0.5.23 server flags and an argv parser that behaves like its argparse parser.

The flag table (``data/flags-0.5.23.json``) is every action of SGLang's real ``sglang serve``
parser (``ServerArgs.add_cli_args``: the dataclass fields, the flags registered by hand and the
deprecated spellings), dumped by ``scripts/oracle-env flags`` from the cached SGLang environment
and committed, so the advisor never imports sglang. ``parse_server_argv`` follows argparse's own
rules: exact match, then unique prefix (``allow_abbrev``), ``ambiguous option`` listing every
match in registration order, ``nargs``, ``choices`` and ``type`` checks, and argparse's order of
errors. Used by the resolver, the linter (which needs the position of every flag) and the engine
entrypoint. Pure: no I/O beyond reading the data file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

SGLANG_VERSION = "0.5.23"
PROG = "sglang serve"

#: Flags that existed in earlier releases and are gone in 0.5.23 (name -> what to use instead).
#: Only consulted for flags the parser does not accept (the hint beside argparse's error).
REMOVED_FLAGS: dict[str, str] = {
    "--speculative-skip-dp-mlp-sync": "removed in 0.5.23; drop it",
    "--cuda-graph-max-bs": "use --cuda-graph-max-bs-decode (and --cuda-graph-max-bs-prefill)",
}

#: ``--config FILE``: SGLang merges the YAML into the argv before parsing.
CONFIG_FLAG = "--config"
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
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
    """Every accepted option string (names, aliases, --no-X forms), in registration order."""
    return dict(_table()[1])


def default_of(field_name: str) -> Any:
    """SGLang's parser default for a field (None for fields the table does not hold)."""
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
            _display(f) for f in flag_table().values() if f.required and f.field not in self.values
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
    """
    table = option_strings()
    if token in table:
        return table[token], None
    name = token.split("=", 1)[0]
    if "=" in token and name in table:
        return table[name], None
    if len(token) > 1 and token[:2] == "--":
        candidates = [opt for opt in table if opt.startswith(name)]
    else:
        candidates = [opt for opt in table if opt.startswith(token) or opt == token[:2]]
    if len(candidates) == 1:
        return table[candidates[0]], None
    if len(candidates) > 1:
        return None, f"ambiguous option: {token} could match {', '.join(candidates)}"
    return None, f"unrecognized arguments: {token}"


def _matched_name(token: str) -> str:
    table = option_strings()
    if token in table:
        return token
    name = token.split("=", 1)[0]
    if name in table:
        return name
    return next(opt for opt in table if opt.startswith(name))


def _is_optional(token: str) -> bool:
    """argparse's classification of an argv item: an option ('O') or a value ('A')."""
    if not token or token[0] != "-" or token == "-":
        return False
    if token in option_strings():
        return True
    if _NEGATIVE_NUMBER.match(token):
        return False
    return " " not in token or match_option(token)[0] is not None


_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_readable_int(raw: str) -> int:
    """SGLang's ``human_readable_int`` (``--context-length 128k``); ValueError with its text."""
    value = raw.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in _IEC:
            if "." in number:
                raise ValueError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * _IEC[suffix]
        return int(Decimal(number) * _SI[suffix])
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def _convert(flag: Flag, name: str, raw: str) -> tuple[Any, str | None]:
    kind = flag.type
    value: Any = raw
    try:
        if kind == "int":
            value = int(raw)
        elif kind == "float":
            value = float(raw)
        elif kind == "nullable_str":
            value = None if not raw or raw == "None" else raw
        elif kind == "human_readable_int":
            try:
                value = human_readable_int(raw)
            except ValueError as exc:  # argparse.ArgumentTypeError: its text verbatim
                return None, f"argument {_display(flag)}: {exc}"
    except ValueError:
        return None, f"argument {_display(flag)}: invalid {kind} value: {raw!r}"
    if flag.choices is not None and str(value) not in flag.choices:
        shown = ", ".join(repr(c) for c in flag.choices)
        return None, f"argument {_display(flag)}: invalid choice: {value!r} (choose from {shown})"
    return value, None


def _display(flag: Flag) -> str:
    """How argparse names an action in its errors: its option strings joined by '/'."""
    opts = [flag.cli, *flag.aliases]
    if flag.boolean_optional:
        opts = [o for pair in ((o, "--no-" + o[2:]) for o in opts) for o in pair]
    return "/".join(opts)


def _nargs_error(flag: Flag) -> str:
    nargs = flag.nargs
    if nargs is None:
        what = "expected one argument"
    elif nargs == "?":
        what = "expected at most one argument"
    elif nargs == "+":
        what = "expected at least one argument"
    elif isinstance(nargs, int):
        what = f"expected {nargs} argument" + ("s" if nargs != 1 else "")
    else:
        what = "expected arguments"
    return f"argument {_display(flag)}: {what}"


def _store(parsed: ParsedArgs, flag: Flag, name: str, index: int, value: Any) -> None:
    parsed.values[flag.field] = value
    parsed.positions[flag.field] = index
    parsed.spelled[flag.field] = name


def _switch_value(flag: Flag, name: str) -> Any:
    if flag.boolean_optional:
        return not name.startswith("--no-")
    if flag.action == "_StoreFalseAction":
        return False
    if flag.action in ("_StoreConstAction",):
        return flag.const
    if flag.action == "DeprecatedStoreConstAction":
        return flag.const if flag.const is not None else True
    return True


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
        if token.startswith("--") and token != "--" and token not in option_strings():
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
                        f"argument {_display(flag)}: ignored explicit argument {inline!r}",
                        "value",
                    )
                )
            else:
                _store(parsed, flag, name, i, _switch_value(flag, matched))
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
            parsed.issues.append(ArgvIssue(at, name, _nargs_error(flag), "value"))
            continue
        converted = []
        bad = None
        for raw in values:
            value, bad = _convert(flag, name, raw)
            if bad:
                break
            converted.append(value)
        if bad:
            parsed.issues.append(ArgvIssue(at, name, bad, "value"))
            continue
        if flag.nargs is None or (flag.nargs == "?" and converted):
            _store(parsed, flag, name, at, converted[0])
        elif flag.nargs == "?":
            _store(parsed, flag, name, at, flag.const)
        else:
            _store(parsed, flag, name, at, converted)
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
