"""``scripts/bench-validation``: the model's leave-one-source-out error on the public corpus.

Prints every figure (published, fitted on all sources, fitted without its own source), the
median and worst held-out ratio for decode and for speculation's ratios, how many are within
25%, and how many speed-ups and losses the held-out model puts on the right side of 1.0x.

``--set NAME=SECONDS`` starts every fit from another value of a latency constant and
``--fit NAME`` lets the fits move one more: what docs/advisor.md says of a constant's other
values and fits is printed by these (the committed table uses neither).
"""

from __future__ import annotations

import dataclasses
import math
import sys

from specserver_advisor.loaders.corpus import load_corpus, model_config
from specserver_advisor.perf import validation
from specserver_advisor.perf.constants import CORPUS_FITTED, UNFITTED, Calibration

USAGE = "usage: bench-validation [--rounds N] [--set NAME=SECONDS]... [--fit NAME]..."


class BenchArgumentError(ValueError):
    """A bad argument, with the one line that says which and why."""


class HelpRequested(Exception):
    """``-h`` or ``--help``: print what the command does and its usage, and exit 0."""


def _latency(name: str) -> str:
    """``name`` if it is a latency constant the corpus may move (its fitted ones, or one no
    field figure constrains)."""
    known = {f.name for f in dataclasses.fields(Calibration)}
    if name not in known or name not in (*CORPUS_FITTED, *UNFITTED) or not name.endswith("_s"):
        raise BenchArgumentError(f"{name!r} is not a latency constant the corpus may move")
    return name


def parse(args: list[str]) -> tuple[int, Calibration, tuple[str, ...]]:
    """(rounds, the fits' start, the constants they move) from the command line."""
    rounds, start = 4, validation.PRIOR
    fitted: tuple[str, ...] = CORPUS_FITTED
    it = iter(args)
    for arg in it:
        if arg in ("-h", "--help"):
            raise HelpRequested
        value = next(it, None)
        if value is None:
            raise BenchArgumentError(f"{arg} needs a value")
        if arg == "--rounds" and value.isdigit() and 0 < int(value) <= 10:
            rounds = int(value)
        elif arg == "--set" and "=" in value:
            name, _, text = value.partition("=")
            try:
                seconds = float(text)
            except ValueError:
                raise BenchArgumentError(
                    f"--set {value}: {text!r} is not a number of seconds"
                ) from None
            if not (math.isfinite(seconds) and 0 <= seconds <= 1):
                raise BenchArgumentError(f"--set {value}: seconds must be within 0-1")
            start = dataclasses.replace(start, **{_latency(name): seconds})
        elif arg == "--fit":
            fitted = (*fitted, _latency(value)) if value not in fitted else fitted
        else:
            raise BenchArgumentError(f"{arg} {value}: not understood")
    return rounds, start, fitted


def main(argv: list[str] | None = None) -> int:
    """Print the table (the fits' start, constants and rounds as the arguments say)."""
    try:
        rounds, start, fitted = parse(list(sys.argv[1:] if argv is None else argv))
    except HelpRequested:
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    except BenchArgumentError as err:
        print(f"bench-validation: {err}\n{USAGE}", file=sys.stderr)
        return 2
    figs = validation.build(load_corpus(), model_config)
    full, scored = validation.leave_one_source_out(figs, start, rounds, fitted)
    print(validation.report(full, scored, fitted))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
