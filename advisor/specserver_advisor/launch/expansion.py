"""Kubernetes' ``$(VAR)`` expansion, exactly as the kubelet does it, and the escaping that keeps
tenant text literal through it (pure; docs/security.md, "What the engine runs").

The kubelet expands ``$(NAME)`` in a container's ``command``, ``args`` and ``env`` values after
admission: an env value from the variables defined before it in ``env`` (and the service
variables), ``command``/``args`` from the container's whole environment. ``$$`` is a literal
``$``; a reference to a name that is not defined, and a ``$(`` with no ``)``, stay as written.
This is k8s.io/kubernetes ``third_party/forked/golang/expansion`` (``Expand``,
``tryReadVariableName``, ``MappingFuncFor``), reimplemented: it works on characters where Go
works on bytes, which gives the same text (a ``$`` is one byte and never part of a multi-byte
character).

Without escaping, a tenant's ``extraArgs: ["--uvicorn-access-log-exclude-prefixes",
"$(SMUGGLED)"]`` with ``engine.env: SMUGGLED=--trust-remote-code`` is a value to the webhook and
a flag to SGLang. So every string from the spec is rendered with ``escape`` (each ``$`` doubled,
which the kubelet turns back into the text as written), and only the operator's own references
(LeaderWorkerSet's ``$(LWS_WORKER_INDEX)`` and ``$(LWS_LEADER_ADDRESS)``, ``OPERATOR_VALUES``)
are left to expand. ``container_argv`` gives what a rendered container runs, which speccheck
compares with the argv the checks judged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specserver_advisor.launch.multinode import multinode_args

OPERATOR = "$"
OPENER = "("
CLOSER = ")"
#: What a variable set from ``valueFrom`` (a Secret, a field) expands to here: its value is the
#: kubelet's to read, never the operator's; any text will do, as long as it is not a flag.
FROM_ELSEWHERE = "<valueFrom>"


def _wrap(name: str) -> str:
    return OPERATOR + OPENER + name + CLOSER


def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str]:
    """``MappingFuncFor``: the first context that defines the name gives its value; a name no
    context defines expands to its own reference, unchanged."""

    def lookup(name: str) -> str:
        for context in contexts:
            if name in context:
                return context[name]
        return _wrap(name)

    return lookup


def _read_name(text: str) -> tuple[str, bool, int]:
    """``tryReadVariableName`` on the text after a ``$``: (what to write, whether it is a
    variable's name, how many characters it consumed)."""
    first = text[0]
    if first == OPERATOR:  # "$$": an escaped operator
        return OPERATOR, False, 1
    if first == OPENER:
        end = text.find(CLOSER, 1)
        if end >= 0:
            return text[1:end], True, end + 1
        return OPERATOR + OPENER, False, 1  # "$(" never closed: written as it is
    return OPERATOR + first, False, 1  # a "$" that begins no expression


def expand(text: str, mapping: Callable[[str], str]) -> str:
    """``Expand``: ``text`` with every ``$(NAME)`` replaced by ``mapping(NAME)`` and every
    ``$$`` by ``$``; a ``$`` at the very end stays."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_name, advance = _read_name(text[cursor + 1 :])
            out.append(mapping(read) if is_name else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def references(text: str) -> list[str]:
    """The names ``expand`` would look up in ``text`` (``$$(X)`` is none: an escape)."""
    found: list[str] = []

    def note(name: str) -> str:
        found.append(name)
        return ""

    expand(text, note)
    return found


def escape(text: str) -> str:
    """``text`` written so that ``expand`` gives it back unchanged, whatever the environment."""
    return text.replace(OPERATOR, OPERATOR + OPERATOR)


def container_env(
    env: Sequence[Mapping[str, Any]], injected: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the kubelet gives a container with ``env``: each value expanded from
    the variables before it (and ``injected``, the variables something else puts in every
    pod: LeaderWorkerSet's, the service links), a later entry of a name replacing the earlier;
    a ``valueFrom`` variable is ``FROM_ELSEWHERE``."""
    base = dict(injected or {})
    defined: dict[str, str] = {}
    for item in env:
        name = str(item.get("name", ""))
        if "value" in item and item["value"] is not None:
            defined[name] = expand(str(item["value"]), mapping_for(defined, base))
        elif "valueFrom" in item:
            defined[name] = FROM_ELSEWHERE
        else:
            defined[name] = ""
    return {**base, **defined}


def container_argv(
    container: Mapping[str, Any], injected: Mapping[str, str] | None = None
) -> list[str]:
    """``command`` + ``args`` of a rendered container as its process receives them."""
    values = mapping_for(container_env(container.get("env") or [], injected))
    items = [*(container.get("command") or []), *(container.get("args") or [])]
    return [expand(str(item), values) for item in items]


def operator_positions(argv: Sequence[str], nodes: int) -> set[int]:
    """Indexes of ``argv`` that hold the operator's own references: the value after the
    first ``--node-rank`` and ``--dist-init-addr`` (the render puts them before any extraArgs,
    which may not set either), when it is exactly what ``multinode_args`` renders."""
    out: set[int] = set()
    for flag, value in multinode_args(nodes):
        if OPERATOR not in value:
            continue
        try:
            at = list(argv).index(flag) + 1
        except ValueError:
            continue
        if at < len(argv) and argv[at] == value:
            out.add(at)
    return out


def render_args(argv: Sequence[str], nodes: int) -> list[str]:
    """``argv`` as written into a container's ``args``: every item escaped except the
    operator's references (``operator_positions``)."""
    keep = operator_positions(argv, nodes)
    return [item if i in keep else escape(item) for i, item in enumerate(argv)]


def render_env(env: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``env`` as written into a container: every literal value escaped."""
    return [
        {**item, "value": escape(str(item["value"]))}
        if item.get("value") is not None
        else dict(item)
        for item in env
    ]
