"""``specserver-advisor``: plan a speculative launch and calibrate the performance model.

Parses arguments and hands each subcommand to its module (``plan_command``, ``policy_commands``,
``lint.command``). Exit codes: 0 ok, 1 the plan predicts a startup failure (or lint findings),
2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import os
import sys

from specserver_advisor import SGLANG_VERSION, __version__
from specserver_advisor.cli import lint as lint_command
from specserver_advisor.cli import plan as plan_command
from specserver_advisor.cli import replay as policy_commands
from specserver_advisor.errors import UsageError, guarded_output, shown
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``specserver-advisor``: everything it prints goes through
    ``errors.guarded_output`` (input-derived text escaped, no line starting ``::``)."""
    with guarded_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="specserver-advisor",
        description=f"Plan and check SGLang {SGLANG_VERSION} speculative decoding.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"specserver-advisor {__version__} (SGLang {SGLANG_VERSION})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    plan_command.add_parser(sub)
    policy_commands.add_parsers(sub)
    lint_command.add_parsers(sub)
    cal = sub.add_parser("calibrate", help="print the performance model against field figures")
    cal.add_argument("--fit", action="store_true", help="rerun the fit and print the constants")
    cal.add_argument(
        "--leave-one-out",
        action="store_true",
        help="refit without each fitted figure and print its out-of-sample error",
    )
    cal.add_argument(
        "--cards",
        nargs="+",
        choices=("l4", "gb10"),
        help="with --fit: fit on these cards' figures only (the others are then out of sample)",
    )
    a, extra = parser.parse_known_args(argv)
    if extra and a.command != "plan":
        # exit 2 naming the option, with the subcommand's own usage
        sub.choices[a.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if a.command == "lint":
            return lint_command.run_lint(a)
        if a.command == "explain":
            return lint_command.run_explain(a)
        if a.command == "replay":
            return policy_commands.run_replay(a)
        if a.command == "fleetsim":
            return policy_commands.run_fleetsim(a)
        if a.command == "plan":
            return plan_command.run(a, extra)
        from specserver_advisor.perf import calibration

        if a.cards and not a.fit:
            raise UsageError("--cards selects the figures of a fit: add --fit")
        cards = tuple(a.cards) if a.cards else None
        constants = calibration.fit(cards=cards) if a.fit else DEFAULT_CALIBRATION
        if a.fit:
            print(f"fitted{' on ' + ', '.join(cards) if cards else ''}: {constants}")
        print(calibration.report(constants))
        if a.leave_one_out:
            print()
            print(calibration.report_leave_one_out())
        return 0
    except UsageError as exc:
        print(f"specserver-advisor: error: {shown(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep the exit flush quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
