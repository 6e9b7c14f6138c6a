"""Bounded YAML: the counterpart of ``bounded`` for YAML, with alias expansion counted.

YAML aliases let a few hundred bytes stand for 10^8 nodes ("billion laughs") or for a node
inside itself (``a: &a [*a]``). :func:`compose` parses with libyaml, then measures each
document's node graph without expanding it (one pass over the distinct nodes, no recursion): the
nodes a reader would produce, aliases expanded, must stay within ``max_nodes`` and the nesting
within ``max_depth``, and a recursive alias is refused. :func:`scalar` constructs one scalar and
:func:`load` a whole document as ``yaml.safe_load`` would, both turning a tag that does not fit
its value (``!!int yes``) into the same error. Every failure is an ``InputLimitError`` naming
the input, with line and column. Used by ``lint.yamlnodes`` (lint, ``replay --policy``,
``plan --from``) and ``lint.settings``. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from specserver_advisor.bounded import MAX_NUMBER_CHARS, InputLimitError, gc_paused

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed
_STR_TAG = "tag:yaml.org,2002:str"
#: SafeLoader's implicit resolvers by first character (it has no path or wildcard resolvers).
_RESOLVERS: dict[str, tuple[tuple[str, Any], ...]] = {
    key: tuple(value) for key, value in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
#: After a sign, only a digit or a dot can start an int or a float (YAML 1.1's regexps).
_AFTER_SIGN = frozenset("0123456789.")


class _Loader(_Base):  # type: ignore[misc]
    """SafeLoader's tag resolution in fewer steps (it runs once per scalar, and was most of
    the CPU of composing a large file): the same tags, for the same values (a test compares
    it with PyYAML's own ``resolve`` over every resolver's first characters)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            if implicit[0]:
                first = value[:1]
                if first in "+-" and first and value[1:2] not in _AFTER_SIGN:
                    return _STR_TAG  # "--flag": no int or float starts so
                for tag, regexp in _RESOLVERS.get(first, ()):
                    if regexp.match(value):
                        return tag
            return _STR_TAG
        if kind is yaml.SequenceNode:
            return "tag:yaml.org,2002:seq"
        return "tag:yaml.org,2002:map"


assert not yaml.SafeLoader.yaml_path_resolvers and None not in _RESOLVERS

#: Nodes (aliases expanded) one file may produce: a 2 MB file of plain YAML stays below it.
MAX_NODES = 1_000_000
#: Collections inside collections (a Kubernetes CRD's schema nests a few dozen).
MAX_DEPTH = 100
#: Documents one file may hold (a rendered Helm chart holds a few hundred).
MAX_DOCUMENTS = 10_000


