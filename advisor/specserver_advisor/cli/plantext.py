"""``plan`` as text: the verdict first, then copyable flags, a SpecServer snippet, the table.

Pure: a ``Planned`` in, lines out. The verdict is one line: ``won't start: ...`` with what to
change, or ``starts; set ...`` with the flags to add. Advice never asks for a mem-fraction above
what a card can give: a model whose weights do not fit is told the GPUs or quantization it needs,
and how many nodes of the card's usual server hold them (``plannodes``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.cli.planfrom import Planned
from specserver_advisor.cli.plannodes import layout, layout_notes, node_advice
from specserver_advisor.gpus import Gpu
from specserver_advisor.launch.multinode import effective_policy
from specserver_advisor.launch.secrets import mask_argv, mask_env
from specserver_advisor.launch.tospec import shape_fields, snippet_lines, spec_of_launch
from specserver_advisor.models import AutoSpeculation, SpecServerSpec
from specserver_advisor.perf.plan import Plan, weight_bytes_per_node
from specserver_advisor.policy.model import PolicyContext, accept_floor
from specserver_advisor.policy.switchcost import restart_seconds, spare_gpus, switch_deadline_s
from specserver_advisor.sglang.memfraction import (
    CEILING,
    choose_fraction,
    fraction_for_tokens,
    gpus_needed,
)

#: Where predicted output tok/s with speculation falls below without it (the table's gain < 1).
THROUGHPUT_CROSSOVER = "throughput crossover (out tok/s on = off)"
#: Where the Auto policy's score (throughput discounted past the TTFT P99 SLO) crosses: the
#: load above which the operator switches speculation off. Not the same number.
POLICY_CROSSOVER = "policy score crossover (Auto turns speculation off above)"


@dataclass
class Verdict:
    """Whether the launch starts, the line that says so, and the flags to set."""

    starts: bool
    line: str
    changes: list[str] = field(default_factory=list)


def verdict(p: Planned) -> Verdict:
    """The answer: won't start (why, what to change), or the flags to set."""
    if p.refused:
        return Verdict(False, f"won't start: {p.refused}")
    plan = p.plan
    assert plan is not None
    r = plan.resolution
    if r.errors:
        err = r.errors[0]
        return Verdict(False, f"won't start: SGLang raises {err.exception}: {err.message}")
    if r.reserved_tokens_error:
        return Verdict(
            False,
            f"won't start: SGLang raises TypeError when its tokenizer manager starts "
            f"({r.reserved_tokens_error}): with --speculative-eagle-topk "
            f"{r.get('speculative_eagle_topk')} set --speculative-num-draft-tokens",
        )
    if plan.context.verdict.value == "startup_fails":
        return Verdict(False, f"won't start: {plan.context.message}", _context_fix(plan))
    pool = (
        plan.mem.kv_pool_tokens_with_draft
        if r.speculative
        else plan.mem.kv_pool_tokens_without_draft
    )
    if pool <= 0 or (r.speculative and plan.fits_on < 1) or plan.fits_off < 1:
        return _no_memory(plan, p.gpu)
    changes: list[str] = []
    for name in shape_fields(r.algorithm):
        value = r.values.get(name)
        if r.speculative and value is not None and value.source in ("auto", "derived"):
            changes += [f"--{name.replace('_', '-')}", str(value.value)]
    user_cap = r.values.get("max_running_requests")
    given = user_cap.value if user_cap is not None and user_cap.source == "user" else None
    fits = plan.fits_on if r.speculative else plan.fits_off
    if given is None or given > fits:
        changes += ["--max-running-requests", str(plan.recommended_mrr)]
    if not changes:
        return Verdict(True, "starts as given; nothing to change")
    return Verdict(True, "starts; set " + " ".join(changes), changes)


def _context_fix(plan: Plan) -> list[str]:
    """The ``--context-length`` SGLang starts with: the shorter model's derived context."""
    c = plan.context
    limit = c.draft if c.failing_model == "draft" else c.target
    if limit is None or limit < 1:
        return []
    return ["--context-length", str(limit)]


