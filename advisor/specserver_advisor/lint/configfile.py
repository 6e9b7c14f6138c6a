"""SGLang 0.5.23's ``--config FILE`` merge, for the linter: what argv SGLang parses.

``prepare_server_args`` merges only when the exact item ``--config`` is in the argv
(``ConfigArgumentMerger`` in ``sglang/srt/utils/server_args_config_parser.py``): the YAML
mapping's keys become ``--KEY`` as written (so ``cuda-graph-max-bs: 32`` is the ambiguous
prefix on the command line too), a true store_true key the bare flag, any other bool
``--KEY true|false``, a list its items, a mapping its JSON, anything else ``str(value)``; a key of
an action it cannot write (``BooleanOptionalAction``, ``append``, ``nargs='+'``...) raises
``Unsupported config option``. The file's items go before the command line (whose later items
win in argparse), the positional ``sglang serve MODEL`` having become ``--model-path MODEL``
(``sglang/cli/serve.py``).
Used by ``sources`` (a config YAML linted on its own) and ``configsource`` (a launch's
``--config``). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from specserver_advisor.lint.argv import sglang_decides
from specserver_advisor.lint.model import Launch
from specserver_advisor.lint.shell.evaluate import forget_unresolved
from specserver_advisor.sglang.flags import CONFIG_FLAG, parse_server_argv
from specserver_advisor.sglang.flagtable import Flag, option_strings


@dataclass
class ConfigArgv:
    """A config mapping as SGLang writes it into the argv."""

    args: list[str] = field(default_factory=list)
    #: The mapping key each item came from (one per item of ``args``).
    keys: list[Any] = field(default_factory=list)
    #: (key, SGLang's message) for a key it refuses (the launch raises ValueError).
    refused: list[tuple[Any, str]] = field(default_factory=list)


def _one_value(flag: Flag) -> bool:
    """``_takes_one_value``: a store action, or one with argparse's default nargs."""
    return flag.action == "_StoreAction" or flag.nargs is None


@cache
def _key_kinds() -> tuple[frozenset[str], dict[str, str]]:
    """Keys of store_true actions, and the keys SGLang refuses -> their action's class name.

    An action's keys (``_config_keys``) are its dest and every long option string it has,
    ``--no-X`` forms included, dashes as underscores."""
    spellings: dict[int, list[str]] = {}
    flags: dict[int, Flag] = {}
    for option, flag in option_strings().items():
        spellings.setdefault(id(flag), []).append(option)
        flags[id(flag)] = flag

    def keys(k: int) -> set[str]:
        long = (o[2:].replace("-", "_") for o in spellings[k] if o.startswith("--"))
        return {flags[k].field, *long}

    store_true = frozenset(
        key for k, f in flags.items() if f.action == "_StoreTrueAction" for key in keys(k)
    )
    supported = {k for k, f in flags.items() if f.action == "_StoreTrueAction" or _one_value(f)}
    supported_keys = {key for k in supported for key in keys(k)}
    refused: dict[str, str] = {}
    for k, f in flags.items():
        options = spellings[k]
        if k in supported or CONFIG_FLAG in options or "--help" in options or "-h" in options:
            continue
        for key in keys(k) - supported_keys:
            refused[key] = f.action
    return store_true, refused


def config_argv(mapping: Mapping[Any, Any]) -> ConfigArgv:
    """``_convert_config_to_args`` over a mapping (keys in file order)."""
    store_true, refused = _key_kinds()
    out = ConfigArgv()
    for key, value in mapping.items():
        name = str(key)
        norm = name.replace("-", "_")
        if norm in refused:
            out.refused.append(
                (key, f"Unsupported config option '{norm}' with action '{refused[norm]}'")
            )
            continue
        items: list[str]
        if isinstance(value, bool):
            if norm in store_true:
                items = [f"--{name}"] if value else []
            else:
                items = [f"--{name}", str(value).lower()]
        elif isinstance(value, list):
            items = [f"--{name}", *(str(v) for v in value)] if value else []
        elif isinstance(value, dict):
            items = [f"--{name}", json.dumps(value)]
        else:
            items = [f"--{name}", str(value)]
        out.args += items
        out.keys += [key] * len(items)
    return out


def config_index(args: list[str]) -> int | None:
    """Where SGLang finds the config file's path: the exact item ``--config`` (only one)."""
    found = [i for i, a in enumerate(args) if a == CONFIG_FLAG]
    return found[0] if len(found) == 1 and found[0] + 1 < len(args) else None


def apply_config(launch: Launch, name: str, doc: Any, first_line: int = 1) -> bool:
    """Re-parse a launch whose ``--config`` is ``doc`` (the loaded mapping of the file ``name``)
    as SGLang does; False when the launch has no such ``--config`` or ``doc`` is no mapping.

    The file's items are placed at the ``--config`` item (where findings about them point, the
    message naming the key and its line); what the unknown words of the command line left
    undecided stays undecided (``shell.forget_unresolved`` again, at the items' new places).
    """
    at = config_index(launch.args)
    if at is None or not isinstance(doc, Mapping):
        return False
    from_file = config_argv(doc)
    old = [i for i in range(len(launch.args)) if i not in (at, at + 1)]
    # `sglang serve MODEL` is `--model-path MODEL` by the time SGLang merges the file.
    spelled = launch.positional and bool(old) and not launch.args[old[0]].startswith("-")
    lead = len(from_file.args) + spelled
    args = [*from_file.args, *(["--model-path"] if spelled else []), *(launch.args[i] for i in old)]
    here = launch.positions[at] if at < len(launch.positions) else launch.start
    spot = {i: launch.positions[i] if i < len(launch.positions) else here for i in old}
    positions = [here] * len(from_file.args) + ([spot[old[0]]] if spelled else [])
    positions += [spot[i] for i in old]
    moved = {o: lead + k for k, o in enumerate(old)}
    launch.args, launch.positions = args, positions
    launch.config_at = here
    launch.parsed = parse_server_argv(args)
    if launch.launcher is not None:  # a wrapper's own flags are not SGLang's to reject
        launch.parsed.issues = [i for i in launch.parsed.issues if sglang_decides(i.kind, i.token)]
    launch.positional = False
    held, named, gaps = launch.held
    launch.held = (set(), set(), set())
    forget_unresolved(
        launch,
        {moved[i] for i in held if i in moved},
        {moved[i] for i in named if i in moved},
        {moved[i] for i in gaps if i in moved},
    )
    shift = first_line - 1
    for k, key in enumerate(from_file.keys):
        launch.config_keys[k] = f"key {key!r} of {name}, line {_line(doc, key) + shift}"
    launch.config_refused = [
        f"{msg} ({name}, line {_line(doc, key) + shift})" for key, msg in from_file.refused
    ]
    launch.config_from = name
    return True


def _line(doc: Any, key: Any) -> int:
    lc = getattr(doc, "lc", None)
    try:
        return int(lc.key(key)[0]) + 1 if lc is not None else 1
    except (KeyError, AttributeError, TypeError):
        return 1
