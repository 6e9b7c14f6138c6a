"""``specserver-advisor``: plan a speculative launch and calibrate the performance model.

Parses arguments, calls the loaders (the only I/O) and the pure planner, and renders text or
JSON. Exit codes: 0 ok, 1 the plan predicts a startup failure, 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from specserver_advisor import SGLANG_VERSION, __version__, policy_commands
from specserver_advisor.errors import UsageError
from specserver_advisor.gpus import GPUS, UnknownGpuError, lookup_gpu
from specserver_advisor.lint import command as lint_command
from specserver_advisor.loaders.configs import (
    ConfigNotFoundError,
    ConfigUnreadableError,
    LoadedConfig,
    load_config,
)
from specserver_advisor.modelshape import ConfigShapeError
from specserver_advisor.perfmodel import DEFAULT_CALIBRATION
from specserver_advisor.plan import Plan, plan_for_configs
from specserver_advisor.sglang.flags import parse_server_argv


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected integers like 1,8,32, got {text!r}") from exc
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("concurrency values must be positive integers")
    return values


def _add_plan_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="resolve, size and predict one speculative launch")
    p.add_argument("--model", required=True, help="model directory, HF cache dir, or repo id")
    p.add_argument("--model-revision")
    p.add_argument("--draft", help="draft directory or repo id (omit for NGRAM / MTP targets)")
    p.add_argument("--draft-revision")
    p.add_argument("--gpu", required=True, help=f"GPU type: {', '.join(GPUS)}")
    p.add_argument("--gpus", type=int, default=1, help="tensor-parallel GPUs per replica")
    p.add_argument(
        "--algorithm",
        default=None,
        help="speculative algorithm (default EAGLE3 with --draft, else NEXTN)",
    )
    p.add_argument("--steps", type=int)
    p.add_argument("--topk", type=int)
    p.add_argument("--draft-tokens", type=int)
    p.add_argument("--accept-length", type=float, help="measured mean accept length")
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=128)
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


def _server_argv(a: argparse.Namespace, draft: LoadedConfig | None) -> list[str]:
    algo = a.algorithm or ("EAGLE3" if a.draft else "NEXTN")
    argv = ["--model-path", a.model, "--speculative-algorithm", algo, "--tp-size", str(a.gpus)]
    pairs = [
        ("--speculative-draft-model-path", a.draft),
        ("--revision", a.model_revision),
        ("--speculative-draft-model-revision", a.draft_revision),
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


def run_plan(a: argparse.Namespace) -> Plan:
    """Load configs and plan (raises UsageError on bad input)."""
    try:
        gpu = lookup_gpu(a.gpu)
        env = {}
        for item in a.env:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise UsageError(f"--env expects NAME=VALUE, got {item!r}")
            env[name] = value
        base_env = dict(os.environ)
        target = load_config(a.model, a.model_revision, base_env, a.hf_endpoint)
        draft = load_config(a.draft, a.draft_revision, base_env, a.hf_endpoint) if a.draft else None
        parsed = parse_server_argv(_server_argv(a, draft))
        if parsed.issues:
            raise UsageError(parsed.issues[0].message)
        return plan_for_configs(
            parsed.values,
            target,
            draft,
            gpu,
            env=env,
            accept_length=a.accept_length,
            input_len=a.input_len,
            output_len=a.output_len,
            concurrency=a.concurrency,
        )
    except UnknownGpuError as exc:
        raise UsageError(str(exc)) from exc
    except (ConfigNotFoundError, ConfigUnreadableError, ConfigShapeError) as exc:
        raise UsageError(str(exc)) from exc


def render_plan_text(plan: Plan) -> str:
    """Human-readable plan."""
    j = plan.to_json()
    r, c, m = j["resolved"], j["context"], j["max_running_requests"]
    lines = [
        f"algorithm {r['algorithm']}  shape (steps {r['num_steps']}, topk {r['eagle_topk']}, "
        f"draft tokens {r['num_draft_tokens']})  accept length {r['accept_length']}",
    ]
    for err in r["errors"]:
        lines.append(f"STARTUP FAILS ({err['exception']}): {err['message']}")
    lines.append(
        f"context: {c['verdict']}: {c['message']} "
        f"(usable prompt {c['usable_prompt_tokens']} tokens)"
    )
    lines.extend(f"  warning: {w}" for w in c["warnings"])
    mem = j["memory"]
    lines.append(
        f"memory on {mem['gpu']}: mem-fraction-static {mem['mem_fraction_static']} "
        f"({mem['mem_fraction_static_source']}), weights {mem['target_weights_gib']} GiB"
        f" + draft {mem['draft_weights_gib']} GiB"
    )
    pool = j["kv_pool_tokens"]
    lines.append(
        f"KV pool: {pool['without_draft']} tokens without draft, {pool['with_draft']} with draft"
    )
    lines.append(
        f"max-running-requests: SGLang would run {m['sglang_default']}, "
        f"{m['fits']} requests fit, recommended {m['recommended']}"
    )
    lines.append("")
    lines.append(
        f"{'conc':>5} | {'TPOT on':>8} {'off':>8} | {'TTFT on':>9} {'off':>9} | "
        f"{'tok/s on':>9} {'off':>9} | gain"
    )
    for pt in j["curves"]:
        on, off = pt["on"] or {}, pt["off"]
        gain = on.get("output_tok_s", 0) / off["output_tok_s"] if off["output_tok_s"] else 0
        lines.append(
            f"{pt['concurrency']:>5} | {on.get('tpot_ms', 0):>8.1f} {off['tpot_ms']:>8.1f}"
            f" | {on.get('ttft_ms', 0):>9.0f} {off['ttft_ms']:>9.0f} | "
            f"{on.get('output_tok_s', 0):>9.1f} {off['output_tok_s']:>9.1f} | "
            f"{gain:.2f}x"
        )
    cross = j["crossover_concurrency"]
    lines.append("")
    lines.append(f"crossover concurrency: {cross if cross is not None else 'none in range'}")
    lines.extend(f"note: {n}" for n in r["notes"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``specserver-advisor``."""
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
    _add_plan_parser(sub)
    policy_commands.add_parsers(sub)
    lint_command.add_parsers(sub)
    cal = sub.add_parser("calibrate", help="print the performance model against field figures")
    cal.add_argument("--fit", action="store_true", help="rerun the fit and print the constants")
    cal.add_argument(
        "--leave-one-out",
        action="store_true",
        help="refit without each fitted figure and print its out-of-sample error",
    )
    a = parser.parse_args(argv)
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
            plan = run_plan(a)
            if a.format == "json":
                print(json.dumps(plan.to_json(), indent=2))
            else:
                print(render_plan_text(plan))
            return (
                1
                if plan.resolution.errors
                or plan.context.verdict.value == "startup_fails"
                or plan.mem.error
                else 0
            )
        from specserver_advisor import calibration

        constants = calibration.fit() if a.fit else DEFAULT_CALIBRATION
        if a.fit:
            print(f"fitted: {constants}")
        print(calibration.report(constants))
        if a.leave_one_out:
            print()
            print(calibration.report_leave_one_out())
        return 0
    except UsageError as exc:
        print(f"specserver-advisor: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
