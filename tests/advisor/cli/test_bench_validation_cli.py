"""``scripts/bench-validation``'s arguments: another start for a latency constant, one more
constant fitted, and a clear error naming the argument for anything else."""

from __future__ import annotations

import pytest

from specserver_advisor.cli import benchvalidation
from specserver_advisor.perf import validation
from specserver_advisor.perf.constants import CORPUS_FITTED


def test_no_arguments_are_the_committed_table() -> None:
    assert benchvalidation.parse([]) == (4, validation.PRIOR, CORPUS_FITTED)


def test_a_constant_set_and_one_more_fitted() -> None:
    rounds, start, fitted = benchvalidation.parse(
        ["--rounds", "2", "--set", "spec_sync_host_s=0.0027", "--fit", "spec_sync_host_s"]
    )
    assert rounds == 2
    assert start.spec_sync_host_s == 0.0027
    assert start.kernel_floor_s == validation.PRIOR.kernel_floor_s
    assert fitted == (*CORPUS_FITTED, "spec_sync_host_s")
    # Fitting one already fitted adds nothing.
    assert benchvalidation.parse(["--fit", "kernel_floor_s"])[2] == CORPUS_FITTED


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--set", "bandwidth_efficiency=0.5"], "'bandwidth_efficiency' is not a latency"),
        (["--set", "spec_sync_host_s=soon"], "'soon' is not a number of seconds"),
        (["--set", "spec_sync_host_s=nan"], "seconds must be within 0-1"),
        (["--set", "spec_sync_host_s=5"], "seconds must be within 0-1"),
        (["--fit", "prefill_efficiency"], "'prefill_efficiency' is not a latency"),
        (["--rounds", "0"], "--rounds 0: not understood"),
        (["--rounds"], "--rounds needs a value"),
        (["--verbose", "x"], "--verbose x: not understood"),
    ],
)
def test_a_bad_argument_is_named(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert benchvalidation.main(args) == 2
    err = capsys.readouterr().err
    assert says in err and "usage: bench-validation" in err


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_exits_zero(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert benchvalidation.main([flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: bench-validation") and "--fit NAME" in out
