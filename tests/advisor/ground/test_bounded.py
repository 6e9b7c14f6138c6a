"""loaders.bounded: untrusted JSON refused with a message naming the input, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserver_advisor.bounded import InputLimitError, depth, json_object, json_value


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


def test_yaml_aliases_are_counted_as_the_nodes_they_produce() -> None:
    from specserver_advisor.loaders import bounded_yaml

    (doc,) = bounded_yaml.compose("a: &a [1, 2]\nb: [*a, *a, *a]\n", "f.yaml")
    # map, 2 keys, a's list and items (3), b's list, three copies of a's (3 each)
    assert bounded_yaml.measure(doc, "f.yaml", 100, 10) == 1 + 2 + 3 + 1 + 9
    with pytest.raises(InputLimitError, match=r"^f.yaml: expands to more than 15 nodes"):
        bounded_yaml.compose("a: &a [1, 2]\nb: [*a, *a, *a]\n", "f.yaml", max_nodes=15)


def test_yaml_depth_and_cycles_are_refused_with_the_line() -> None:
    from specserver_advisor.loaders import bounded_yaml

    with pytest.raises(InputLimitError, match="nested more than 3 levels deep") as err:
        bounded_yaml.compose("a:\n  b:\n    c: [[1]]\n", "f.yaml", max_depth=3)
    assert err.value.line is not None
    with pytest.raises(InputLimitError, match=r"recursive YAML alias .*\(line 2, column 4\)"):
        bounded_yaml.compose("x: 1\nb: &b {c: *b}\n", "f.yaml")


def test_yaml_load_is_safe_load_within_the_budget() -> None:
    from specserver_advisor.loaders import bounded_yaml

    text = "base: &base {gpu: L4, n: 2}\nfull:\n  <<: *base\n  n: 3\n"
    assert bounded_yaml.load(text, "s.yaml") == {
        "base": {"gpu": "L4", "n": 2},
        "full": {"gpu": "L4", "n": 3},
    }
    with pytest.raises(
        InputLimitError,
        match=r"^s.yaml: tag:yaml.org,2002:int does not fit .* \(line 1, column 9\)",
    ):
        bounded_yaml.load("dryRun: !!int yes\n", "s.yaml")


def test_a_file_is_refused_from_its_size_before_it_is_read(tmp_path: Path) -> None:
    from specserver_advisor.loaders.reading import read_bytes, read_text

    big = tmp_path / "big"
    with big.open("wb") as f:
        f.truncate(10**12)  # a terabyte, sparse: reading it would never finish
    with pytest.raises(InputLimitError, match=r"too large \(1000000000000 bytes, over the limit"):
        read_bytes(big)
    (tmp_path / "bad").write_bytes(b"ok\nok\n\xc3(")
    with pytest.raises(InputLimitError, match=r"not UTF-8 text \(.* at byte 6, line 3\)") as err:
        read_text(tmp_path / "bad")
    assert err.value.line == 3 and str(err.value).startswith(str(tmp_path / "bad"))
    with pytest.raises(InputLimitError, match="cannot read"):
        read_bytes(tmp_path / "missing")


def test_a_file_is_read_whole_at_its_size_and_past_it_when_it_grew(tmp_path: Path) -> None:
    """A regular file is read in one call of its ``fstat`` size; one that holds more than
    that (it grew, or /proc reports 0) is still read whole, and refused past the limit."""
    import io

    from specserver_advisor.loaders.reading import read_bytes, read_stream

    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 10)
    assert read_bytes(exact, max_bytes=10) == b"x" * 10
    assert read_stream(io.BytesIO(b"y" * 50), "grew", max_bytes=100, size=3) == b"y" * 50
    with pytest.raises(InputLimitError, match="grew: too large"):
        read_stream(io.BytesIO(b"y" * 101), "grew", max_bytes=100, size=3)
    status = read_bytes("/proc/self/status")  # st_size 0, and text in it
    assert b"Name:" in status and b"VmRSS" in status