def _request_tokens(plan: Plan) -> int:
    """KV tokens one request holds at its longest (prompt, output, reserved, draft slots)."""
    r, scn = plan.resolution, plan.scenario
    request = scn.input_len + scn.output_len + r.reserved_tokens
    return request + (2 * r.draft_slots if r.speculative else 0)


def _nodes_needed(plan: Plan | None, gpu: Gpu) -> str:
    """``; 16 GPUs are 2 nodes of 8 x H100: set ...`` for weights that do not fit under
    ``CEILING`` on the GPUs given (empty when they do, or nothing was planned)."""
    if plan is None:
        return ""
    with_draft = plan.resolution.speculative and plan.mem.draft_weight_gib > 0
    if fraction_for_tokens(plan.mem, _request_tokens(plan), with_draft) <= CEILING:
        return ""
    need = gpus_needed(plan.mem, _request_tokens(plan), with_draft, plan.scenario.tp_size)
    return f"; {need} GPUs are {node_advice(need, gpu)}"


def _no_memory(plan: Plan, gpu: Gpu) -> Verdict:
    """No KV cache: the operator's fraction (``memfraction.choose_fraction``), or the GPUs
    and the nodes that hold them."""
    r, scn = plan.resolution, plan.scenario
    cap = r.values.get("max_running_requests")
    given = cap.value if cap is not None and cap.source == "user" else None
    choice = choose_fraction(
        plan.mem,
        request_tokens=_request_tokens(plan),
        planned_requests=int(given or plan.mem.settings.cuda_graph_max_bs),
        with_draft=r.speculative and plan.mem.draft_weight_gib > 0,
        gpus=scn.tp_size,
        gpu_name=gpu.name,
    )
    if choice.fraction is None:
        return Verdict(False, f"won't start: {choice.message}{_nodes_needed(plan, gpu)}")
    return Verdict(
        False,
        f"won't start: no KV cache under --mem-fraction-static "
        f"{plan.mem.settings.mem_fraction_static}; set --mem-fraction-static {choice.fraction}",
        ["--mem-fraction-static", str(choice.fraction)],
    )


def with_changes(argv: list[str], changes: list[str]) -> list[str]:
    """``argv`` with the verdict's flags set (replacing the same flags)."""
    out = list(argv)
    for k in range(0, len(changes), 2):
        flag, value = changes[k], changes[k + 1]
        written = [i for i, t in enumerate(out) if t.startswith(f"{flag}=")]
        if flag in out:
            out[out.index(flag) + 1] = value
        elif written:  # --flag=value
            out[written[0]] = f"{flag}={value}"
        else:
            out += [flag, value]
    return out


def flags_block(argv: list[str]) -> list[str]:
    """The launch as a copyable command, one flag per line (credentials masked)."""
    lines = ["python -m sglang.launch_server \\"]
    argv = mask_argv(argv)
    k = 0
    items: list[str] = []
    while k < len(argv):
        token = argv[k]
        if token.startswith("--") and k + 1 < len(argv) and not argv[k + 1].startswith("--"):
            items.append(f"{token} {shlex.quote(argv[k + 1])}")
            k += 2
        else:
            items.append(shlex.quote(token))
            k += 1
    lines += [f"    {item} \\" for item in items[:-1]] + [f"    {items[-1]}"] if items else []
    return lines


def specserver_snippet(
    argv: list[str], plan: Plan, gpu: Gpu, env: dict[str, str] | None = None
) -> list[str]:
    """The SpecServer ``spec`` that renders this launch (``launch.tospec``: read as SGLang
    parses it; no credential's value; in mode Auto no cap binding both engines), and what it
    leaves out, as comments."""
    return snippet_lines(spec_of_launch(argv, dict(env or {}), plan, gpu.name))