def _at(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _error(what: str, node: yaml.Node, reason: str) -> InputLimitError:
    line, column = _at(node)
    return InputLimitError(what, f"{reason} (line {line}, column {column})", line, column)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _tree_size(root: yaml.Node, what: str, max_depth: int) -> int | None:
    """Nodes under ``root`` when no collection is reached twice (no alias to one), else None:
    the fast path for the common file, one visit per collection. (An alias to a scalar adds
    one node per use, which the file's size already bounds.)"""
    if not isinstance(root, yaml.CollectionNode):
        return 1
    seen = {id(root)}
    count = 1
    stack: list[tuple[yaml.CollectionNode, int]] = [(root, 1)]
    while stack:
        node, level = stack.pop()
        if level > max_depth:
            raise _error(what, node, f"nested more than {max_depth} levels deep")
        kids = _children(node)
        count += len(kids)
        for kid in kids:
            if isinstance(kid, yaml.CollectionNode):
                if id(kid) in seen:
                    return None
                seen.add(id(kid))
                stack.append((kid, level + 1))
    return count


def measure(root: yaml.Node, what: str, max_nodes: int, max_depth: int) -> int:
    """Nodes ``root`` stands for with its aliases expanded (InputLimitError over a limit)."""
    plain = _tree_size(root, what, max_depth)
    if plain is not None:
        if plain > max_nodes:
            raise _error(what, root, f"expands to more than {max_nodes} nodes")
        return plain
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            collection = isinstance(node, yaml.CollectionNode)
            depth[key] = collection + max((depth[id(k)] for k in kids), default=0)
            entered.discard(key)
            if size[key] > max_nodes:
                raise _error(what, node, f"expands to more than {max_nodes} nodes (YAML aliases)")
            if depth[key] > max_depth:
                raise _error(what, node, f"nested more than {max_depth} levels deep")
            continue
        if key in size:
            continue
        entered.add(key)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in entered:
                raise _error(what, kid, "a recursive YAML alias (a node inside itself)")
            if id(kid) not in size:
                stack.append((kid, False))
    return size[id(root)]


def _invalid(what: str, exc: yaml.YAMLError) -> InputLimitError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return InputLimitError(what, f"invalid YAML: {problem}")
    line, column = mark.line + 1, mark.column + 1
    return InputLimitError(
        what, f"invalid YAML at line {line}, column {column}: {problem}", line, column
    )


def compose_each(
    text: str, what: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH
) -> Iterator[yaml.Node]:
    """Each document's node graph in turn (None documents dropped), measured against the
    limits as it is composed: a reader that stops early (lint's 500-launch cap) never parses
    the rest of the file. Documents are counted before any is composed (``MAX_DOCUMENTS``:
    500,000 empty ones cost seconds), and an empty one counts one node against ``max_nodes``.
    A fault later in the file is raised when the reader gets there."""
    markers = text.count("\n---") + text.count("\n...") + text.startswith(("---", "..."))
    if markers > MAX_DOCUMENTS:
        raise InputLimitError(
            what, f"{markers:,} YAML document markers; at most {MAX_DOCUMENTS:,} documents a file"
        )
    left, count = max_nodes, 0
    loader = _Loader(text)
    try:
        while True:
            try:
                with gc_paused():  # per document: never held while the reader runs
                    if not loader.check_node():
                        return
                    node = loader.get_node()
            except yaml.YAMLError as exc:
                raise _invalid(what, exc) from None
            except (ValueError, TypeError, RecursionError) as exc:
                raise InputLimitError(what, f"invalid YAML: {exc}") from None
            count += 1
            if count > MAX_DOCUMENTS:
                raise InputLimitError(what, f"more than {MAX_DOCUMENTS:,} YAML documents")
            if node is None:
                left -= 1  # an empty document counts one node
                if left < 0:
                    raise InputLimitError(what, f"expands to more than {max_nodes} nodes")
                continue
            left -= measure(node, what, left, max_depth)
            yield node
    finally:
        loader.dispose()


def compose(
    text: str, what: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH
) -> list[yaml.Node]:
    """Every document's node graph (None documents dropped), measured against the limits
    (``compose_each``, read to the end)."""
    return list(compose_each(text, what, max_nodes=max_nodes, max_depth=max_depth))


_CONSTRUCTOR = yaml.SafeLoader("")


def _why(exc: Exception) -> str:
    """A constructor's failure in words (``!!bool maybe`` raises a bare KeyError('maybe'),
    ``!!timestamp nope`` an AttributeError about a failed match)."""
    if isinstance(exc, KeyError | AttributeError | IndexError | LookupError):
        return "not a value of that type"
    return str(exc)


#: Tags whose constructor converts digits (any base, YAML 1.1 sexagesimal ``1:30:00``):
#: their text is bounded (``bounded.MAX_NUMBER_CHARS``) before construction, which is
#: quadratic for long sexagesimal text and yields an integer no ``str()`` may print for long
#: ``0x...`` text.
_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


def scalar(node: yaml.Node, what: str) -> Any:
    """The value of one scalar node (its tag applied), or InputLimitError naming where."""
    if node.tag in _NUMBER_TAGS and len(node.value) > MAX_NUMBER_CHARS:
        raise _error(
            what,
            node,
            f"a number written with {len(node.value):,} characters (the limit is "
            f"{MAX_NUMBER_CHARS})",
        )
    try:
        return _CONSTRUCTOR.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _error(what, node, f"invalid YAML: {problem}") from None
    except Exception as exc:  # PyYAML's constructors: ValueError, KeyError, AttributeError...
        raise _error(what, node, f"{node.tag} does not fit {node.value!r}: {_why(exc)}") from None


#: Scalars whose construction cannot fail, or that only ``construct_mapping`` reads (``<<``).
_PLAIN_TAGS = frozenset({"tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"})


def _check_scalars(root: yaml.Node, what: str) -> None:
    """Construct every tagged scalar once, so a misfit raises naming its line and column."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.tag not in _PLAIN_TAGS:
                scalar(node, what)
        else:
            stack.extend(_children(node))


def load(text: str, what: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """The first document as ``yaml.safe_load`` builds it (None when there is none)."""
    docs = compose(text, what, max_nodes=max_nodes, max_depth=max_depth)
    if not docs:
        return None
    _check_scalars(docs[0], what)  # a tag that does not fit is named at its line
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(docs[0])
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark else None
        raise InputLimitError(what, f"invalid YAML: {problem}", line) from None
    except Exception as exc:  # as in ``scalar``: whatever a constructor raises is the file's
        raise InputLimitError(what, f"a YAML tag does not fit its value: {_why(exc)}") from None
