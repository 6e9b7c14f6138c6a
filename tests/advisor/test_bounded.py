"""loaders.bounded: untrusted JSON refused with a message naming the input, never a traceback."""

from __future__ import annotations

import pytest

from specserver_advisor.loaders.bounded import InputLimitError, depth, json_object, json_value


def test_depth_counts_containers_without_recursion() -> None:
    assert depth(1) == 0
    assert depth({"a": [1, {"b": []}]}) == 4
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert depth(deep) == 100_001


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
        ('{"a":' * 65 + "1" + "}" * 65, "nested more than 64 levels deep"),
        (b"\xff\xfe", "not UTF-8"),
        ("{'a': 1}", "not valid JSON"),
        ("x" * 20, "not valid JSON"),
    ],
)
def test_bad_text_is_an_input_error_naming_the_input(text: str | bytes, says: str) -> None:
    with pytest.raises(InputLimitError) as err:
        json_value(text, "spec.modelSource.inline.target")
    assert str(err.value).startswith("spec.modelSource.inline.target: ")
    assert says in str(err.value)


def test_size_is_checked_before_parsing() -> None:
    with pytest.raises(InputLimitError, match="over the limit of 10"):
        json_value("[" * 11, "x", max_bytes=10)


def test_an_object_is_returned_as_parsed() -> None:
    assert json_object('{"a": [1, 2]}', "x") == {"a": [1, 2]}
    with pytest.raises(InputLimitError, match="expected a JSON object, got list"):
        json_object("[1]", "x")
