"""``specserver-operator``: run kopf on the handlers module. Called as a console script.

``specserver-operator render FILE`` prints, offline, the objects the operator would create for
each SpecServer in FILE (``reconcile.offline``: the operator's own pass, no cluster);
``--version`` prints the versions.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

import yaml

# kopf imports the official client library when it is installed, only to recognise its objects;
# this operator never passes any (client.py speaks REST itself) and the import alone is ~30 MB.
for _unused in ("kubernetes", "kubernetes_asyncio", "pykube"):
    sys.modules.setdefault(_unused, None)  # type: ignore[arg-type]

import kopf  # noqa: E402

from specserver_advisor.errors import guarded_output, shown  # noqa: E402
from specserver_operator import settings  # noqa: E402
from specserver_operator.reconcile import runsettings  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """Flags from the settings table; --help lists each with its environment variable."""
    parser = argparse.ArgumentParser(
        prog="specserver-operator",
        description="Run the SpecServer operator (kopf) until stopped. "
        "`specserver-operator render FILE` prints what it would create, offline.",
        epilog=settings.epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_line())
    for s in settings.SETTINGS:
        names = ["-n", s.flag] if s.flag == "--namespace" else [s.flag]
        dest = s.env
        if s.is_switch:
            parser.add_argument(
                *names, dest=dest, action="store_const", const="1", help=settings.describe(s)
            )
        elif s.flag == "--namespace":
            parser.add_argument(
                *names, dest=dest, action="append", metavar="NAMESPACE", help=settings.describe(s)
            )
        else:
            metavar = s.flag[2:].upper().replace("-", "_")
            parser.add_argument(*names, dest=dest, metavar=metavar, help=settings.describe(s))
    return parser


def version_line() -> str:
    from specserver_advisor import SGLANG_VERSION, __version__

    return f"specserver-operator {__version__} (SGLang {SGLANG_VERSION})"


def render_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specserver-operator render",
        description="Print, offline, the objects the operator would create for each SpecServer "
        "in FILE (its own validation, engine config and templates; no cluster is contacted). "
        "Model configs: the spec's inline configs, --model-dir, the HF cache, the bundled ones.",
    )
    parser.add_argument("file", type=Path, metavar="FILE")
    parser.add_argument(
        "--model-dir",
        action="append",
        default=[],
        help="directory to look up model configs in, or PATH=DIR (as specserver-advisor lint)",
    )
    parser.add_argument("--hf-endpoint", help="HF-compatible endpoint (default: offline)")
    return parser


def run_render(argv: list[str]) -> int:
    """``render FILE``: YAML documents on stdout; exit 1 when the operator would refuse a
    SpecServer (its ConfigValid reason and message on stderr), 2 on unusable input."""
    from specserver_advisor.cli.lint import model_dirs
    from specserver_advisor.errors import UsageError
    from specserver_operator.reconcile import offline

    parser = render_parser()
    a = parser.parse_args(argv)
    try:
        dirs, maps = model_dirs(a.model_dir, Path(), "--model-dir")
        docs = offline.read_specservers(a.file)
    except (UsageError, offline.RenderInputError) as exc:
        parser.error(str(exc))
    out: list[dict[str, object]] = []
    refused = 0
    for doc in docs:
        done = offline.render_specserver(doc, None, a.hf_endpoint, dirs, maps)
        name = str((doc.get("metadata") or {}).get("name", "?"))[:253]
        if done.refused is not None:
            refused += 1
            reason, message = done.refused
            print(f"specserver-operator: {name!r} refused: {reason}: {message}", file=sys.stderr)
            continue
        for code, message in done.warnings:
            print(f"specserver-operator: {name!r} warning: {code}: {message}", file=sys.stderr)
        out += done.objects
    if out:
        sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False))
    return 1 if refused else 0


def main(argv: list[str] | None = None) -> int:
    """Parse operator flags and run kopf until stopped (or ``render FILE``). The flags are
    read, and a bad one refused (exit 2 naming it), through ``errors.guarded_output``: what they
    echo is escaped."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["render"]:
        return run_render(argv[1:])
    with guarded_output():
        args = vars(build_parser().parse_args(argv))
        if args.get("SPECSERVER_NAMESPACES") is not None:
            args["SPECSERVER_NAMESPACES"] = ",".join(args["SPECSERVER_NAMESPACES"])
        # Where handlers.configure reads them on kopf's start-up.
        os.environ.update(settings.resolve_environ(args, os.environ))
        try:
            runsettings.read_settings()  # only to refuse a bad value now; read at start-up
        except ValueError as exc:
            build_parser().error(shown(exc))
    value = settings.value
    namespaces = [n for n in value("SPECSERVER_NAMESPACES").split(",") if n]
    verbose = bool(value("SPECSERVER_VERBOSE"))
    kopf.configure(verbose=verbose)
    if not verbose:
        # kopf logs "Handler ... succeeded." for every watch event of every object (thousands
        # a minute at scale); its warnings and errors still show. Our own lines are specserver.*.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    from specserver_operator import handlers
    from specserver_operator.kube import kopfpaging  # registers the handlers

    try:
        kopfpaging.install()  # before kopf lists anything; refuses a kopf it cannot wrap
    except kopfpaging.UnsupportedKopf as exc:
        print(f"specserver-operator: {exc}", file=sys.stderr)
        return 2

    handlers.NAMESPACES[:] = namespaces

    asyncio.run(
        kopf.operator(
            clusterwide=not namespaces,
            namespaces=namespaces,
            liveness_endpoint=value("SPECSERVER_LIVENESS_URL"),
            standalone=True,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
