"""Option matching by index (issue 38): ``flags.match_option`` keeps argparse's abbreviation
rule exactly, checked against Python's own ``argparse`` built from the committed flag table, and
many distinct unknown flags cost O(log n) each (a CPU-time budget, not wall time)."""

from __future__ import annotations

import argparse
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from specserver_advisor.sglang.flags import match_option, parse_server_argv
from specserver_advisor.sglang.flagtable import flag_table, option_strings


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Refused(message)


def _argparse() -> _Parser:
    """An argparse parser with every option string of the table (allow_abbrev, as SGLang's)."""
    parser = _Parser(prog="x", add_help=False)
    by_flag: dict[int, list[str]] = {}
    for option, flag in option_strings().items():
        by_flag.setdefault(id(flag), []).append(option)
    for k, options in enumerate(by_flag.values()):
        parser.add_argument(*options, dest=f"d{k}")
    return parser


PARSER = _argparse()
OPTIONS = sorted(option_strings())


def _reference(token: str) -> tuple[str | None, str | None]:
    """(the option string argparse matched, or None; its error, or None)."""
    try:
        found = PARSER._parse_optional(token)
    except _Refused as exc:
        return None, str(exc)
    if not found or found[0] is None:
        return None, None
    return found[1], None


@st.composite
def tokens(draw: st.DrawFn) -> str:
    option = draw(st.sampled_from(OPTIONS))
    cut = option[: draw(st.integers(1, len(option)))]
    tail = draw(st.sampled_from(["", "", "=1", "=a=b", "x", "-", " y", "5"]))
    return cut + tail


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(st.one_of(tokens(), st.text(alphabet="-=abcdefghinoprstuvx ", max_size=12)))
def test_match_option_agrees_with_argparse(token: str) -> None:
    if not token.startswith("-") or token in ("-", "--"):
        return
    expected, refusal = _reference(token)
    flag, error = match_option(token)
    if refusal is not None:
        assert error is not None and error.startswith("ambiguous option")
        assert refusal == error, (token, refusal, error)
    elif expected is not None:
        assert flag is option_strings()[expected], (token, expected, flag)
    else:
        assert flag is None, (token, flag)


def test_every_table_prefix_agrees_with_argparse() -> None:
    seen = {o[:n] for o in OPTIONS for n in range(2, len(o) + 1)}
    for token in sorted(seen):
        expected, refusal = _reference(token)
        flag, error = match_option(token)
        assert (error if refusal else None) == refusal, token
        assert (flag is None) == (expected is None), token


def test_many_distinct_unknown_flags_cost_little_cpu() -> None:
    """20,000 distinct unknown flags: each was prefix-matched against every option string
    (with a copy of the table per lookup), seconds of CPU; indexed, a fraction of one."""
    argv = [f"--no-such-flag-{i}" for i in range(20_000)]
    start = time.process_time()
    parsed = parse_server_argv(argv)
    spent = time.process_time() - start
    assert len(parsed.issues) == 20_000
    assert parsed.error is not None and parsed.error.startswith("sglang serve: error:")
    assert spent < 1.0, f"{spent:.2f} s of CPU for 20,000 unknown flags"


def test_the_table_is_what_the_index_holds() -> None:
    assert flag_table(), "the committed flag table is empty"
    assert len(OPTIONS) == len(set(OPTIONS))
