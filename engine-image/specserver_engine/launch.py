"""Compose the SGLang command line from the rendered configuration (argv, never a shell).

``specserver-engine serve [--dry-run] -- ARGS`` validates ARGS with the advisor's copy of SGLang
0.5.23's own parser (every flag ``sglang serve`` accepts passes through, hand-registered and
deprecated ones included; what it refuses is refused with its argparse message) and execs
``sglang serve ARGS``. Called by cli.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

from specserver_advisor.sglang.flags import parse_server_argv

SGLANG = "sglang"


class LaunchError(ValueError):
    """ARGS would not start SGLang; one line, like argparse."""


def compose(args: list[str]) -> list[str]:
    """The argv to exec: ``sglang serve`` + validated args (each item separate)."""
    parsed = parse_server_argv(args, positional_model=True)
    error = parsed.error
    if error:
        raise LaunchError(error.removeprefix("sglang serve: error: "))
    return [SGLANG, "serve", *args]


def serve(args: list[str], dry_run: bool = False) -> int:
    """Exec SGLang (or print the argv with ``dry_run``)."""
    argv = compose(args)
    if dry_run:
        print(json.dumps(argv))
        return 0
    if shutil.which(SGLANG) is None:
        print("specserver-engine: sglang is not installed in this image", file=sys.stderr)
        return 127
    sys.stdout.flush()
    os.execvp(SGLANG, argv)
    return 0  # not reached
