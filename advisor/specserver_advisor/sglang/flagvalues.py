"""How ``sglang serve``'s argparse turns one option's text into a value, with its errors.

``type`` conversion (int, float, nullable str, SGLang's ``human_readable_int``), ``choices``,
the ``nargs`` complaint and the value a switch stores, each with argparse's own wording. Used by
``flags.parse_server_argv``. Pure.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from specserver_advisor.sglang.flagtable import Flag, display_name

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


def convert_value(flag: Flag, name: str, raw: str) -> tuple[Any, str | None]:
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
                return None, f"argument {display_name(flag)}: {exc}"
    except ValueError:
        return None, f"argument {display_name(flag)}: invalid {kind} value: {raw!r}"
    if flag.choices is not None and str(value) not in flag.choices:
        shown = ", ".join(repr(c) for c in flag.choices)
        return (
            None,
            f"argument {display_name(flag)}: invalid choice: {value!r} (choose from {shown})",
        )
    return value, None


def nargs_error(flag: Flag) -> str:
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
    return f"argument {display_name(flag)}: {what}"


def switch_value(flag: Flag, name: str) -> Any:
    if flag.boolean_optional:
        return not name.startswith("--no-")
    if flag.action == "_StoreFalseAction":
        return False
    if flag.action in ("_StoreConstAction",):
        return flag.const
    if flag.action == "DeprecatedStoreConstAction":
        return flag.const if flag.const is not None else True
    return True
