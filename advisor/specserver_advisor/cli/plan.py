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
import math
import os
import sys
from pathlib import Path
from typing import Any

from specserver_advisor.cli import argtypes
from specserver_advisor.cli.planfrom import Planned
from specserver_advisor.cli.plannodes import nnodes_of, nnodes_problem
from specserver_advisor.cli.plantext import Verdict, switch_spare, verdict, with_changes
from specserver_advisor.errors import UsageError
from specserver_advisor.gpus import GPUS
from specserver_advisor.launch.secrets import mask_argv, mask_values
from specserver_advisor.loaders.configs import (
    ConfigNotFoundError,
    ConfigUnreadableError,
    load_config_in,
)
from specserver_advisor.models import Mode, SpecServerSpec
from specserver_advisor.perf.plan import PlanInputError
from specserver_advisor.sglang.configcheck import LoadedConfig, check_configs
from specserver_advisor.sglang.configvalues import ConfigShapeError

#: How many times ``plan`` applies a verdict's fix and plans again (a context fix can uncover
#: a memory one) before it gives up showing a plan at the fix.
MAX_FIXES = 3
#: The SpecServer fields a verdict's flag stands for (the operator renders them).
SPEC_FIELDS = {"--mem-fraction-static": "mem_fraction_static", "--context-length": "context_length"}


