"""``specserver-engine``: the engine pod's entrypoint. Called as a console script.

Subcommands: ``preflight`` (init container), ``serve`` (exec SGLang), ``simulate`` (a GPU-free
engine speaking SGLang's HTTP API and metrics), ``version``. Arguments after ``--`` (or the rest
of the line) are SGLang's own flags, one argv item each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specserver_advisor import SGLANG_VERSION, __version__
from specserver_advisor.errors import guarded_output


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def main(argv: list[str] | None = None) -> int:
    """Dispatch subcommands; everything printed goes through ``errors.guarded_output``
    (input-derived text escaped, no line starting ``::``)."""
    with guarded_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, sglang_args = _split(argv)
    parser = argparse.ArgumentParser(prog="specserver-engine")
    parser.add_argument(
        "--version",
        action="version",
        version=f"specserver-engine {__version__} (SGLang {SGLANG_VERSION})",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print versions")
    s = sub.add_parser("serve", help="exec `sglang serve` with the given SGLang flags")
    s.add_argument("--dry-run", action="store_true", help="print the argv instead")
    p = sub.add_parser("preflight", help="check configs, context and memory before loading")
    p.add_argument("--gpu-type", default="", help="GPU type for planning when torch sees none")
    p.add_argument("--no-require-gpu", dest="require_gpu", action="store_false")
    p.add_argument("--termination-log", type=Path, default=Path("/dev/termination-log"))
    sub.add_parser(
        "simulate", help="run the simulated engine (SGLang flags + --sim-* flags)", add_help=False
    )
    args, rest = parser.parse_known_args(own)
    extra = rest + sglang_args
    if args.command == "version":
        print(f"specserver {__version__} (SGLang {SGLANG_VERSION})")
        return 0
    if args.command == "serve":
        from specserver_engine.launch import LaunchError, serve

        try:
            return serve(extra, args.dry_run)
        except LaunchError as exc:
            print(f"specserver-engine serve: error: {exc}", file=sys.stderr)
            return 2
    if args.command == "preflight":
        from specserver_engine import preflight

        return preflight.main(extra, args.gpu_type, args.require_gpu, args.termination_log)
    from specserver_engine.sim.simulate import run_simulator

    return run_simulator(extra)


if __name__ == "__main__":
    raise SystemExit(main())
