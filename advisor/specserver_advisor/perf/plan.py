"""``plan``: resolution + context + memory + performance for one launch on one GPU type.

Pure: takes parsed flags, env and HF configs (loaded by ``loaders``), returns a ``Plan`` whose
``to_json()`` is the documented output of ``specserver-advisor plan``. Also used by the operator
to compute ``--max-running-requests`` and by the engine simulator for its timing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.gpus import Gpu
from specserver_advisor.models import AutoSpeculation
from specserver_advisor.perf.acceptcontext import accept_over_mix
from specserver_advisor.perf.allreduceflags import custom_allreduce_flagged_off, nccl_note
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION, Calibration
from specserver_advisor.perf.model import (
    Prediction,
    Scenario,
    SpecShape,
    break_even_accept_length,
    crossover,
    falls_through,
    load_points,
    plain_scenario,
    predict,
    prompt_lengths,
    throughput,
)
from specserver_advisor.perf.treeaccept import tree_accept
from specserver_advisor.perf.unmodelled import Unmodelled, unmodelled
from specserver_advisor.policy.model import PolicyContext, score
from specserver_advisor.policy.switchcost import group_restart_extra_s, restart_seconds
from specserver_advisor.sglang import memory
from specserver_advisor.sglang.cardchecks import card_startup_errors
from specserver_advisor.sglang.context import ContextCheck, check_context
from specserver_advisor.sglang.modelshape import (
    ModelShape,
    mtp_draft_forward_bytes,
    mtp_draft_shape,
    shape_from_config,
    with_launch_dtype,
)
from specserver_advisor.sglang.overrides import OverrideArgsError, effective_configs
from specserver_advisor.sglang.resolve import Resolution, resolve_launch
from specserver_advisor.sglang.resolve_model_hooks import model_max_running_requests
from specserver_advisor.sglang.speculative_tables import MTP_TARGETS, RESET_MESSAGE

#: Prior per-position acceptance (probability the next draft token is kept, given the previous
#: was) by algorithm, for plans without a measured accept length. The operator learns the real
#: value from ``sglang:spec_accept_length``.
ACCEPT_PRIOR = {
    "EAGLE3": 0.75,
    "EAGLE": 0.8,
    "FROZEN_KV_MTP": 0.8,
    "STANDALONE": 0.7,
    "NGRAM": 0.35,
    "DFLASH": 0.7,
    "DSPARK": 0.7,
    "UNO": 0.6,
}
DEFAULT_CONCURRENCY = [1, 2, 4, 8, 16, 32, 64]
#: Steps and tree width past which the prior no longer changes (it has converged long before).
MAX_PRIOR_STEPS = MAX_PRIOR_WIDTH = 2**40


def prior_accept_length(
    algorithm: str | None, steps: int, topk: int, draft_tokens: int | None = None
) -> float:
    """Expected accept length (incl. bonus token) of a chain/tree of ``steps`` draft steps of
    width ``topk`` over ``draft_tokens`` verified positions (``treeaccept.tree_accept``)."""
    if not algorithm:
        return 1.0
    q = ACCEPT_PRIOR.get(algorithm, 0.6)
    steps = max(0, min(steps, MAX_PRIOR_STEPS))
    return tree_accept(q, steps, min(max(1, topk), MAX_PRIOR_WIDTH), draft_tokens)


@dataclass
class PlanInputs:
    """Everything ``make_plan`` needs; configs are plain dicts."""

    args: dict[str, Any]
    target_config: dict[str, Any]
    draft_config: dict[str, Any] | None
    gpu: Gpu
    env: dict[str, str] = field(default_factory=dict)
    target_weight_bytes: int | None = None
    draft_weight_bytes: int | None = None
    accept_length: float | None = None
    input_len: int = 512
    output_len: int = 128
    concurrency: list[int] = field(default_factory=lambda: list(DEFAULT_CONCURRENCY))
    clock_scale: float = 1.0
    #: Varied prompt lengths as (tokens, share of requests); replaces ``input_len`` (which
    #: becomes their mean) and makes arrivals staggered. Empty: every prompt is ``input_len``.
    prompt_mix: tuple[tuple[int, float], ...] = ()
    #: Score every candidate cap over the loads for ``recommended_mrr`` (``best_cap``). Off,
    #: the recommendation is the largest safe cap (``safe_cap``) unscored: ``plan
    #: --search-shape`` reads only the curves of the shapes it does not choose, and plans its
    #: choice again with it on.
    recommend_cap: bool = True


@dataclass
class Plan:
    """The result of planning."""

    resolution: Resolution
    context: ContextCheck
    mem: memory.MemoryPlan
    accept_length: float
    sglang_default_mrr: int
    fits_on: int
    fits_off: int
    recommended_mrr: int
    curves: list[dict[str, Any]]
    crossover_concurrency: float | None
    notes: list[str]
    scenario: Scenario
    cap_on: int
    cap_off: int
    #: What the curves do not price (``perf.unmodelled``): also among ``notes``.
    not_modelled: list[Unmodelled] = field(default_factory=list)

    @property
    def decode_graph_limit(self) -> int | None:
        """The largest decode batch SGLang captures a CUDA graph for (the memory tier's), or
        None where the launch turns the decode graphs off: every batch then decodes eagerly,
        and no cap keeps a batch inside a graph."""
        return decode_graph_limit(self.scenario, self.mem)

    def to_json(self) -> dict[str, Any]:
        r = self.resolution
        resolved = {name: v.value for name, v in r.values.items()}
        resolved.update(
            {
                "algorithm": r.algorithm,
                "num_steps": r.get("speculative_num_steps"),
                "eagle_topk": r.get("speculative_eagle_topk"),
                "num_draft_tokens": r.get("speculative_num_draft_tokens"),
                "max_running_requests": r.get("max_running_requests"),
                "mem_fraction_static": self.mem.settings.mem_fraction_static,
                "accept_length": self.accept_length,
                "sources": {
                    n: {"source": v.source, "reason": v.reason} for n, v in r.values.items()
                },
                "errors": [{"exception": e.exception, "message": e.message} for e in r.errors],
                "warnings": list(r.warnings),
                "notes": self.notes,
            }
        )
        return {
            "resolved": resolved,
            "context": {
                "target": self.context.target,
                "draft": self.context.draft,
                "effective": self.context.effective,
                "verdict": self.context.verdict.value,
                "message": self.context.message,
                "usable_prompt_tokens": self.context.usable_prompt_tokens,
                "warnings": self.context.warnings,
            },
            "kv_pool_tokens": {
                "without_draft": self.mem.kv_pool_tokens_without_draft,
                "with_draft": self.mem.kv_pool_tokens_with_draft,
            },
            "memory": {
                "gpu": self.scenario.gpu.name,
                "mem_fraction_static": self.mem.settings.mem_fraction_static,
                "mem_fraction_static_source": self.mem.settings.source,
                "target_weights_gib": round(self.mem.target_weight_gib, 2),
                "draft_weights_gib": round(self.mem.draft_weight_gib, 2),
                "kv_bytes_per_token": self.mem.cell_bytes_target,
                "kv_bytes_per_token_with_draft": self.mem.cell_bytes_with_draft,
                "error": self.mem.error,
            },
            "max_running_requests": {
                "sglang_default": self.sglang_default_mrr,
                "fits": self.fits_on,
                "fits_without_draft": self.fits_off,
                "recommended": self.recommended_mrr,
            },
            "workload": {
                "input_len": self.scenario.input_len,
                "output_len": self.scenario.output_len,
                "prompt_len": [
                    {"tokens": tokens, "share": round(share, 4)}
                    for tokens, share in prompt_lengths(self.scenario)
                ],
                "staggered": self.scenario.staggered,
            },
            "curves": self.curves,
            "crossover_concurrency": (
                None if self.crossover_concurrency is None else round(self.crossover_concurrency, 1)
            ),
            "not_modelled": [u.to_json() for u in self.not_modelled],
        }


def _draft_shape(
    inp: PlanInputs, target: ModelShape, r: Resolution
) -> tuple[ModelShape | None, int, bool]:
    """(draft shape, draft weight bytes, is MTP) for algorithms with a draft model."""
    algo = r.algorithm
    if algo is None or algo in ("NGRAM", "UNO"):
        return None, 0, False
    mtp = target.architecture in MTP_TARGETS and (
        inp.draft_config is None or r.values["speculative_draft_model_path"].source == "derived"
    )
    if mtp:
        # Its nextn decoder layers (what it loads) on the target's shared embedding and head.
        return mtp_draft_shape(target), memory.draft_weight_bytes_mtp(target), True
    if inp.draft_config is None:
        return None, 0, False
    on_disk = shape_from_config(inp.draft_config)
    draft = with_launch_dtype(on_disk, inp.args.get("dtype"))
    weight = _loaded_bytes(inp.draft_weight_bytes, on_disk, draft)
    return draft, weight or memory.draft_weight_bytes_separate(draft), False


def _loaded_bytes(checkpoint: int | None, on_disk: ModelShape, loaded: ModelShape) -> int | None:
    """A checkpoint's size once loaded in the launch's dtype (a float32 file runs in 2 bytes)."""
    if checkpoint is None:
        return None
    return checkpoint * loaded.dtype_bytes // on_disk.dtype_bytes


class PlanInputError(ValueError):
    """A launch flag the plan computes with has a value no launch has (``flag_value_problem``);
    the message names the flag."""


#: The integer flags the plan sizes memory and time with (parsed names).
PLANNED_INTEGER_FLAGS = (
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_dp_size",
    "ep_size",
    "page_size",
    "context_length",
    "max_running_requests",
    "max_total_tokens",
    "max_prefill_tokens",
    "chunked_prefill_size",
    "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode",
    "cuda_graph_max_bs_prefill",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
)
#: Larger than any real launch's value; past 2**1024 the plan's float maths overflows.
MAX_FLAG_INTEGER = 2**40


def flag_value_problem(args: dict[str, Any]) -> str | None:
    """Why a flag in ``PLANNED_INTEGER_FLAGS`` cannot be planned (its magnitude is past
    ``MAX_FLAG_INTEGER``), naming it as SGLang spells it; None when all can."""
    for key in PLANNED_INTEGER_FLAGS:
        value = args.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FLAG_INTEGER:
            text = str(value)
            shown = text if len(text) <= 24 else f"{text[:12]}... ({len(text)} digits)"
            return f"--{key.replace('_', '-')}={shown}: out of range (at most 2**40)"
    return None


def _with_model_overrides(inp: PlanInputs) -> PlanInputs:
    """The inputs with ``--json-model-override-args`` applied to target and draft, as SGLang
    applies it before the shape, the context and the memory are derived (``sglang.overrides``).
    A value SGLang cannot apply leaves them as given: the resolution carries SGLang's error
    (the launch does not start)."""
    try:
        target, draft = effective_configs(inp.args, inp.target_config, inp.draft_config)
    except OverrideArgsError:
        return inp
    if target is inp.target_config and draft is inp.draft_config:
        return inp
    return dataclasses.replace(inp, target_config=target or inp.target_config, draft_config=draft)


def _unset_cap_note(r: Resolution, effective: int) -> str:
    """What SGLang does with an unset ``--max-running-requests`` for this launch."""
    unset = r.values.get("max_running_requests")
    if unset is not None and unset.value is not None:
        how = (
            f"resets it to {unset.value}"
            if unset.reason == RESET_MESSAGE
            else f"sets it to {unset.value} ({unset.reason})"
        )
        return (
            f"--max-running-requests unset: SGLang {how} (effective {effective} after the KV cap)"
        )
    return (
        f"--max-running-requests unset: {r.algorithm} does not reset it; SGLang sizes it "
        f"from the KV pool (effective {effective})"
    )


def make_plan(inp: PlanInputs, cal: Calibration = DEFAULT_CALIBRATION) -> Plan:
    """Resolve, check context, size memory and predict curves for one launch.

    Raises:
        PlanInputError: a flag the plan computes with is out of range (``flag_value_problem``).
    """
    problem = flag_value_problem(inp.args)
    if problem is not None:
        raise PlanInputError(problem)
    r = resolve_launch(inp.args, inp.target_config, inp.draft_config, hip=inp.gpu.rocm)
    r.errors[:0] = card_startup_errors(inp.args, inp.target_config, inp.gpu)
    inp = _with_model_overrides(inp)
    on_disk = shape_from_config(inp.target_config)
    target = with_launch_dtype(on_disk, inp.args.get("dtype"))
    t_weight = _loaded_bytes(inp.target_weight_bytes, on_disk, target) or target.weight_bytes()
    draft, d_weight, mtp = _draft_shape(inp, target, r)
    tp = int(inp.args.get("tp_size") or 1)
    ctx = check_context(
        inp.target_config,
        inp.draft_config if not mtp else None,
        inp.args.get("context_length"),
        inp.env,
        r.reserved_tokens,
    )
    mem = memory.plan_memory(
        inp.gpu,
        target,
        t_weight,
        draft,
        d_weight,
        r.algorithm,
        tp_size=tp,
        kv_cache_dtype=inp.args.get("kv_cache_dtype"),
        draft_kv_cache_dtype=inp.args.get("speculative_draft_kv_cache_dtype"),
        mem_fraction_static=inp.args.get("mem_fraction_static"),
        draft_is_mtp=mtp,
        page_size=int(inp.args.get("page_size") or 1),
        settings=memory.settings_from_values(inp.gpu, inp.args, r.speculative, target.is_mla),
    )
    steps = int(r.get("speculative_num_steps") or 0)
    topk = int(r.get("speculative_eagle_topk") or 1)
    draft_tokens = r.get("speculative_num_draft_tokens")
    accept = inp.accept_length or prior_accept_length(
        r.algorithm, steps, topk, int(draft_tokens) if draft_tokens else None
    )
    notes: list[str] = []
    if inp.accept_length is None and r.algorithm:
        notes.append(
            f"accept length {accept} is a prior for {r.algorithm} ({steps},{topk}); "
            "pass --accept-length with a measured value"
        )
    # Past the draft's trained positions (its derived context) acceptance falls (acceptcontext).
    trained = ctx.draft if draft is not None and not mtp else None
    in_context = accept
    accept = accept_over_mix(
        accept, inp.prompt_mix or ((inp.input_len, 1.0),), inp.output_len, trained
    )
    if accept < in_context:
        notes.append(
            f"accept length {in_context} falls to {accept} on these prompts: they run past "
            f"the {trained} positions the draft was trained on"
        )
    pool_on, pool_off = mem.kv_pool_tokens_with_draft, mem.kv_pool_tokens_without_draft
    user_mrr = inp.args.get("max_running_requests")
    input_len = mean_prompt(inp.prompt_mix) if inp.prompt_mix else inp.input_len
    fits_on = memory.requests_that_fit(
        pool_on, input_len, inp.output_len, r.reserved_tokens, r.draft_slots
    )
    fits_off = memory.requests_that_fit(pool_off, input_len, inp.output_len)
    sglang_default = memory.sglang_max_running_requests(
        pool_on if r.speculative else pool_off, ctx.effective, r.get("max_running_requests")
    )
    cap_on = min(sglang_default, fits_on)
    # Without speculation a model hook's cap (DeepSeek-V4's 256) still applies.
    off_mrr = user_mrr if user_mrr is not None else model_max_running_requests(target.architecture)
    cap_off = min(memory.sglang_max_running_requests(pool_off, ctx.effective, off_mrr), fits_off)
    scn = Scenario(
        gpu=inp.gpu,
        target=target,
        target_weight_bytes=t_weight,
        kv_cell_bytes=mem.cell_bytes_target,
        draft=draft,
        # An MTP draft's forward also reads the target's head it shares (memory counts it once).
        draft_weight_bytes=mtp_draft_forward_bytes(target, d_weight) if mtp else d_weight,
        draft_kv_cell_bytes=mem.cell_bytes_with_draft - mem.cell_bytes_target,
        spec=SpecShape(
            r.algorithm or "", steps, topk, int(r.get("speculative_num_draft_tokens") or 1)
        )
        if r.algorithm
        else None,
        accept_length=accept,
        input_len=input_len,
        output_len=inp.output_len,
        tp_size=tp,
        nnodes=max(1, int(inp.args.get("nnodes") or 1)),
        custom_allreduce_disabled=custom_allreduce_flagged_off(
            inp.args, inp.gpu, target.architecture
        ),
        clock_scale=inp.clock_scale,
        cuda_graph_max_bs=captured_decode_batch(inp.args, mem),
        chunked_prefill_size=mem.settings.chunked_prefill_size,
        mixed_chunk=bool(r.get("enable_mixed_chunk")),
        # Overlap is SGLang's default, speculation included; the launch turns it off with the
        # flag, or the resolver forces it off (CPU device, pipeline parallelism).
        overlap_schedule=not r.get("disable_overlap_schedule"),
        # Varied prompt lengths: requests finish and arrive at different times.
        staggered=len(inp.prompt_mix) > 1,
        prompt_mix=inp.prompt_mix if len(inp.prompt_mix) > 1 else (),
    )
    curves = []
    both: list[tuple[int, float, float]] = []
    plain = plain_scenario(scn)
    for c in sorted(set(inp.concurrency)):
        on = predict(scn, c, cap_on, True, cal) if r.algorithm else None
        off = predict(plain, c, cap_off, False, cal)
        curves.append({"concurrency": c, "on": _point(on) if on else None, "off": _point(off)})
        if on is not None:
            both.append((c, throughput(on), throughput(off)))
    # ``crossover`` over the curves' own predictions (the same loads, the same throughput).
    cross = falls_through(both) if r.algorithm else None
    graph_bs = decode_graph_limit(scn, mem)
    candidates = cap_candidates(inp.concurrency, fits_on, graph_bs, sglang_default, cross)
    best = (
        best_cap(scn if r.speculative else plain, inp.concurrency, candidates, r.speculative, cal)
        if inp.recommend_cap
        else safe_cap(fits_on, graph_bs)
    )
    recommended = min(best, safe_cap(fits_on, graph_bs))
    if recommended < best:
        notes.append(_safer_note(recommended, fits_on, graph_bs))
    if cross is not None:
        notes.append(
            f"speculation stops paying near concurrency {cross:.1f}; above it run "
            "without speculation (mode Auto does this)"
        )
    if r.speculative and user_mrr is None:
        notes.append(_unset_cap_note(r, sglang_default))
    if mem.error:
        notes.append(mem.error)
    nccl = nccl_note(scn)
    if nccl:
        notes.append(nccl)
    not_modelled = unmodelled(
        inp.args, inp.target_config, scn, cal, weights_indexed=inp.target_weight_bytes is not None
    )
    notes.extend(u.note for u in not_modelled)
    return Plan(
        r,
        ctx,
        mem,
        accept,
        sglang_default,
        fits_on,
        fits_off,
        recommended,
        curves,
        cross,
        notes,
        scn,
        cap_on,
        cap_off,
        not_modelled,
    )


#: The TTFT P99 the recommended cap is judged against (the Auto policy's default SLO).
CAP_TTFT_SLO_S = AutoSpeculation().ttft_p99_slo_seconds


def captured_decode_batch(args: dict[str, Any], mem: memory.MemoryPlan) -> int:
    """The largest decode batch the launch replays in a CUDA graph: the memory tier's max,
    capped by an explicit --max-running-requests (sglang-oracle.md, finding 6); 0 where the
    launch turns the decode graphs off (--disable-cuda-graph and its kin): every decode step
    runs eager."""
    if not memory.GraphSettings.from_values(args).decode:
        return 0
    graphs, user_mrr = mem.settings.cuda_graph_max_bs, args.get("max_running_requests")
    return min(graphs, int(user_mrr)) if user_mrr else graphs


def decode_graph_limit(scn: Scenario, mem: memory.MemoryPlan) -> int | None:
    """The memory tier's largest captured decode batch; None where the launch captures no
    decode graph (``Scenario.cuda_graph_max_bs`` 0: ``--disable-cuda-graph`` and its kin)."""
    return None if scn.cuda_graph_max_bs == 0 else mem.settings.cuda_graph_max_bs


def safe_cap(fits: int, graph_bs: int | None) -> int:
    """The largest cap the plan recommends: every running request's KV fits the pool (above
    it SGLang retracts requests), and the batch runs in a captured decode CUDA graph (None:
    the launch captures none, so only the pool bounds it)."""
    return max(1, fits if graph_bs is None else min(fits, graph_bs))


def cap_candidates(
    loads: list[int], fits: int, graph_bs: int | None, sglang_default: int, cross: float | None
) -> list[int]:
    """The caps the plan compares: each load asked, the crossover, SGLang's own default, the
    largest safe cap (``safe_cap``) and the KV pool's; goodput only changes where a cap meets
    a load (or the pool's ceiling)."""
    top = max(1, fits, sglang_default)
    found = {c for c in loads if 1 <= c <= top}
    found |= {safe_cap(fits, graph_bs), max(1, sglang_default), max(1, fits)}
    if cross is not None:
        found.add(max(1, min(top, int(cross))))
    return sorted(found)


def goodput(
    scn: Scenario,
    loads: list[int],
    cap: int,
    speculative: bool,
    cal: Calibration = DEFAULT_CALIBRATION,
    slo_s: float = CAP_TTFT_SLO_S,
) -> float:
    """Output tok/s summed over the loads asked, each scaled down where its predicted TTFT
    P99 misses the SLO (``policy.score``): what a cap is judged by."""
    total = 0.0
    for tok_s, ttft_p99_ms in load_points(scn, sorted(set(loads)), cap, speculative, cal):
        total += score(tok_s, ttft_p99_ms / 1000, slo_s)
    return total


def best_cap(
    scn: Scenario,
    loads: list[int],
    candidates: list[int],
    speculative: bool,
    cal: Calibration = DEFAULT_CALIBRATION,
) -> int:
    """The candidate cap with the most goodput over ``loads`` (ties: the largest, which also
    serves loads above those asked)."""
    scored = [(goodput(scn, loads, c, speculative, cal), c) for c in candidates]
    top = max(g for g, _ in scored)
    return max(c for g, c in scored if g >= top * (1 - 1e-9))


def _safer_note(cap: int, fits: int, graph_bs: int | None) -> str:
    """Why the recommended cap is below one that the curves would score higher."""
    why = []
    if cap >= fits:
        why.append(
            f"the KV pool holds {fits} requests of this length; above that SGLang retracts "
            "running requests and recomputes them"
        )
    if graph_bs is not None and cap >= graph_bs:
        why.append(f"batches above {graph_bs} run without the decode CUDA graphs")
    return f"recommended --max-running-requests {cap} is the largest safe cap: " + "; ".join(why)


def mean_prompt(mix: tuple[tuple[int, float], ...]) -> int:
    """The mean prompt length of a mix of (tokens, share)."""
    return max(1, round(sum(tokens * share for tokens, share in mix)))


def _point(p: Any) -> dict[str, Any]:
    return {
        "tpot_ms": round(p.tpot_ms, 2),
        "itl_ms": round(p.itl_ms, 2),
        "ttft_ms": round(p.ttft_ms, 1),
        "ttft_p99_ms": round(p.ttft_p99_ms, 1),
        "itl_p99_ms": round(p.itl_p99_ms, 2),
        "output_tok_s": round(p.output_tok_s, 1),
        "running": p.running,
        "queued": p.queued,
    }


def policy_context(
    plan: Plan,
    policy: AutoSpeculation | None = None,
    cal: Calibration = DEFAULT_CALIBRATION,
    concurrencies: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256),
    engine_adapts_steps: bool = False,
) -> PolicyContext:
    """The performance model's predictions the auto-speculation policy starts from.

    Crossovers compare what the policy optimises: throughput scaled down when the predicted TTFT
    P99 misses the SLO (``policy.score``), so a pool-bound card's queue counts against it.
    """
    policy = policy or AutoSpeculation()
    slo = policy.ttft_p99_slo_seconds

    def value(p: Prediction) -> float:
        return score(p.output_tok_s, p.ttft_p99_ms / 1000, slo)

    scn = plan.scenario
    top = float(scn.spec.num_draft_tokens if scn.spec else 1) + 1
    table: list[tuple[float, float]] = []
    accept = 1.2
    while accept <= top + 1e-9:
        trial = dataclasses.replace(scn, accept_length=round(accept, 2))
        cross = crossover(trial, plan.cap_on, plan.cap_off, list(concurrencies), cal, value)
        if cross is None:
            first_on = value(predict(trial, 1, plan.cap_on, True, cal))
            first_off = value(predict(trial, 1, plan.cap_off, False, cal))
            cross = math.inf if first_on >= first_off else 0.0
        table.append((round(accept, 2), cross))
        accept += 0.2
    even = break_even_accept_length(scn, 1, plan.cap_on, plan.cap_off, cal)
    ctx = PolicyContext(table, even, plan.accept_length, engine_adapts_steps)
    ctx.restart_extra_s = group_restart_extra_s(weight_bytes_per_node(plan), scn.nnodes)
    ctx.restart_s = restart_seconds(weight_bytes_per_node(plan), scn.nnodes)
    return ctx


def weight_bytes_per_node(plan: Plan) -> float:
    """What each node of the launch reads at a restart: its GPUs' shards of target and draft."""
    per_gpu = plan.mem.target_weight_gib + plan.mem.draft_weight_gib
    return per_gpu * memory.GIB * plan.scenario.tp_size / max(1, plan.scenario.nnodes)