def table(plan: Plan) -> list[str]:
    """The predicted curves with units in the headers."""
    head = (
        f"{'concurrency':>11} | {'out tok/s on':>12} {'off':>8} | {'TPOT on ms':>10} {'off':>7} |"
        f" {'TTFT p99 on ms':>14} {'off':>8} | {'ITL p99 on ms':>13} {'off':>7} | {'gain x':>6}"
    )
    lines = [head, "-" * len(head)]

    def cell(point: dict[str, float] | None, key: str, width: int, digits: int) -> str:
        return f"{point[key]:>{width}.{digits}f}" if point else f"{'-':>{width}}"

    for pt in plan.curves:
        on, off = pt["on"], pt["off"]
        gain = on["output_tok_s"] / off["output_tok_s"] if on and off["output_tok_s"] else None
        lines.append(
            f"{pt['concurrency']:>11} | {cell(on, 'output_tok_s', 12, 1)}"
            f" {cell(off, 'output_tok_s', 8, 1)}"
            f" | {cell(on, 'tpot_ms', 10, 1)} {cell(off, 'tpot_ms', 7, 1)}"
            f" | {cell(on, 'ttft_p99_ms', 14, 0)} {cell(off, 'ttft_p99_ms', 8, 0)}"
            f" | {cell(on, 'itl_p99_ms', 13, 1)} {cell(off, 'itl_p99_ms', 7, 1)}"
            f" | {f'{gain:.2f}' if gain is not None else '-':>6}"
        )
    return lines


def render(p: Planned, at_fix: tuple[list[str], Planned] | None = None) -> str:
    """The whole text output. A launch that will not start shows its verdict, the flags as
    given and why, never predictions; ``at_fix`` (the fix and the same launch planned with
    it set, by the caller) follows, labelled as the plan at the fix."""
    v = verdict(p)
    lines = [v.line]
    if p.plan is None:
        return "\n".join(lines)
    if not v.starts:
        lines += ["", "# flags as given (they do not start)", *flags_block(p.argv)]
        lines += [*_environment(p), "", *_sizes(p.plan)]
        if p.plan.mem.error:  # why there is no KV cache, in SGLang's words
            lines.append(f"note: {p.plan.mem.error}")
        if at_fix is None or at_fix[1].plan is None:
            lines += [
                "",
                "no predictions: the launch does not start, and no plan at a fix: "
                "the verdict names no flag value that makes it start",
            ]
            return "\n".join(lines)
        fix, fixed = at_fix
        fv = verdict(fixed)
        lines += [
            "",
            f"# plan at the fix ({' '.join(fix)}): the launch with those flags set",
            f"at the fix: {fv.line}",
            *_body(fixed, fv),
        ]
        return "\n".join(lines)
    return "\n".join(lines + _body(p, v))


def _environment(p: Planned) -> list[str]:
    """The launch's environment (credentials masked)."""
    if not p.env:
        return []
    env = mask_env(p.env)
    return [
        "# environment: " + " ".join(f"{shlex.quote(k)}={shlex.quote(x)}" for k, x in env.items())
    ]


def _sizes(plan: Plan) -> list[str]:
    """Memory, KV pool and context lines (with the context's warnings)."""
    j = plan.to_json()
    mem, pool, c = j["memory"], j["kv_pool_tokens"], j["context"]
    lines = [
        f"memory on {layout(plan.scenario.tp_size, plan.scenario.nnodes, plan.scenario.gpu)}: "
        f"mem-fraction-static {mem['mem_fraction_static']} ({mem['mem_fraction_static_source']}),"
        f" weights {mem['target_weights_gib']} GiB + draft {mem['draft_weights_gib']} GiB per GPU",
        f"KV pool: {pool['without_draft']} tokens without the draft, {pool['with_draft']} with it;"
        f" {plan.fits_on if plan.resolution.speculative else plan.fits_off} requests of "
        f"{plan.scenario.input_len}{' (mean prompt)' if plan.scenario.prompt_mix else ''}"
        f"+{plan.scenario.output_len} tokens fit",
        f"context: {c['verdict']}: {c['message']}",
    ]
    return lines + [f"  warning: {w}" for w in c["warnings"]]


