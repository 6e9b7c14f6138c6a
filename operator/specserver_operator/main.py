"""``specserver-operator``: run kopf on the handlers module. Called as a console script."""

from __future__ import annotations

import argparse
import asyncio
import sys

# kopf imports the official client library when it is installed, only to recognise its objects;
# this operator never passes any (client.py speaks REST itself) and the import alone is ~30 MB.
for _unused in ("kubernetes", "kubernetes_asyncio", "pykube"):
    sys.modules.setdefault(_unused, None)  # type: ignore[arg-type]

import kopf  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse operator flags and run kopf until stopped."""
    parser = argparse.ArgumentParser(prog="specserver-operator")
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable); default: all namespaces",
    )
    parser.add_argument(
        "--liveness", default="http://0.0.0.0:8080/healthz", help="kopf liveness endpoint URL"
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    kopf.configure(verbose=args.verbose)
    from specserver_operator import handlers  # registers the handlers

    handlers.NAMESPACES[:] = args.namespace

    asyncio.run(
        kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            liveness_endpoint=args.liveness,
            standalone=True,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
