"""``scripts/bench-validation``: the model's leave-one-source-out error on the public corpus.

Prints every figure (published, fitted on all sources, fitted without its own source), the
median and worst held-out ratio for decode and for speculation's ratios, how many are within
25%, and how many speed-ups and losses the held-out model puts on the right side of 1.0x.
"""

from __future__ import annotations

import sys

from specserver_advisor.loaders.corpus import load_corpus, model_config
from specserver_advisor.perf import validation


def main(argv: list[str] | None = None) -> int:
    """Print the table; ``--rounds N`` sets the coordinate search's rounds (default 4)."""
    args = list(sys.argv[1:] if argv is None else argv)
    rounds = 4
    if args[:1] == ["--rounds"] and len(args) == 2 and args[1].isdigit():
        rounds = int(args[1])
    elif args:
        print("usage: bench-validation [--rounds N]", file=sys.stderr)
        return 2
    figs = validation.build(load_corpus(), model_config)
    full, scored = validation.leave_one_source_out(figs, rounds=rounds)
    print(validation.report(full, scored))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
