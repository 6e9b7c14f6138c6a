"""Fast YAML loading that keeps line and column of every key and item (libyaml composer).

Builds dicts and lists carrying an ``lc`` attribute shaped like ruamel's (0-based ``line``,
``col``, ``key(k)``, ``value(k)``, ``item(i)``), so the source readers can point at the exact
argument. Used by ``sources.py`` and ``replay --policy``; an order of magnitude faster than a
round-trip loader. Parsing, the alias-expansion and depth budget, and scalar tags go through
``loaders.bounded_yaml``: a failure is an ``InputLimitError`` naming the input and its line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from specserver_advisor.bounded import gc_paused
from specserver_advisor.loaders import bounded_yaml


class _LC:
    __slots__ = ("col", "end_line", "items", "keys", "line", "values")

    def __init__(self, line: int, col: int, end: yaml.Mark | None = None) -> None:
        self.line, self.col = line, col
        #: 0-based last line the node covers.
        self.end_line = line if end is None else max(line, end.line - (end.column == 0))
        self.keys: dict[Any, tuple[int, int]] = {}
        self.values: dict[Any, tuple[int, int]] = {}
        self.items: list[tuple[int, int]] = []

    @property
    def data(self) -> dict[Any, tuple[int, int]]:
        return self.keys

    def key(self, k: Any) -> tuple[int, int]:
        return self.keys[k]

    def value(self, k: Any) -> tuple[int, int]:
        return self.values[k]

    def item(self, i: int) -> tuple[int, int]:
        return self.items[i]


class PMap(dict[Any, Any]):
    """A mapping with positions."""

    lc: _LC


class PSeq(list[Any]):
    """A sequence with positions."""

    lc: _LC


_STR = "tag:yaml.org,2002:str"


def _convert(node: yaml.Node, what: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        out = PMap()
        out.lc = lc = _LC(node.start_mark.line, node.start_mark.column, node.end_mark)
        keys, values = lc.keys, lc.values
        for key_node, value_node in node.value:
            key = _convert(key_node, what)
            if not isinstance(key, str):
                try:
                    hash(key)
                except TypeError:
                    key = str(key)
            out[key] = _convert(value_node, what)
            mark = key_node.start_mark
            keys[key] = (mark.line, mark.column)
            mark = value_node.start_mark
            values[key] = (mark.line, mark.column)
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = PSeq(_convert(n, what) for n in node.value)
        seq.lc = _LC(node.start_mark.line, node.start_mark.column, node.end_mark)
        seq.lc.items = [(n.start_mark.line, n.start_mark.column) for n in node.value]
        return seq
    if node.tag == _STR:  # most scalars: skip the constructor machinery
        return node.value
    return bounded_yaml.scalar(node, what)


def load_all(text: str, what: str = "YAML") -> list[Any]:
    """Every document, converted; raises InputLimitError (naming ``what``) on bad or
    oversized YAML (``bounded_yaml.compose``)."""
    with gc_paused():  # bounded by the file's size; see ``bounded.gc_paused``
        return [_convert(node, what) for node in bounded_yaml.compose(text, what)]


def load_each(text: str, what: str = "YAML") -> Iterator[Any]:
    """Each document in turn, converted (``bounded_yaml.compose_each``): the rest of the file
    is not parsed when the reader stops early."""
    for node in bounded_yaml.compose_each(text, what):
        with gc_paused():
            converted = _convert(node, what)
        yield converted
