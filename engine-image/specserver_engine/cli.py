"""``specserver-engine``: the engine pod's entrypoint. Called as a console script.

Subcommands arrive with the engine work (preflight, serve, simulate); ``version`` reports the
pinned SGLang version this package targets.
"""

from __future__ import annotations

import argparse

from specserver_advisor import SGLANG_VERSION, __version__


def main(argv: list[str] | None = None) -> int:
    """Dispatch subcommands."""
    parser = argparse.ArgumentParser(prog="specserver-engine")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print versions")
    args = parser.parse_args(argv)
    if args.command == "version":
        print(f"specserver {__version__} (SGLang {SGLANG_VERSION})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
