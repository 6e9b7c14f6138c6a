"""``specserver-advisor plan``: parser and runner (loading configs is the only I/O besides output).

Plans a launch given by options (``--model``, ``--draft``, ``--gpu`` and any SGLang 0.5.23 server
flag, named as SGLang names it: ``--page-size 16``, ``--cuda-graph-max-bs-decode 2``,
``--attention-backend fa3``, ...), or the exact launch in a file (``--from FILE``). Prints the
verdict first (see ``plan_render``), or JSON; ``--plot FILE.svg`` draws the curves. Exit codes:
0 the launch starts, 1 it would not, 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

from specserver_advisor.configcheck import ConfigShapeError, check_configs
from specserver_advisor.errors import UsageError
from specserver_advisor.gpus import GPUS
from specserver_advisor.loaders.configs import (
    ConfigNotFoundError,
    ConfigUnreadableError,
    LoadedConfig,
    load_config,
)
from specserver_advisor.plan import PlanInputError
from specserver_advisor.plan_from import Planned


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected integers like 1,8,32, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("concurrency values must be positive integers")
    return values


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


#: The longest prompt ``--prompt-len`` takes (SGLang's longest contexts are far shorter).
MAX_PROMPT_TOKENS = 10_000_000


def prompt_mix(text: str) -> tuple[tuple[int, float], ...]:
    """``--prompt-len``: one length, equally likely lengths ``128,512,4096``, or percentiles
    ``p50=512,p90=2048,p99=8192`` (each length takes the requests up to its percentile from the
    one before; the last also takes those above it). Returns (tokens, share) by length."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise argparse.ArgumentTypeError(
            f"expected lengths like 512 or 128,512,4096 or p50=512,p99=8192, got {text!r}"
        )
    percentiles = ["=" in x for x in items]
    if any(percentiles) and not all(percentiles):
        raise argparse.ArgumentTypeError(
            f"give either lengths (128,512) or percentiles (p50=512,p99=8192), not both: {text!r}"
        )
    if all(percentiles):
        return _percentile_mix(items)
    lengths = [_prompt_tokens(x) for x in items]
    shares: dict[int, float] = {}
    for tokens in lengths:
        shares[tokens] = shares.get(tokens, 0.0) + 1 / len(lengths)
    return tuple(sorted(shares.items()))


def _prompt_tokens(text: str) -> int:
    try:
        tokens = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens") from exc
    if not 1 <= tokens <= MAX_PROMPT_TOKENS:
        raise argparse.ArgumentTypeError(
            f"prompt length {tokens} is outside 1..{MAX_PROMPT_TOKENS} tokens"
        )
    return tokens


def _percentile_mix(items: list[str]) -> tuple[tuple[int, float], ...]:
    points: list[tuple[float, int]] = []
    for item in items:
        name, _, value = item.partition("=")
        try:
            pct = float(name.strip().lower().removeprefix("p"))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected a percentile like p90=2048"
            ) from exc
        if not 0 < pct <= 100:
            raise argparse.ArgumentTypeError(f"{item!r}: the percentile must be in (0, 100]")
        points.append((pct, _prompt_tokens(value.strip())))
    points.sort()
    for (p0, t0), (p1, t1) in itertools.pairwise(points):
        if p0 == p1:
            raise argparse.ArgumentTypeError(f"percentile p{p1:g} is given twice")
        if t1 < t0:
            raise argparse.ArgumentTypeError(
                f"p{p1:g}={t1} is shorter than p{p0:g}={t0}: lengths must grow with the percentile"
            )
    shares: dict[int, float] = {}
    below = 0.0
    for pct, tokens in points:
        shares[tokens] = shares.get(tokens, 0.0) + (pct - below) / 100
        below = pct
    last = points[-1][1]
    shares[last] += (100 - below) / 100
    return tuple(sorted(shares.items()))