#: Values ``--concurrency`` and ``--prompt-len`` take (counted before any is converted: a
#: 20,000-value list held ``--search-shape`` for minutes), and the largest concurrency.
MAX_LIST_ITEMS = 512
MAX_PROMPT_LENGTHS = 64
MAX_CONCURRENCY = 65_536
#: ``--search-shape`` searches every shape at each load (a concurrency with a prompt length): at
#: most this many loads, about 2 s of CPU (scripts/bench-search-shape).
MAX_SEARCH_LOADS = 128
#: The largest accept length a launch can have (SGLang's most draft tokens, plus one).
MAX_ACCEPT_LENGTH = 1025.0
_int_list = argtypes.whole_list(1, MAX_CONCURRENCY, MAX_LIST_ITEMS, "concurrency values")


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
    if text.count(",") >= MAX_PROMPT_LENGTHS:
        raise argparse.ArgumentTypeError(
            f"{text.count(',') + 1:,} prompt lengths given; at most {MAX_PROMPT_LENGTHS}"
        )
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
    p.add_argument(
        "--launch",
        type=argtypes.whole(1, 1_000_000),
        default=1,
        help="which launch in FILE (1-based)",
    )
    p.add_argument("--model", help="model directory, HF cache dir, or repo id")
    p.add_argument("--model-revision")
    p.add_argument("--draft", help="draft directory or repo id (omit for NGRAM / MTP targets)")
    p.add_argument("--draft-revision")
    p.add_argument("--gpu", help=f"GPU type: {', '.join(GPUS)}")
    p.add_argument(
        "--gpus", type=int, default=None, help="tensor-parallel GPUs over all nodes (--tp-size)"
    )
    p.add_argument(
        "--nnodes",
        type=_positive_int,
        default=None,
        help="nodes the tensor-parallel group spans (SGLang's --nnodes; --gpus / N GPUs per "
        "node; a SpecServer's resources.nodes)",
    )
    p.add_argument(
        "--algorithm", help="speculative algorithm (default EAGLE3 with --draft, else NEXTN)"
    )
    p.add_argument("--steps", type=int, help="--speculative-num-steps")
    p.add_argument("--topk", type=int, help="--speculative-eagle-topk")
    p.add_argument("--draft-tokens", type=int, help="--speculative-num-draft-tokens")
    p.add_argument(
        "--accept-length",
        type=argtypes.real(0, MAX_ACCEPT_LENGTH, low_open=True, name="an accept length"),
        help="measured mean accept length",
    )
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
        "--model-dir",
        action="append",
        default=[],
        help="directory to look up model configs in, or PATH=DIR: a model at or under the "
        "absolute (container) path PATH is looked up under DIR (repeatable; as in lint)",
    )
    p.add_argument(
        "--hf-endpoint",
        help="HF-compatible endpoint (default: $HF_ENDPOINT; offline when neither is set)",
    )
    p.add_argument(
        "--search-shape",
        action="store_true",
        help="search the speculative shapes SGLang accepts (steps, topk, draft tokens, adaptive)"
        " for the best per concurrency band, the crossover and the --max-running-requests",
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--plot", type=Path, metavar="FILE.svg", help="draw tok/s and TTFT P99")
    p.set_defaults(plan_options=[o for action in p._actions for o in action.option_strings])


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
        ("--nnodes", a.nnodes),
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
    dirs, maps = _model_dirs(a)
    return load_config_in(
        ref, revision, dict(os.environ), a.hf_endpoint, dirs, maps, config_file=config_file
    )


def _model_dirs(a: argparse.Namespace) -> tuple[list[Path], list[tuple[str, Path]]]:
    """``--model-dir`` values, read as ``lint`` reads them."""
    from specserver_advisor.cli.lint import model_dirs

    return model_dirs(a.model_dir, Path(), "--model-dir")


def plan_options(a: argparse.Namespace, spec: SpecServerSpec | None = None) -> dict[str, Any]:
    """The workload options ``plan_argv`` takes (a SpecServer's expected lengths for ``spec``)."""
    return {
        "accept_length": a.accept_length,
        "input_len": spec.engine.expected_input_tokens if spec else a.input_len or 512,
        "output_len": spec.engine.expected_output_tokens if spec else a.output_len,
        "concurrency": a.concurrency,
        "prompt_mix": a.prompt_len or (),
    }


def check_extra(extra: list[str], parser_options: list[str]) -> None:
    """A UsageError (exit 2) naming an option that is neither plan's nor an SGLang server
    flag (a typo such as ``--concurency``), instead of planning a launch SGLang would refuse."""
    import difflib

    from specserver_advisor.sglang.flags import parse_server_argv
    from specserver_advisor.sglang.flagtable import SGLANG_VERSION, option_strings

    for issue in parse_server_argv(extra).issues:
        if issue.kind not in ("unknown", "ambiguous"):
            continue
        token = issue.token.split("=", 1)[0]
        known = [*parser_options, *option_strings()]
        close = difflib.get_close_matches(token, known, n=1)
        hint = f"; did you mean {close[0]}?" if close and issue.kind == "unknown" else ""
        what = "ambiguous" if issue.kind == "ambiguous" else "unrecognized"
        raise UsageError(
            f"plan: {what} option {token[:80]!r}: not a plan option, nor an SGLang "
            f"{SGLANG_VERSION} server flag{hint} ({issue.message[:200]})"
        )


def build(a: argparse.Namespace, extra: list[str], fix: list[str] | None = None) -> Planned:
    """Load what the plan needs and plan it (UsageError on bad input); ``fix`` (flag, value
    pairs from a verdict) is set on top of the launch, replacing the same flags."""
    from specserver_advisor.cli import planfrom as plan_from
    from specserver_advisor.loaders.specserver import configs_for_spec
    from specserver_advisor.sglang.flags import parse_server_argv
    from specserver_advisor.sglang.overrides import config_file_names

    env = _env(a.env)
    if a.input_len is not None and a.prompt_len is not None:
        raise UsageError("--prompt-len replaces --input-len: give one of them")
    mix = a.prompt_len or ()
    options = plan_options(a)
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
                spec = spec_with(plan_from.specserver_from(docs[a.launch - 1], a.from_file), fix)
                configs = configs_for_spec(spec, dict(os.environ), a.hf_endpoint, *_model_dirs(a))
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
            group = plan_from.group_size(la)
            if unset := plan_from.unset_variables(la, a.from_file):
                raise UsageError(unset)
            # ``sglang serve MODEL``: written as launch_server takes it.
            positional = bool(la.args) and not la.args[0].startswith("-")
            argv = (["--model-path"] if positional else []) + list(la.args)
            argv = with_changes(argv + _option_argv(a) + extra, fix or [])
            values = dict(la.parsed.values)
            more = parse_server_argv(with_changes(_option_argv(a) + extra, fix or []))
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
            argv = with_changes(_option_argv(a) + algo + extra, fix or [])
            parsed = parse_server_argv(argv)
            if parsed.issues:
                raise UsageError(parsed.issues[0].message)
            values = parsed.values
            gpu_name = a.gpu
            group = None
        if not values.get("model_path"):
            raise UsageError("give --model (or --from FILE)")
        if problem := nnodes_problem(values):
            raise UsageError(problem)
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
        planned = plan_from.plan_values(values, argv, env, target, draft, gpu, options)
        if group is not None and planned.plan is not None and nnodes_of(values) != group:
            planned.plan.notes.append(plan_from.group_mismatch(values, group))
        return planned
    except (ConfigNotFoundError, ConfigUnreadableError, ConfigShapeError) as exc:
        raise UsageError(str(exc)) from exc
    except PlanInputError as exc:
        raise UsageError(f"{a.from_file}: {exc}" if a.from_file else str(exc)) from exc


def spec_with(spec: SpecServerSpec, fix: list[str] | None) -> SpecServerSpec:
    """The SpecServer with a verdict's flags set in the fields that render them."""
    updates = {
        SPEC_FIELDS[fix[k]]: fix[k + 1]
        for k in range(0, len(fix or []) - 1, 2)
        if fix and fix[k] in SPEC_FIELDS
    }
    if not updates:
        return spec
    engine = spec.engine.model_copy(
        update={name: float(v) if "fraction" in name else int(v) for name, v in updates.items()}
    )
    return spec.model_copy(update={"engine": engine})


def at_fix(
    a: argparse.Namespace, extra: list[str], planned: Planned
) -> tuple[list[str], Planned] | None:
    """The launch planned with its verdict's fix set (fixes applied in turn, at most
    ``MAX_FIXES``) with the fix; None when it starts already, no flag fixes it, or the fixes
    do not."""
    fix: list[str] = []
    current, v = planned, verdict(planned)
    for _ in range(MAX_FIXES):
        if v.starts or not v.changes or current.plan is None:
            break
        fix = with_changes(fix, v.changes)
        current = build(a, extra, fix)
        v = verdict(current)
    if current is planned or not v.starts or current.plan is None:
        return None
    return fix, current


def run(a: argparse.Namespace, extra: list[str]) -> int:
    """Plan, print, plot; the exit code says whether the launch starts."""
    from specserver_advisor.cli import plantext as plan_render

    check_extra(extra, getattr(a, "plan_options", []))
    if a.search_shape:
        lengths = len(a.prompt_len or ()) or 1
        if len(a.concurrency) * lengths > MAX_SEARCH_LOADS:
            raise UsageError(
                f"--search-shape searches at most {MAX_SEARCH_LOADS} loads (--concurrency "
                f"values x --prompt-len lengths; got {len(a.concurrency)} x {lengths})"
            )
    planned = build(a, extra)
    if a.search_shape:
        fixed = None if verdict(planned).starts else at_fix(a, extra, planned)
        if fixed is not None:
            print(
                f"specserver-advisor: note: the launch does not start; searched at its fix "
                f"({' '.join(fixed[0])})",
                file=sys.stderr,
            )
        return run_search(a, fixed[1] if fixed else planned)
    v = verdict(planned)
    fixed = None if v.starts else at_fix(a, extra, planned)
    if a.plot is not None and not v.starts:
        print("specserver-advisor: note: no plot: the launch does not start", file=sys.stderr)
    elif a.plot is not None:
        _plot(a.plot, planned)
    if a.format == "json":
        text = json.dumps(strict_json(json_output(planned, v, fixed)), indent=2)
    else:
        text = plan_render.render(planned, fixed)
    write_stdout(text)
    return 0 if v.starts else 1


def run_search(a: argparse.Namespace, planned: Planned) -> int:
    """``--search-shape``: the search's bands, crossover and choice (exit 0 when it chooses a
    shape, 1 when speculation pays nowhere searched). A launch that will not start is searched
    at its fix."""
    from specserver_advisor.cli import plansearch as plan_search
    from specserver_advisor.cli import plansearchtext as plan_search_render

    if planned.spec is not None and planned.spec.mode == Mode.DISABLED:
        raise UsageError(
            "--search-shape: spec.mode is Disabled, so the engine runs without speculation; "
            "set mode Auto or Enabled to search its shape"
        )
    if planned.plan is None or planned.configs is None or not planned.plan.resolution.speculative:
        why = verdict(planned).line if planned.plan is None else "it does not speculate"
        raise UsageError(f"--search-shape needs a speculative launch the advisor can plan: {why}")
    if a.plot is not None:
        raise UsageError("--search-shape draws no plot; drop --plot")
    result = plan_search.search(
        planned, planned.flags, planned.configs, plan_options(a, planned.spec)
    )
    if a.format == "json":
        text = json.dumps(strict_json(plan_search_json(planned, result)), indent=2)
    else:
        text = "\n".join(plan_search_render.render(result, planned))
    write_stdout(text)
    return 0 if result.choice_plan is not None else 1


def plan_search_json(planned: Planned, result: Any) -> dict[str, Any]:
    v = verdict(planned)
    data: dict[str, Any] = {"verdict": {"starts": v.starts, "message": v.line}}
    data["search"] = result.to_json()
    return data


def strict_json(data: Any) -> Any:
    """``data`` with every non-finite float written as text ("nan", "inf"): a value the user
    gave (``--mem-fraction-static=nan``) is echoed, and the output stays valid JSON."""
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, dict):
        return {k: strict_json(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [strict_json(v) for v in data]
    return data


def json_output(
    planned: Planned, v: Verdict, fixed: tuple[list[str], Planned] | None
) -> dict[str, Any]:
    """``--format json``: a launch that will not start has no curves and no crossover; its
    ``at_fix`` is the plan with the fix set (null when no flag change fixes it)."""
    data: dict[str, Any] = planned.plan.to_json() if planned.plan else {}
    data["verdict"] = {"starts": v.starts, "message": v.line}
    if planned.plan is not None and v.starts:
        data["switch_spare_gpus"] = switch_spare(planned)
    data["argv"] = mask_argv(with_changes(planned.argv, v.changes))
    data["flags"] = mask_values(planned.flags)
    if not v.starts:
        data["argv"] = mask_argv(planned.argv)
        if planned.plan is not None:
            data["curves"] = []
            data["crossover_concurrency"] = None
        data["at_fix"] = None
        if fixed is not None:
            fix, plan = fixed
            data["at_fix"] = {"changes": fix, **json_output(plan, verdict(plan), None)}
    return data


def _plot(path: Path, planned: Planned) -> None:
    from specserver_advisor.cli import planplot as plan_plot

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