def _body(p: Planned, v: Verdict) -> list[str]:
    """Everything after the verdict line of a launch that starts."""
    plan = p.plan
    assert plan is not None
    argv = with_changes(p.argv, v.changes)
    lines = ["", "# flags", *flags_block(argv), *_environment(p)]
    lines += ["", "# SpecServer", *specserver_snippet(argv, plan, p.gpu, p.env)]
    lines += ["", *_sizes(plan), "", *table(plan)]
    cross = plan.crossover_concurrency
    lines += [
        "",
        f"{THROUGHPUT_CROSSOVER}: {f'{cross:.1f} users' if cross is not None else 'none in range'}",
    ]
    if p.policy is not None and p.spec is not None:
        lines.append(auto_line(p.policy, p.spec))
    lines.append(spare_line(switch_spare(p)))
    lines += [f"note: {n}" for n in plan.notes]
    scn = plan.scenario
    lines += [f"note: {n}" for n in layout_notes(scn.tp_size, scn.nnodes, scn.gpu)]
    return lines


def auto_line(ctx: PolicyContext, spec: SpecServerSpec) -> str:
    """What the operator's policy starts from for this SpecServer: the crossover at the prior
    accept length, or why there is none (``plan_auto``), and the accept-length floor."""
    from specserver_advisor.perf.autocontext import crossover_at_prior, no_crossover_reason

    policy = spec.auto_speculation or AutoSpeculation()
    floor = accept_floor(policy, ctx)
    cross = crossover_at_prior(ctx)
    reason = no_crossover_reason(ctx, spec)
    where = f"{cross:.0f} users" if reason is None else f"none: {reason}"
    return (
        f"{POLICY_CROSSOVER} at the accept length {ctx.prior_accept:g}: {where}; mode Auto "
        f"also switches speculation off when the accept length falls below {floor:g}"
    )


def switch_spare(p: Planned) -> dict[str, Any]:
    """The spare GPUs a speculation switch of this shape needs, per ``switchStrategy``
    (``switchcost.spare_gpus``), and the deadline a switch that never gets them waits
    (``switchcost.switch_deadline_s`` of the modelled start-up). A plain launch is one replica;
    a SpecServer has its replicas, nodes, strategy and RollingUpdate surge."""
    plan = p.plan
    assert plan is not None
    scn = plan.scenario
    spec = p.spec
    policy = effective_policy(spec) if spec is not None else AutoSpeculation()
    replicas = spec.replicas if spec is not None else 1
    nodes = max(1, scn.nnodes)
    surge = 1 if policy.max_surge is None else policy.max_surge
    startup = restart_seconds(weight_bytes_per_node(plan), nodes)
    ctx = PolicyContext([], 1.0, 1.0, restart_s=startup)
    needs = spare_gpus(replicas, scn.tp_size, nodes, surge)
    return {
        "replicas": replicas,
        "gpus_per_replica": scn.tp_size,
        "nodes_per_replica": nodes,
        "gpu": scn.gpu.name,
        "switch_strategy": str(policy.switch_strategy) if spec is not None else None,
        "max_surge": surge,
        "startup_s": round(startup),
        "deadline_s": round(switch_deadline_s(policy, ctx)),
        "strategies": {
            str(k): {"gpus": n.gpus, "nodes": n.nodes, "keeps_serving": n.keeps_serving}
            for k, n in needs.items()
        },
    }


def spare_line(spare: dict[str, Any]) -> str:
    """One line: the spare GPUs a switch needs per strategy, and what happens without them."""
    gpu, shapes = spare["gpu"], spare["strategies"]

    def need(name: str) -> str:
        n = shapes[name]
        if not n["gpus"]:
            return "none"
        on_nodes = f" on {n['nodes']} whole nodes" if n["nodes"] else ""
        return f"{n['gpus']} x {gpu}{on_nodes}"

    chosen = spare["switch_strategy"]
    mark = f" (this SpecServer: {chosen})" if chosen else ""
    surge = "maxSurge 1" if spare["max_surge"] else "maxSurge 0: restarts in place, with downtime"
    return (
        f"spare GPUs a speculation switch needs{mark}, for {spare['replicas']} replica(s) of "
        f"{spare['gpus_per_replica']} GPU(s): BlueGreen {need('BlueGreen')}, RollingUpdate "
        f"{need('RollingUpdate')} ({surge}), Recreate none (down ~{spare['startup_s']}s "
        f"instead); without them the new engine stays Pending until the deadline "
        f"(~{spare['deadline_s']}s), then the switch is cancelled or falls back to Recreate "
        "(autoSpeculation.blockedSwitchFallback)"
    )