def add_parser(sub: Any) -> None:
    """Register ``plan``; SGLang server flags it does not define are passed through to SGLang."""
    p = sub.add_parser(
        "plan",
        help="resolve, size and predict one speculative launch",
        description="Plan one launch. Any SGLang 0.5.23 server flag may be added as SGLang "
        "spells it (e.g. --page-size 16 --cuda-graph-max-bs-decode 2 --dtype float16).",
        allow_abbrev=False,
    )
    p.add_argument(
        "--from",
        dest="from_file",
        type=Path,
        metavar="FILE",
        help=(
            "plan the launch in FILE: a SpecServer, Deployment/Pod/StatefulSet/LeaderWorkerSet, "
            "docker-compose file, shell script or SGLang --config YAML"
        ),
    )
    p.add_argument("--launch", type=int, default=1, help="which launch in FILE (1-based)")
    p.add_argument("--model", help="model directory, HF cache dir, or repo id")
    p.add_argument("--model-revision")
    p.add_argument("--draft", help="draft directory or repo id (omit for NGRAM / MTP targets)")
    p.add_argument("--draft-revision")
    p.add_argument("--gpu", help=f"GPU type: {', '.join(GPUS)}")
    p.add_argument("--gpus", type=int, default=None, help="tensor-parallel GPUs (--tp-size)")
    p.add_argument(
        "--algorithm", help="speculative algorithm (default EAGLE3 with --draft, else NEXTN)"
    )
    p.add_argument("--steps", type=int, help="--speculative-num-steps")
    p.add_argument("--topk", type=int, help="--speculative-eagle-topk")
    p.add_argument("--draft-tokens", type=int, help="--speculative-num-draft-tokens")
    p.add_argument("--accept-length", type=float, help="measured mean accept length")
    p.add_argument(
        "--input-len",
        type=_positive_int,
        default=None,
        help="every prompt's tokens (default 512; fixed lengths arrive in waves)",
    )
    p.add_argument(
        "--prompt-len",
        type=prompt_mix,
        metavar="LENGTHS",
        help="varied prompt lengths, instead of --input-len: equally likely lengths "
        "(128,512,4096) or percentiles (p50=512,p90=2048,p99=8192: each length takes the "
        "requests up to its percentile); requests then arrive staggered, and the chunked "
        "prefill of the long ones sets the ITL P99 and TTFT P99",
    )
    p.add_argument("--output-len", type=_positive_int, default=128)
    p.add_argument("--concurrency", type=_int_list, default=[1, 2, 4, 8, 16, 32, 64])
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--context-length", type=int)
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--kv-cache-dtype")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="engine environment, e.g. SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    )
    p.add_argument(
        "--hf-endpoint",
        help="HF-compatible endpoint (default: $HF_ENDPOINT; offline when neither is set)",
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--plot", type=Path, metavar="FILE.svg", help="draw tok/s and TTFT P99")


def _option_argv(a: argparse.Namespace) -> list[str]:
    """The SGLang flags the plan options stand for."""
    argv: list[str] = []
    pairs = [
        ("--model-path", a.model),
        ("--revision", a.model_revision),
        ("--speculative-algorithm", a.algorithm),
        ("--speculative-draft-model-path", a.draft),
        ("--speculative-draft-model-revision", a.draft_revision),
        ("--tp-size", a.gpus),
        ("--speculative-num-steps", a.steps),
        ("--speculative-eagle-topk", a.topk),
        ("--speculative-num-draft-tokens", a.draft_tokens),
        ("--mem-fraction-static", a.mem_fraction_static),
        ("--context-length", a.context_length),
        ("--max-running-requests", a.max_running_requests),
        ("--kv-cache-dtype", a.kv_cache_dtype),
    ]
    for flag, value in pairs:
        if value is not None:
            argv += [flag, str(value)]
    return argv


def _env(items: list[str]) -> dict[str, str]:
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--env expects NAME=VALUE, got {item!r}")
        env[name] = value
    return env


def _load(
    ref: str | None, revision: str | None, a: argparse.Namespace, config_file: str | None = None
) -> LoadedConfig | None:
    """``config_file``: what SGLang reads instead of config.json (``--decrypted-config-file``,
    ``--decrypted-draft-config-file``: ``sglang.overrides.config_file_names``)."""
    if not ref:
        return None
    return load_config(ref, revision, dict(os.environ), a.hf_endpoint, config_file=config_file)


def build(a: argparse.Namespace, extra: list[str]) -> Planned:
    """Load what the plan needs and plan it (UsageError on bad input)."""
    from specserver_advisor import plan_from
    from specserver_advisor.loaders.specserver import configs_for_spec
    from specserver_advisor.sglang.flags import parse_server_argv
    from specserver_advisor.sglang.overrides import config_file_names

    env = _env(a.env)
    if a.input_len is not None and a.prompt_len is not None:
        raise UsageError("--prompt-len replaces --input-len: give one of them")
    mix = a.prompt_len or ()
    options = {
        "accept_length": a.accept_length,
        "input_len": a.input_len or 512,
        "output_len": a.output_len,
        "concurrency": a.concurrency,
        "prompt_mix": mix,
    }
    try:
        issues: list[str] = []
        if a.from_file is not None:
            if a.model or a.draft:
                raise UsageError("--from plans the file's own launch; drop --model/--draft")
            launches, docs = plan_from.read_file(a.from_file)
            found = len(docs) + len(launches)
            if not found:
                raise UsageError(f"{a.from_file}: no SGLang server launch or SpecServer found")
            if not 1 <= a.launch <= found:
                raise UsageError(f"--launch {a.launch}: {a.from_file} holds {found} launches")
            if a.launch <= len(docs):
                spec = plan_from.specserver_from(docs[a.launch - 1], a.from_file)
                configs = configs_for_spec(spec, dict(os.environ), a.hf_endpoint)
                try:
                    check_configs(configs.target, configs.draft)
                except ConfigShapeError as exc:
                    raise UsageError(
                        f"{a.from_file}: {configs.source} model config: {exc}"
                    ) from exc
                extra = _option_argv(a) + extra
                return plan_from.plan_specserver(
                    spec, configs, a.gpu, extra, a.accept_length, a.concurrency, mix
                )
            la = launches[a.launch - len(docs) - 1]
            # ``sglang serve MODEL``: written as launch_server takes it.
            positional = bool(la.args) and not la.args[0].startswith("-")
            argv = (["--model-path"] if positional else []) + list(la.args)
            argv += _option_argv(a) + extra
            values = dict(la.parsed.values)
            more = parse_server_argv(_option_argv(a) + extra)
            values.update(more.values)
            issues = [i.message for i in la.parsed.issues + more.issues]
            env = {**la.env, **env}
            gpu_name = a.gpu or la.gpu_type
        else:
            algo = (
                []
                if a.algorithm or "--speculative-algorithm" in extra
                else [
                    "--speculative-algorithm",
                    "EAGLE3" if a.draft else "NEXTN",
                ]
            )
            argv = _option_argv(a) + algo + extra
            parsed = parse_server_argv(argv)
            if parsed.issues:
                raise UsageError(parsed.issues[0].message)
            values = parsed.values
            gpu_name = a.gpu
        if not values.get("model_path"):
            raise UsageError("give --model (or --from FILE)")
        gpu = plan_from.gpu_named(gpu_name, "plan")
        target_file, draft_file = config_file_names(values)
        target = _load(values["model_path"], values.get("revision"), a, target_file)
        assert target is not None
        draft = _load(
            values.get("speculative_draft_model_path"),
            values.get("speculative_draft_model_revision"),
            a,
            draft_file,
        )
        if issues:
            return Planned(None, argv, gpu, env, refused=f"SGLang's parser rejects it: {issues[0]}")
        return plan_from.plan_values(values, argv, env, target, draft, gpu, options)
    except (ConfigNotFoundError, ConfigUnreadableError, ConfigShapeError) as exc:
        raise UsageError(str(exc)) from exc
    except PlanInputError as exc:
        raise UsageError(f"{a.from_file}: {exc}" if a.from_file else str(exc)) from exc


def run(a: argparse.Namespace, extra: list[str]) -> int:
    """Plan, print, plot; the exit code says whether the launch starts."""
    from specserver_advisor import plan_render

    planned = build(a, extra)
    verdict = plan_render.verdict(planned)
    if a.plot is not None and not verdict.starts:
        print("specserver-advisor: note: no plot: the launch does not start", file=sys.stderr)
    elif a.plot is not None:
        _plot(a.plot, planned)
    if a.format == "json":
        data: dict[str, Any] = planned.plan.to_json() if planned.plan else {}
        data["verdict"] = {"starts": verdict.starts, "message": verdict.line}
        data["argv"] = plan_render.with_changes(planned.argv, verdict.changes)
        data["flags"] = planned.flags
        text = json.dumps(data, indent=2)
    else:
        text = plan_render.render(planned)
    write_stdout(text)
    return 0 if verdict.starts else 1


def _plot(path: Path, planned: Planned) -> None:
    from specserver_advisor import plan_plot

    if path.suffix.lower() == ".png":
        raise UsageError(
            f"--plot {path}: PNG is not supported (drawing it would need a raster library the "
            "advisor does not depend on); write an .svg file and convert it, e.g. "
            "rsvg-convert -o plot.png plot.svg"
        )
    if path.suffix.lower() != ".svg":
        raise UsageError(f"--plot {path}: write an .svg file")
    if planned.plan is None:
        raise UsageError("--plot: nothing to draw, the launch was refused before planning")
    title = f"{planned.plan.scenario.target.architecture} on {planned.gpu.name}"
    try:
        path.write_text(plan_plot.svg(planned.plan, title))
    except plan_plot.PlotError as exc:
        raise UsageError(f"--plot {path}: {exc}") from exc
    except OSError as exc:
        raise UsageError(f"--plot {path}: {exc.strerror or exc}") from exc


def write_stdout(text: str) -> None:
    """Print; a reader that went away (``plan | head``) ends the output quietly."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
