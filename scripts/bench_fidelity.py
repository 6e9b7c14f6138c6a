"""scripts/bench-fidelity: how closely the advisor predicts what SGLang 0.5.23 resolves.

Runs the differential harness of tests/oracle (the curated launches, every launch in the
repository's examples, golden files and lint fixtures on each corpus GPU, and N generated ones)
against SGLang itself in the cached oracle environment, and prints the number of cases, the
fraction agreeing on everything compared, agreement per field and per dimension of issue 29
(overrides, the default cap) and the remaining differences. ``--format json`` prints
``{"cases", "agreement", "fields", "dimensions", "differences", ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "oracle"))

import harness  # noqa: E402
import launches  # noqa: E402

import oracle  # noqa: E402

#: What each row of the dimensions table counts (``harness.dimensions``).
DIMENSIONS = {
    "override": "--json-model-override-args, no speculation",
    "override+draft": "--json-model-override-args on a speculative launch (MTP/EAGLE-3/STANDALONE)",
    "config-file": "--decrypted-config-file / --decrypted-draft-config-file (read instead)",
    "default-cap": "speculative, --max-running-requests unset (48, a model hook's, UNO's none)",
}


def main(argv: list[str] | None = None) -> int:
    """Run the cases; print the summary."""
    parser = argparse.ArgumentParser(prog="scripts/bench-fidelity", description=__doc__)
    parser.add_argument("n", nargs="?", type=int, default=5000, help="generated launches")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--format", choices=["text", "json"], default="text")
    args = parser.parse_args(argv)
    why = oracle.missing()
    if why:
        print(f"bench-fidelity: {why}", file=sys.stderr)
        return 2
    worker = oracle.Oracle()
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run = harness.Harness(worker, harness.materialize(Path(tmp)))
            for case in launches.curated_cases():
                run.run(case)
            for case in launches.corpus_cases(REPO):
                run.run(case)
            for case in launches.generated_cases(args.n, args.seed):
                run.run(case)
    finally:
        worker.close()
    elapsed = time.perf_counter() - start
    summary = run.summary()
    if args.format == "json":
        print(json.dumps(summary, indent=1))
        return 0
    print(f"cases {summary['cases']}  agreement {summary['agreement']:.4f}  ({elapsed:.0f} s)")
    for name, frac in summary["fields"].items():
        print(f"  {name:32s} {frac:.4f}")
    print("dimensions (cases, agreement):")
    for name, dim in summary["dimensions"].items():
        print(f"  {name:32s} {dim['cases']:6d}  {dim['agreement']:.4f}  {DIMENSIONS.get(name, '')}")
    diffs = summary["differences"]
    print(f"differences: {len(diffs)}")
    for diff in diffs[:50]:
        print(
            f"  {diff['field']}: advisor {diff['advisor']!r} sglang {diff['sglang']!r}  "
            f"{diff['case']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
