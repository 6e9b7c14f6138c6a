"""A first-principles performance model of SGLang decoding with and without speculation.

A forward pass reads the weights it touches (for MoE: the experts the batch routes to) and the
KV of every running request, in the launch's weight and KV dtypes, and does ~2 FLOPs per active
parameter per token processed (FP8 GEMMs at twice the BF16 rate where the card has them); its
time is the slower of memory and compute plus its layers' fixed costs (``parallelism``: small
kernels at the card's rate, tensor parallelism's all-reduces). Speculation adds draft
forwards and one verify pass over (draft tokens) positions per request, and commits the accept
length per request per step. A forward without a CUDA graph (every prefill; a decode above the
captured batch) takes at least its kernels' launches from Python. The scheduler's CPU work
hides behind the GPU step under the overlap scheduler and adds to it without. The KV pool caps
how many requests run; the rest queue, and that wait is what TTFT pays; with staggered arrivals
new prompts' prefills (chunked, mixed into decode steps or ahead of them) stretch the running
requests' TPOT. Used by ``plan``, the auto-speculation policy, and the simulated engine.
Constants live in ``Calibration`` (``modelconstants``; fitted by
``specserver_advisor.perf.calibration``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from functools import lru_cache

from specserver_advisor.gpus import Gpu
from specserver_advisor.perf.constants import DEFAULT_CALIBRATION, Calibration
from specserver_advisor.perf.parallelism import (
    allreduce_s,
    eager_forward_launch_s,
    kernel_floor_s,
    layer_launch_s,
    moe_padded_rows,
)
from specserver_advisor.sglang.cudagraphs import replayed_batch
from specserver_advisor.sglang.modelshape import ModelShape


@dataclass(frozen=True)
class SpecShape:
    """The speculative shape that matters for cost."""

    algorithm: str
    num_steps: int
    topk: int
    num_draft_tokens: int


@dataclass(frozen=True)
class Scenario:
    """One serving situation to predict."""

    gpu: Gpu
    target: ModelShape
    target_weight_bytes: int
    kv_cell_bytes: int
    draft: ModelShape | None = None
    draft_weight_bytes: int = 0
    draft_kv_cell_bytes: int = 0
    spec: SpecShape | None = None
    accept_length: float = 1.0
    input_len: int = 512
    output_len: int = 128
    tp_size: int = 1
    #: Nodes the TP group spans (``--nnodes``): its all-reduces cross the inter-node link.
    nnodes: int = 1
    #: The launch turns SGLang's custom all-reduce off (``allreduceflags.
    #: custom_allreduce_flagged_off``): every all-reduce is NCCL's (``parallelism``).
    custom_allreduce_disabled: bool = False
    #: GPU clock relative to boost (a clock-locked card computes slower; memory is unchanged).
    clock_scale: float = 1.0
    #: Request lengths vary (real outputs, or a random range): arrivals are staggered. With
    #: fixed lengths (ignore_eos, one length) requests finish and arrive again in waves.
    staggered: bool = False
    #: Largest decode batch with a captured CUDA graph (None: every batch is captured).
    cuda_graph_max_bs: int | None = None
    #: SGLang's overlap scheduler (on by default, speculation included; off with
    #: --disable-overlap-schedule, pipeline parallelism or the CPU device).
    overlap_schedule: bool = True
    #: The speculative worker runs under that overlap (SGLang 0.5.23's spec V2). Releases
    #: before spec V2 became the default forced the overlap scheduler off for speculation
    #: (spec V1), so their speculative steps paid the host's work in series while their plain
    #: launches overlapped it (``step_time``).
    spec_overlap: bool = True
    #: --chunked-prefill-size: a longer prompt is prefilled over several scheduler steps
    #: (None or <= 0: one prefill forward per prompt).
    chunked_prefill_size: int | None = None
    #: --enable-mixed-chunk: each prefill chunk's forward also runs the decodes in flight. Off
    #: (the default), prefill batches go first and the decodes wait for all of a prompt's chunks.
    mixed_chunk: bool = False
    #: Prompt lengths of a varied workload as (tokens, share of requests), shares summing to 1;
    #: empty: every prompt is ``input_len`` (then the mix's mean, for the KV and the context).
    #: ``staggered`` with a mix is the mix's stagger: ``predict`` keeps it only for the modes
    #: whose arrivals a mix does spread (``stays_staggered``).
    prompt_mix: tuple[tuple[int, float], ...] = ()

    def __hash__(self) -> int:
        """The fields' hash, computed once: the performance model's caches key on it at every
        forward of every load a plan predicts."""
        found = self.__dict__.get("_fields_hash")
        if found is None:
            found = hash(tuple(getattr(self, f.name) for f in fields(self)))
            self.__dict__["_fields_hash"] = found
        return int(found)


@dataclass(frozen=True)
class PromptPrefill:
    """One prompt length of the workload: its share of requests, prefill and chunk steps."""

    share: float
    prefill_s: float
    #: Steps of the running decodes its prefill is mixed into (1: ahead of them, not mixed).
    chunks: int


@dataclass(frozen=True)
class Prediction:
    """Predicted steady state of a closed-loop benchmark at one concurrency."""

    concurrency: int
    running: int
    queued: int
    step_s: float
    tpot_ms: float
    itl_ms: float
    ttft_ms: float
    #: Requests of one wave spread over about [0.5, 1.5] x the mean: P99 ~ 1.5 x mean.
    ttft_p99_ms: float
    output_tok_s: float
    prefill_s: float
    #: Inter-token latency P99: a step that also carries a prefill chunk is the slow one.
    itl_p99_ms: float = 0.0


def _experts_touched(shape: ModelShape, tokens: float) -> float:
    """Expected distinct routed experts per MoE layer for ``tokens`` independent tokens."""
    if not shape.is_moe or tokens <= 0:
        return 0.0
    e, k = shape.num_experts, shape.experts_per_token
    return float(e * (1 - (1 - k / e) ** tokens))


def forward_time(
    scn: Scenario,
    shape: ModelShape,
    weight_bytes: int,
    cell_bytes: int,
    batch: int,
    positions: int,
    context: float,
    cal: Calibration,
    speculative: bool = False,
) -> float:
    """Seconds for one forward over ``batch`` requests x ``positions`` tokens each (in a
    speculative launch: its graphs are captured at SGLang's finer speculative list).

    Under a CUDA graph the batch pads to the captured size that holds it: the padding rows'
    positions run the linear layers too (``cudagraphs.replayed_batch``), which a verify of
    many draft tokens per request pays in compute.
    """
    st = _forward_static(scn, shape, weight_bytes, cal)
    tp = scn.tp_size
    tokens = batch * positions
    computed = replayed_batch(batch, scn.cuda_graph_max_bs, speculative) * positions
    weights = st.weights
    linear = 2 * st.active_params * computed / tp
    if shape.is_moe:
        independent = batch * (1 + (positions - 1) * cal.moe_routing_independence)
        touched = min(shape.num_experts, _experts_touched(shape, independent))
        weights += st.routed_bytes * (touched / shape.num_experts - 1)
        # The fused MoE computes each touched expert's tokens padded to its row block: at a
        # few tokens per expert that padding, not the tokens, sets the experts' FLOPs.
        padded = moe_padded_rows(shape, computed, touched) * st.expert_params
        linear += 2 * (padded * shape.moe_layers - st.routed_flops * computed) / tp
    kv = batch * context * cell_bytes * tp  # cell is per GPU; total across the TP group
    bytes_read = (weights + kv) / tp
    # Attention score/value FLOPs grow with context: 4 * layers * heads * head_dim per position.
    attention = st.attention_flops * context * tokens / tp
    mem_s = bytes_read / st.bandwidth
    cmp_s = linear / st.linear_rate + attention / st.rate
    fixed = st.launch_s + allreduce_s(scn, shape, tokens, cal)
    return float(max(mem_s, cmp_s) + fixed)


@dataclass(frozen=True)
class _ForwardStatic:
    """What a forward's time reads of the launch that no batch changes (``forward_time``)."""

    weights: float
    routed_bytes: float
    active_params: int
    expert_params: int
    routed_flops: int
    attention_flops: int
    bandwidth: float
    rate: float
    linear_rate: float
    launch_s: float


@lru_cache(maxsize=1024)
def _forward_static(
    scn: Scenario, shape: ModelShape, weight_bytes: int, cal: Calibration
) -> _ForwardStatic:
    """``forward_time``'s batch-independent part, once per launch and model: a plan asks for
    every forward of every load (``plan --search-shape``: ~130 loads x ~140 shapes)."""
    # Embedding rows are looked up, not streamed; the LM head (tied or not) is read in full.
    weights = float(weight_bytes)
    if not shape.tie_embeddings:
        weights -= shape.vocab_size * shape.hidden_size * shape.dtype_bytes
    routed_bytes = 0.0
    if shape.is_moe:
        routed_share = shape.num_experts * shape.expert_params() * shape.moe_layers
        routed_bytes = weights * routed_share / max(1, shape.total_params())
    rate = scn.gpu.bf16_tflops * 1e12 * cal.compute_efficiency * scn.clock_scale
    return _ForwardStatic(
        weights=weights,
        routed_bytes=routed_bytes,
        active_params=shape.active_params_per_token(),
        expert_params=shape.expert_params(),
        routed_flops=shape.experts_per_token * shape.expert_params() * shape.moe_layers,
        attention_flops=4 * shape.num_layers * shape.num_heads * shape.head_dim,
        bandwidth=scn.gpu.bandwidth_gbs * 1e9 * cal.bandwidth_efficiency,
        rate=rate,
        linear_rate=rate * linear_rate_factor(scn, shape),
        launch_s=layer_launch_s(scn, shape, cal),
    )


def linear_rate_factor(scn: Scenario, shape: ModelShape) -> float:
    """The matmul rate of ``shape``'s weights relative to dense BF16 on ``scn``'s GPU.

    FP16 and BF16 run at the same tensor-core rate (and are the same bytes). An FP8 checkpoint
    runs its linear layers as FP8 GEMMs, twice the BF16 rate, on cards with FP8 tensor cores
    (sm89 and later); sm80-88 run Marlin weight-only FP8 (``can_auto_enable_marlin_fp8``: half
    the bytes, the BF16 compute). Attention runs in the compute dtype either way.
    """
    return 2.0 if shape.checkpoint_fp8 and scn.gpu.sm >= 89 else 1.0


def eager_launches(scn: Scenario, shape: ModelShape, batch: int, cal: Calibration) -> float:
    """The host's launches of one forward of ``shape`` that runs eagerly (``batch`` above the
    captured graphs; 0 under a graph): the forward takes the longer of them and its GPU work
    (``parallelism.eager_forward_launch_s``)."""
    if scn.cuda_graph_max_bs is None or batch <= scn.cuda_graph_max_bs:
        return 0.0
    return eager_forward_launch_s(shape, cal)


#: Kernels of the EAGLE draft loop outside its forwards (SGLang 0.5.23's
#: ``EagleDraftWorker.draft_forward``), which a captured draft graph replays and an eager step
#: launches one by one: per draft step, ``select_top_k_tokens`` (the expanded scores, their
#: top-k, the gather of the next input ids, the parent indices, the gather of hidden-state
#: rows); after each draft forward but the last step's, the softmax, the top-k, the hot-token
#: map and the position increment; once, the organisation of the tree (two concatenations, the
#: top-k of the draft tokens, their sort, the gather, the parents' concatenation).
SELECT_TOP_K_KERNELS = 5
DRAFT_SAMPLE_KERNELS = 4
ORGANIZE_TREE_KERNELS = 6


def eager_draft_loop_s(scn: Scenario, spec: SpecShape, batch: int, cal: Calibration) -> float:
    """Launch cost of the draft loop's selection kernels in an eager speculative step.

    Zero under a captured draft graph (``batch`` at most the captured max) and for a step with
    no draft steps (SGLang's adaptive zero-step tier). Per kernel at ``eager_launch_s``.
    """
    if scn.cuda_graph_max_bs is None or batch <= scn.cuda_graph_max_bs or spec.num_steps < 1:
        return 0.0
    return draft_loop_kernels(spec) * cal.eager_launch_s


def draft_loop_kernels(spec: SpecShape) -> int:
    """The draft loop's kernels outside its forwards for ``spec.num_steps`` (>= 1) draft steps."""
    return (
        spec.num_steps * SELECT_TOP_K_KERNELS
        + (spec.num_steps - 1) * DRAFT_SAMPLE_KERNELS
        + ORGANIZE_TREE_KERNELS
    )


def schedule_host_time(batch: int, cal: Calibration) -> float:
    """The scheduler's CPU time around one step of ``batch`` requests (hidden by overlap)."""
    return cal.schedule_s_per_step + cal.schedule_s_per_request * batch


def step_time(
    scn: Scenario, batch: int, speculative: bool, cal: Calibration, steps: int | None = None
) -> float:
    """One decode step as the client sees it: the GPU's step and the scheduler's CPU work.

    With the overlap scheduler the CPU prepares step n+1 while the GPU runs step n, so a step
    takes the longer of the two; without it they run one after the other. A synchronous
    speculative step (overlap off, or a release before spec V2) also waits for the worker's
    own host work between its stages and for each draft step (``sync_spec_host_s``).
    """
    gpu_s = gpu_step_time(scn, batch, speculative, cal, steps)
    return scheduled_step_time(scn, gpu_s, batch, cal, speculative, steps)


def scheduled_step_time(
    scn: Scenario,
    gpu_s: float,
    batch: int,
    cal: Calibration,
    speculative: bool = False,
    steps: int | None = None,
) -> float:
    """Any scheduler step (decode, prefill chunk or both) of ``gpu_s`` GPU work over ``batch``
    requests as the client sees it: the longer of GPU and scheduler CPU under the overlap
    scheduler, their sum without it. A synchronous speculative step (``speculative``: its
    decodes speculate, and the launch or its release does not overlap them) waits for the
    scheduler's work and then for the worker's own (``steps``: its draft steps, the launch's
    unless SGLang's adaptive mode picked others).
    """
    host = schedule_host_time(batch, cal)
    if speculative and scn.spec is not None and not (scn.overlap_schedule and scn.spec_overlap):
        return gpu_s + host + sync_spec_host_s(scn.spec, cal, steps)
    return max(gpu_s, host) if scn.overlap_schedule else gpu_s + host


def sync_spec_host_s(spec: SpecShape, cal: Calibration, steps: int | None = None) -> float:
    """The synchronous speculative worker's host work in one step, which no GPU work hides:
    its stages' (``spec_sync_host_s``) and its draft steps' (``spec_sync_step_s`` each; an
    EAGLE-family draft loop's, so none for NGRAM, whose drafts come from a trie)."""
    draft_steps = spec.num_steps if steps is None else steps
    if spec.algorithm == "NGRAM":
        draft_steps = 0
    return cal.spec_sync_host_s + cal.spec_sync_step_s * max(0, draft_steps)


def gpu_step_time(
    scn: Scenario, batch: int, speculative: bool, cal: Calibration, steps: int | None = None
) -> float:
    """One decode step (speculative: draft steps + verify + draft extend) for ``batch`` requests.

    ``steps`` overrides the launch's draft steps (SGLang's adaptive mode; chain, topk 1); 0 is
    a plain target decode that still extends the loaded draft over the committed token.
    Above the captured CUDA-graph batch every forward (draft steps included) takes at least its
    launches from Python (``eager_launches``), and the draft loop pays its top-k selection and
    tree kernels (``eager_draft_loop_s``).
    A tree (topk > 1) costs GPU work per request in proportion to its size (``spec_request_s``).
    """
    context = scn.input_len + scn.output_len / 2
    target_eager = eager_launches(scn, scn.target, batch, cal)
    if not speculative or scn.spec is None:
        plain = forward_time(
            scn, scn.target, scn.target_weight_bytes, scn.kv_cell_bytes, batch, 1, context, cal
        )
        return max(plain, target_eager)
    spec = scn.spec
    accept = scn.accept_length
    if steps is not None:
        spec = SpecShape(spec.algorithm, steps, 1, steps + 1)
        accept = 1.0 + min(max(0.0, accept - 1.0), float(steps))
    draft_s = 0.0
    if scn.draft is not None and scn.draft_weight_bytes:
        draft_eager = eager_launches(scn, scn.draft, batch, cal)
        one = forward_time(
            scn,
            scn.draft,
            scn.draft_weight_bytes,
            scn.draft_kv_cell_bytes,
            batch,
            spec.topk,
            context,
            cal,
            True,
        )
        # num_steps draft forwards, plus the draft extend over the accepted tokens.
        extend = forward_time(
            scn,
            scn.draft,
            scn.draft_weight_bytes,
            scn.draft_kv_cell_bytes,
            batch,
            max(1, round(accept)),
            context,
            cal,
            True,
        )
        draft_s = spec.num_steps * max(one, draft_eager) + max(extend, draft_eager)
        eager_loop = eager_draft_loop_s(scn, spec, batch, cal)
        draft_s += eager_loop if eager_loop else draft_loop_floor_s(scn, spec, cal)
    if steps == 0:
        plain = forward_time(
            scn,
            scn.target,
            scn.target_weight_bytes,
            scn.kv_cell_bytes,
            batch,
            1,
            context,
            cal,
            True,
        )
        return max(plain, target_eager) + draft_s
    verify = forward_time(
        scn,
        scn.target,
        scn.target_weight_bytes,
        scn.kv_cell_bytes,
        batch,
        spec.num_draft_tokens,
        context,
        cal,
        True,
    )
    # An EAGLE-family tree (topk > 1) is built, sorted and masked per request; NGRAM's trie is
    # built from the request's own text and priced by the fitted per-request cost as it was.
    eagle_tree = spec.topk > 1 and spec.algorithm != "NGRAM"
    tree = spec.num_draft_tokens / (spec.num_steps + 1) if eagle_tree else 1.0
    host = cal.spec_step_overhead_s + spec_request_s(scn, cal, tree) * batch
    return max(verify, target_eager) + draft_s + host


#: The memory bandwidth (GB/s) at which ``Calibration.spec_s_per_request`` is stated: the L4's.
SPEC_REFERENCE_GBS = 300.0


def spec_request_s(scn: Scenario, cal: Calibration, tree: float = 1.0) -> float:
    """A speculative step's cost per request beyond its forwards, on ``scn``'s card.

    The draft's and the verify's forwards are priced in ``forward_time`` (the draft's steps over
    ``topk`` rows, the verify over ``num_draft_tokens`` positions and the rows its graph pads
    to). What remains grows with the requests, in parts by mechanism:

    - the GPU's small per-request kernels of the tree (build, mask, accept, KV slot moves):
      gathers and scatters of a few rows a request, bound by memory traffic at small sizes,
      not by FLOPs, so ``spec_s_per_request`` (stated at ``SPEC_REFERENCE_GBS``) scales with the
      card's memory bandwidth, never below one kernel floor;
    - for an EAGLE tree, the same kernels' work for each node beyond a chain's one
      (``spec_tree_node_s``, stated and scaled the same way);
    - the host's loop over the requests between the draft and the verify, the same on every
      card (``spec_host_s_per_request``).

    ``tree``: the tree's nodes per draft step (``num_draft_tokens / (num_steps + 1)``; 1 for a
    chain); the GPU part grows with it too.
    """
    rate = SPEC_REFERENCE_GBS / scn.gpu.bandwidth_gbs
    nodes = max(1.0, tree)
    gpu = max(cal.spec_s_per_request * rate * nodes, kernel_floor_s(scn.gpu, cal))
    gpu += cal.spec_tree_node_s * rate * (nodes - 1.0)
    host = cal.spec_host_s_per_request
    return float(gpu + host)


def draft_loop_floor_s(scn: Scenario, spec: SpecShape, cal: Calibration) -> float:
    """The draft loop's selection and tree kernels in a captured step, at the card's kernel
    floor (``eager_draft_loop_s`` prices them launched one by one above the captured batch)."""
    if spec.num_steps < 1 or spec.algorithm == "NGRAM":
        return 0.0
    return draft_loop_kernels(spec) * kernel_floor_s(scn.gpu, cal)


def prefill_time(scn: Scenario, speculative: bool, cal: Calibration) -> float:
    """Seconds to prefill one request's prompt alone, draft prefill included; the mean over
    the prompt mix when there is one."""
    return sum(p.share * p.prefill_s for p in prompt_prefills(scn, speculative, cal))


#: SGLang's default ``--max-prefill-tokens``: the most prompt tokens one prefill batch admits
#: (a single longer prompt still goes in whole without chunking).
MAX_PREFILL_TOKENS = 16384


def prefill_floor_s(scn: Scenario, speculative: bool, cal: Calibration) -> float:
    """The shortest one prefill forward (a batch of prompts, or one chunk) can take: its
    kernels launched from Python (``parallelism.eager_forward_launch_s``), the target's and,
    when speculating, the draft's extend after it. The GPU work runs behind the launches, so a
    forward takes the longer of the two; a big MoE's short prompts are launch-bound."""
    floor = eager_forward_launch_s(scn.target, cal)
    if speculative and scn.draft is not None:
        floor += eager_forward_launch_s(scn.draft, cal)
    return floor


def wave_prefill_time(scn: Scenario, prompts: int, speculative: bool, cal: Calibration) -> float:
    """Seconds to prefill ``prompts`` prompts that arrive together (a wave, a burst): their
    compute, in prefill batches of at most ``MAX_PREFILL_TOKENS`` (or the chunk) tokens, each
    batch at least one forward's launches (``prefill_floor_s``)."""
    if prompts <= 0:
        return 0.0
    mix = prompt_lengths(scn)
    tokens = prompts * sum(share * length for length, share in mix)
    compute = prompts * sum(
        share * prefill_tokens_time(scn, length, speculative, cal, floor=False)
        for length, share in mix
    )
    limit = min(MAX_PREFILL_TOKENS, chunk_tokens(scn) or MAX_PREFILL_TOKENS)
    batches = max(1, math.ceil(tokens / limit))
    return max(compute, batches * prefill_floor_s(scn, speculative, cal))


def arriving_wave_prefill(
    scn: Scenario, running: int, speculative: bool, cal: Calibration
) -> float | None:
    """``wave_prefill_time`` of a closed loop's wave of ``running`` prompts where arrivals come
    in waves (fixed lengths); None where they are staggered (each prompt arrives alone)."""
    return None if scn.staggered else wave_prefill_time(scn, running, speculative, cal)


def prompt_lengths(scn: Scenario) -> tuple[tuple[int, float], ...]:
    """The workload's prompt lengths and their shares (``prompt_mix``, else ``input_len``)."""
    return tuple(scn.prompt_mix or ((scn.input_len, 1.0),))


def prompt_prefills(scn: Scenario, speculative: bool, cal: Calibration) -> list[PromptPrefill]:
    """Each prompt length of the workload (``prompt_mix``, else ``input_len``) with its prefill."""
    return list(_prompt_prefills(scn, speculative, cal))


@lru_cache(maxsize=1024)
def _prompt_prefills(
    scn: Scenario, speculative: bool, cal: Calibration
) -> tuple[PromptPrefill, ...]:
    """``prompt_prefills`` once per scenario: it does not depend on the load."""
    mix = prompt_lengths(scn)
    return tuple(
        PromptPrefill(
            share,
            prefill_tokens_time(scn, tokens, speculative, cal),
            prefill_chunks(scn, tokens),
        )
        for tokens, share in mix
    )


def prefill_tokens_time(
    scn: Scenario, tokens: int, speculative: bool, cal: Calibration, floor: bool = True
) -> float:
    """Seconds to prefill the first ``tokens`` of a prompt alone, draft included: its compute,
    and (``floor``) at least one forward's launches for each of its chunks (a chunk, without
    ``--enable-mixed-chunk``, is a prefill forward of its own). ``floor=False``: the compute
    alone, what a batch of prompts shares out (``wave_prefill_time``, the simulated engine)."""
    target = scn.target
    attention = 2 * target.num_layers * target.num_heads * target.head_dim * tokens**2
    linear = 2 * target.active_params_per_token() * tokens / linear_rate_factor(scn, target)
    if speculative and scn.draft is not None:
        linear += (
            2 * scn.draft.active_params_per_token() * tokens / linear_rate_factor(scn, scn.draft)
        )
    rate = scn.gpu.bf16_tflops * 1e12 * cal.prefill_efficiency * scn.clock_scale * scn.tp_size
    compute = (linear + attention) / rate
    if not floor or tokens <= 0:
        return compute
    size = chunk_tokens(scn)
    forwards = math.ceil(tokens / size) if size else 1
    return max(compute, forwards * prefill_floor_s(scn, speculative, cal))


def prefill_chunk_time(
    scn: Scenario, start: int, end: int, speculative: bool, cal: Calibration
) -> float:
    """Seconds of prefill compute for prompt tokens ``start``..``end`` (one chunk), the
    attention over the tokens before it included: the chunks of a prompt sum to its prefill
    compute. The step that runs a chunk takes at least one forward's launches
    (``prefill_floor_s``), which the steps' caller applies once per forward."""
    return prefill_tokens_time(scn, end, speculative, cal, False) - prefill_tokens_time(
        scn, start, speculative, cal, False
    )


def chunk_tokens(scn: Scenario) -> int | None:
    """Prompt tokens one scheduler step prefills (``--chunked-prefill-size``; None: no limit)."""
    size = scn.chunked_prefill_size
    return size if size and size > 0 else None


def prefill_chunks(scn: Scenario, prompt: int | None = None) -> int:
    """Steps of the running decodes one prompt's prefill is mixed into (1: not mixed).

    With ``--enable-mixed-chunk`` each ``--chunked-prefill-size`` chunk runs with the decodes;
    without it the chunks run back to back ahead of them (``get_next_batch_to_run``: a prefill
    batch, the chunked request's included, goes before the decode batch). ``prompt``: its
    tokens (default ``input_len``).
    """
    size = chunk_tokens(scn)
    if not scn.mixed_chunk or size is None:
        return 1
    return max(1, math.ceil((scn.input_len if prompt is None else prompt) / size))


def predict(
    scn: Scenario,
    concurrency: int,
    capacity: int,
    speculative: bool,
    cal: Calibration = DEFAULT_CALIBRATION,
) -> Prediction:
    """Closed-loop steady state: ``concurrency`` users, at most ``capacity`` running.

    Each request costs its prefill plus output_len / accept_length steps of the shared batch;
    queued requests wait for a slot (Little's law on the queue). With fixed lengths requests
    arrive in waves, so a new request also waits for the prefills of half its wave; with
    staggered arrivals it waits for the step in flight and its own prefill.
    """
    if concurrency >= 1 and capacity > concurrency:
        # A cap above the load never binds (only min(load, cap) run): one cached prediction
        # serves every such cap, as plan's cap recommendation scores each candidate at each load.
        capacity = concurrency
    if not speculative:
        if scn.spec or scn.draft or scn.accept_length != 1.0 or scn.draft_weight_bytes:
            scn = plain_scenario(scn)
        return _predict_plain(scn, concurrency, capacity, cal)
    return _predict(scn, concurrency, capacity, speculative, cal)


def plain_scenario(scn: Scenario) -> Scenario:
    """``scn`` without what only speculation reads (the draft, the shape, the accept length):
    plain decoding's predictions are the same for every speculative shape of a launch."""
    return replace(
        scn, spec=None, accept_length=1.0, draft=None, draft_weight_bytes=0, draft_kv_cell_bytes=0
    )


@lru_cache(maxsize=4096)
def _predict_plain(scn: Scenario, concurrency: int, capacity: int, cal: Calibration) -> Prediction:
    """Plain decoding's prediction, once per launch and load (``plan --search-shape`` plans
    ~140 shapes of one launch: their speculation-off curves are one curve)."""
    return _predict(scn, concurrency, capacity, False, cal)


def _predict(
    scn: Scenario, concurrency: int, capacity: int, speculative: bool, cal: Calibration
) -> Prediction:
    running = max(1, min(concurrency, capacity)) if capacity > 0 else 0
    if not running:
        return closed_loop(scn, concurrency, capacity, 0.0, 1.0, 0.0)
    return _queued(_loop_at(scn, running, speculative, cal), concurrency)


@lru_cache(maxsize=16384)
def _loop_at(scn: Scenario, running: int, speculative: bool, cal: Calibration) -> _Loop:
    """``closed_loop``'s load-independent part at a running batch, once per launch, batch and
    mode: every load at or above a cap runs the cap's batch and differs only in its queue, so
    plan's curves and its cap recommendation (every candidate cap at every load) share it."""
    accept = scn.accept_length if speculative and scn.spec else 1.0
    if scn.prompt_mix and scn.staggered and not stays_staggered(scn, speculative):
        scn = replace(scn, staggered=False)
    step = _batch_step(scn, running, speculative, cal)
    prompts = prompt_prefills(scn, speculative, cal)
    prefill = sum(p.share * p.prefill_s for p in prompts)
    return _loop(
        scn,
        running,
        step,
        accept,
        prefill,
        prompts,
        arriving_wave_prefill(scn, running, speculative, cal),
    )


def load_points(
    scn: Scenario,
    loads: Sequence[int],
    capacity: int,
    speculative: bool,
    cal: Calibration = DEFAULT_CALIBRATION,
) -> list[tuple[float, float]]:
    """(output tok/s, TTFT P99 ms) of ``predict`` at each of ``loads`` under one cap, the same
    numbers without a ``Prediction`` per load (plan's cap recommendation scores every candidate
    cap at every load)."""
    if not speculative and (
        scn.spec or scn.draft or scn.accept_length != 1.0 or scn.draft_weight_bytes
    ):
        scn = plain_scenario(scn)
    out = []
    for load in loads:
        cap = load if load >= 1 and capacity > load else capacity
        running = max(1, min(load, cap)) if cap > 0 else 0
        if not running:
            p = closed_loop(scn, load, cap, 0.0, 1.0, 0.0)
            out.append((p.output_tok_s, p.ttft_p99_ms))
            continue
        loop = _loop_at(scn, running, speculative, cal)
        wait = max(0, load - running) * loop.wave_s / running
        ttft = wait + loop.own
        out.append((loop.output_tok_s, max(1.5 * ttft, wait + loop.tail) * 1000))
    return out


@lru_cache(maxsize=16384)
def _batch_step(scn: Scenario, running: int, speculative: bool, cal: Calibration) -> float:
    """``step_time`` at a running batch, once per launch, batch and mode: a prediction depends
    on the load and the cap only through the batch that runs, so plan's curves, its cap
    recommendation (every candidate cap at every load) and ``--search-shape`` share steps."""
    return step_time(scn, running, speculative, cal)


def stays_staggered(scn: Scenario, speculative: bool) -> bool:
    """Whether the arrivals of a varied prompt mix drift apart, with fixed output lengths.

    SGLang 0.5.23 runs every prefill batch ahead of the decode batch (``get_next_batch_to_run``),
    so the prompts that arrive together, long and short, start decoding in the same step and,
    committing one token a step, finish in the same step: the mix alone keeps the waves. They
    drift apart where the tokens committed per step vary (speculation) or where the decodes
    advance while longer prompts still prefill (``--enable-mixed-chunk`` with chunking).
    """
    return (speculative and scn.spec is not None) or (
        scn.mixed_chunk and chunk_tokens(scn) is not None
    )


def closed_loop(
    scn: Scenario,
    concurrency: int,
    capacity: int,
    step: float,
    accept: float,
    prefill: float,
    prompts: Sequence[PromptPrefill] | None = None,
    wave_prefill: float | None = None,
) -> Prediction:
    """The closed-loop steady state for a given step time, accept length and (mean) prefill
    time; ``prompts`` (default: every prompt ``prefill``) sets the slow steps and tails;
    ``wave_prefill`` (``arriving_wave_prefill``) a wave's batched prefill.
    """
    running = max(1, min(concurrency, capacity)) if capacity > 0 else 0
    if running == 0:
        inf = float("inf")
        return Prediction(concurrency, 0, concurrency, inf, inf, inf, inf, inf, 0.0, inf)
    loop = _loop(scn, running, step, accept, prefill, prompts, wave_prefill)
    return _queued(loop, concurrency)


@dataclass(frozen=True)
class _Loop:
    """What a closed loop at ``running`` requests does not owe to its queue (``_queued``)."""

    running: int
    step: float
    prefill: float
    wave_s: float
    #: A request's own wait for its first token, and the P99 prompt's, once admitted (s).
    own: float
    tail: float
    tpot_ms: float
    itl_ms: float
    itl_p99_ms: float
    output_tok_s: float


def _loop(
    scn: Scenario,
    running: int,
    step: float,
    accept: float,
    prefill: float,
    prompts: Sequence[PromptPrefill] | None,
    wave_prefill: float | None = None,
) -> _Loop:
    """``wave_prefill``: seconds to prefill a wave of ``running`` prompts arriving together
    (fixed lengths; ``wave_prefill_time``: batched, so below ``running`` lone prefills where
    each forward is launch-bound); None (staggered arrivals, or unknown): ``running * prefill``."""
    steps_per_request = scn.output_len / accept
    decode_s = steps_per_request * step
    if wave_prefill is None:
        wave_prefill = running * prefill
    wave_s = wave_prefill + decode_s
    req_per_s = running / wave_s
    prompts = list(prompts or [PromptPrefill(1.0, prefill, prefill_chunks(scn))])
    chunks = sum(p.share * p.chunks for p in prompts)
    if scn.staggered:
        # A request decodes while the other running - 1 slots each admit about one request per
        # wave: their prefills run ahead of its steps or mixed into them, so its decode
        # stretches to D = decode_s + arrivals x prefill with arrivals = (running-1) D/wave.
        decode_elapsed = decode_s * wave_s / (prefill + decode_s)
        arrivals = (running - 1) * decode_elapsed / wave_s
    else:
        decode_elapsed, arrivals = decode_s, 0.0
    # A decode step that also carries a prefill (all of it, or one chunk when mixed) is slow;
    # the ITL P99 is the slowest kind of step that still makes up 1% of a request's steps.
    slow = sorted(
        ((step + p.prefill_s / p.chunks, arrivals * p.share * p.chunks) for p in prompts),
        reverse=True,
    )
    total_steps = steps_per_request + sum(n for _, n in slow)
    itl_p99, seen = step, 0.0
    for seconds, n in slow:
        seen += n
        if seen / total_steps >= 0.01:
            itl_p99 = seconds
            break
    if scn.staggered:
        # Its own prompt waits for the step in flight, or (mixed) runs one chunk per step
        # alongside the decodes; the TTFT P99 also pays the P99 prompt's own prefill.
        own = prefill + chunks * step
        tail = _p99([(p.prefill_s + p.chunks * step, p.share) for p in prompts])
    else:
        own = (running + 1) / (2 * running) * wave_prefill + step
        # A wave holding the P99 prompt waits for its longer prefill.
        tail = own + _p99([(p.prefill_s, p.share) for p in prompts]) - prefill
    return _Loop(
        running=running,
        step=step,
        prefill=prefill,
        wave_s=wave_s,
        own=own,
        tail=tail,
        tpot_ms=decode_elapsed / scn.output_len * 1000,
        itl_ms=decode_elapsed / steps_per_request * 1000,
        itl_p99_ms=itl_p99 * 1000,
        output_tok_s=req_per_s * scn.output_len,
    )


def _queued(loop: _Loop, concurrency: int) -> Prediction:
    """``loop`` with ``concurrency`` users: the ones past its running batch queue (Little's law:
    each waits its place in line times a wave per running slot)."""
    queued = max(0, concurrency - loop.running)
    wait = queued * loop.wave_s / loop.running
    ttft = wait + loop.own
    ttft_p99 = max(1.5 * ttft, wait + loop.tail)
    return Prediction(
        concurrency=concurrency,
        running=loop.running,
        queued=queued,
        step_s=loop.step,
        tpot_ms=loop.tpot_ms,
        itl_ms=loop.itl_ms,
        ttft_ms=ttft * 1000,
        ttft_p99_ms=ttft_p99 * 1000,
        output_tok_s=loop.output_tok_s,
        prefill_s=loop.prefill,
        itl_p99_ms=loop.itl_p99_ms,
    )


def _p99(values: list[tuple[float, float]]) -> float:
    """The 99th percentile of ``values`` given as (value, share)."""
    seen = 0.0
    for value, share in sorted(values):
        seen += share
        if seen >= 0.99 - 1e-9:
            return value
    return max(v for v, _ in values)


def throughput(p: Prediction) -> float:
    """Output tokens per second (the default thing a crossover compares)."""
    return p.output_tok_s


def crossover(
    scn: Scenario,
    cap_on: int,
    cap_off: int,
    concurrencies: list[int],
    cal: Calibration = DEFAULT_CALIBRATION,
    value: Callable[[Prediction], float] = throughput,
) -> float | None:
    """The concurrency above which speculation stops paying (in ``value``, throughput default).

    The first point where the on/off ratio falls through 1, interpolated. None when it never
    does in range (speculation wins everywhere, or already loses at the lowest load).
    """
    loads = sorted(set(concurrencies))
    return falls_through(
        (
            c,
            value(predict(scn, c, cap_on, True, cal)),
            value(predict(scn, c, cap_off, False, cal)),
        )
        for c in loads
    )


def falls_through(points: Iterable[tuple[int, float, float]]) -> float | None:
    """``crossover`` of (concurrency, on, off) values in rising concurrency: where the on/off
    ratio first falls through 1, interpolated (None when it never does). Lazy: stops at it."""
    prev: tuple[int, float] | None = None
    for c, on, off in points:
        gain = on / off if off else (math.inf if on else 1.0)
        if prev is not None and prev[1] >= 1 > gain:
            c0, g0 = prev
            return c0 + (g0 - 1) * (c - c0) / (g0 - gain) if math.isfinite(g0) else float(c0)
        prev = (c, gain)
    return None


def break_even_accept_length(
    scn: Scenario,
    concurrency: int,
    cap_on: int,
    cap_off: int,
    cal: Calibration = DEFAULT_CALIBRATION,
) -> float:
    """The accept length at which speculation's throughput equals plain decoding's."""
    off = predict(scn, concurrency, cap_off, False, cal).output_tok_s
    lo, hi = 1.0, float(scn.spec.num_draft_tokens if scn.spec else 1) + 1
    for _ in range(40):
        mid = (lo + hi) / 2
        on = predict(replace(scn, accept_length=mid), concurrency, cap_on, True, cal).output_tok_s
        lo, hi = (mid, hi) if on < off else (lo, mid)
    return round((lo + hi) / 2, 3)
