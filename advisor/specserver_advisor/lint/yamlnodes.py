"""Fast YAML loading that keeps line and column of every key and item (libyaml composer).

Builds dicts and lists carrying an ``lc`` attribute shaped like ruamel's (0-based ``line``,
``col``, ``key(k)``, ``value(k)``, ``item(i)``), so the source readers can point at the exact
argument. Used by ``sources.py``; an order of magnitude faster than a round-trip loader.
"""

from __future__ import annotations

from typing import Any

import yaml

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader


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


_CONSTRUCTOR = yaml.SafeLoader("")
_STR = "tag:yaml.org,2002:str"


def _convert(node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        out = PMap()
        out.lc = _LC(node.start_mark.line, node.start_mark.column, node.end_mark)
        for key_node, value_node in node.value:
            key = _convert(key_node)
            try:
                hash(key)
            except TypeError:
                key = str(key)
            out[key] = _convert(value_node)
            out.lc.keys[key] = (key_node.start_mark.line, key_node.start_mark.column)
            out.lc.values[key] = (value_node.start_mark.line, value_node.start_mark.column)
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = PSeq(_convert(n) for n in node.value)
        seq.lc = _LC(node.start_mark.line, node.start_mark.column, node.end_mark)
        seq.lc.items = [(n.start_mark.line, n.start_mark.column) for n in node.value]
        return seq
    if node.tag == _STR:  # most scalars: skip the constructor machinery
        return node.value
    return _CONSTRUCTOR.construct_object(node, deep=True)


def load_all(text: str) -> list[Any]:
    """Every document, converted; raises yaml.YAMLError on bad YAML."""
    return [_convert(node) for node in yaml.compose_all(text, Loader=_Loader) if node is not None]
