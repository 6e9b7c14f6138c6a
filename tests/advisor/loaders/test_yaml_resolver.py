"""``bounded_yaml``'s loader resolves implicit tags exactly as PyYAML's SafeLoader does."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specserver_advisor.loaders import bounded_yaml

#: Every character a resolver is keyed on, the signs and digits, and others.
_FIRSTS = sorted(k for k in yaml.SafeLoader.yaml_implicit_resolvers if k) + list("-+.0aZ_ :")
_SAMPLES = [
    "",
    "~",
    "null",
    "Null",
    "NULL",
    "true",
    "True",
    "yes",
    "No",
    "off",
    "ON",
    "y",
    "n",
    "1",
    "-1",
    "+1",
    "-0x1F",
    "0o17",
    "017",
    "0b101",
    "1_000",
    "-1:30:00",
    "190:20:30",
    "1.5",
    "-.5",
    "+.inf",
    "-.Inf",
    ".nan",
    ".NaN",
    "1e3",
    "1.0e+3",
    "-1.5e-3",
    "6.8523015e+5",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "<<",
    "=",
    "--",
    "-",
    "+",
    "--x1",
    "-x",
    "--1",
    "-.",
    "+.",
    "-a",
    "+-1",
    "!x",
    "&a",
    "*a",
    "--model-path",
    "0x",
    "-0",
    "1:",
    ".",
]


def _pyyaml(value: str, implicit: tuple[bool, bool]) -> str:
    return yaml.SafeLoader("").resolve(yaml.ScalarNode, value, implicit)


def _ours(value: str, implicit: tuple[bool, bool]) -> str:
    return bounded_yaml._Loader("").resolve(yaml.ScalarNode, value, implicit)


def test_samples_resolve_as_pyyaml() -> None:
    for value in _SAMPLES:
        for implicit in ((True, False), (False, True), (False, False)):
            assert _ours(value, implicit) == _pyyaml(value, implicit), (value, implicit)


@settings(max_examples=3000, deadline=None)
@given(
    first=st.sampled_from(_FIRSTS),
    rest=st.text(alphabet="0123456789._:-+eExXoObB abcfinNtyTY", max_size=12),
)
def test_any_scalar_resolves_as_pyyaml(first: str, rest: str) -> None:
    value = first + rest
    assert _ours(value, (True, False)) == _pyyaml(value, (True, False))


def test_collections_and_documents_compose_as_pyyaml() -> None:
    text = "a: [1, -1, --x, 1.5, yes, ~, 2001-12-14, '1']\nb: {c: !!str 3}\n---\n- x\n"
    ours = bounded_yaml.compose(text, "t")
    theirs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))

    def shape(node: yaml.Node) -> object:
        if isinstance(node, yaml.ScalarNode):
            return (node.tag, node.value)
        if isinstance(node, yaml.SequenceNode):
            return (node.tag, [shape(n) for n in node.value])
        return (node.tag, [(shape(k), shape(v)) for k, v in node.value])

    assert [shape(n) for n in ours] == [shape(n) for n in theirs]
