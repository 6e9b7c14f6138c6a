"""The simulated engine's scheduler: continuous batching with the advisor's step times.

Requests wait until the KV pool and ``--max-running-requests`` admit them (that wait is their
TTFT), are prefilled in ``--chunked-prefill-size`` chunks (one step each, ahead of the decodes,
or carrying them along with ``--enable-mixed-chunk``: ``simsteps``), then decode together; each
step takes the performance model's time for its chunks, batch and context (the scheduler's CPU
in series with ``--disable-overlap-schedule``), and a decode step commits one token per request
(or, speculating, a number drawn from the prompt kind's acceptance). With
``--speculative-adaptive`` the draft steps of each batch come from SGLang's adaptive tiers
(``specserver_advisor.perf.adaptive``), fed with every verify's accepted drafts; a zero-step batch
still verifies (one token, counted in the accept length, as SGLang's trivial verify is), and
``sglang:spec_num_steps`` reads the active steps at each decode report (0 before the first, as
SGLang's scheduler stats start). The load gauges (running, queued, KV usage) are set
where SGLang's scheduler metrics set them (``_report_load``), not every step. Time runs
``--time-scale`` times faster than the modelled GPU; everything reported (metrics, meta_info)
is in modelled seconds.
Used by server.py (the HTTP API) and tested directly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.perf import adaptive
from specserver_advisor.perf.model import chunk_tokens, gpu_step_time
from specserver_advisor.sglang import cudagraphs
from specserver_engine.sim.acceptance import (
    continuation_probability,
    draw_commit,
    long_context_factor,
    mean_accept,
)
from specserver_engine.sim.config import SimConfig
from specserver_engine.sim.metrics import EngineMetrics
from specserver_engine.sim.steps import PrefillPiece, decodes_run, prefill_pieces, step_seconds

LOG_INTERVAL_STEPS = 40  # --decode-log-interval: gauges average over this many steps


@dataclass
class Chunk:
    """Tokens committed for one request in one step."""

    tokens: int
    finished: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    #: Modelled seconds since start at the end of the step that committed them.
    at: float = 0.0


@dataclass
class SimRequest:
    """One request inside the simulator."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    output_tokens: int
    kind: str
    streaming: bool
    arrival: float = 0.0
    first_token_at: float | None = None
    last_chunk_at: float = 0.0
    generated: int = 0
    prefilled: int = 0
    verify_ct: int = 0
    correct_drafts: int = 0
    proposed_drafts: int = 0
    accept_histogram: list[int] = field(default_factory=list)
    chunks: asyncio.Queue[Chunk] = field(default_factory=asyncio.Queue)

    @property
    def reserved(self) -> int:
        return self.prompt_tokens + self.max_new_tokens


class SimEngine:
    """Continuous-batching scheduler over modelled time."""

    def __init__(
        self, cfg: SimConfig, metrics: EngineMetrics | None, modelled_clock: bool = False
    ) -> None:
        self.cfg = cfg
        #: Time is the modelled steps alone, never the wall clock (in-process benchmarks that
        #: must not depend on the machine's load; no sleeping).
        self.modelled_clock = modelled_clock
        self.metrics = metrics
        self.rng = random.Random(cfg.seed)
        self.started = time.monotonic()
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.prefilling: deque[SimRequest] = deque()  # admitted, prompt not all prefilled
        self.used_tokens = 0
        self.wake = asyncio.Event()
        self.lifetime_tokens = 0
        self.lifetime_verify = 0
        self.window: deque[tuple[float, int, int, int, int]] = deque(maxlen=LOG_INTERVAL_STEPS)
        self.last_step_s = 0.0
        self.clock = 0.0  # modelled time at the end of the last step
        #: SGLang's ``forward_ct_decode``: decode batches run, for the decode log's cadence.
        self.decode_batches = 0
        self.log_interval = max(1, int(cfg.parsed.get("decode_log_interval") or LOG_INTERVAL_STEPS))
        #: The running batch when this step's prefill batch was built (its report's count).
        self.prefill_running = 0
        r = cfg.plan.resolution
        self.spec_shape = (
            int(r.get("speculative_num_steps") or 0),
            int(r.get("speculative_eagle_topk") or 1),
        )
        self.draft_context = cfg.plan.context.draft
        self._step_cache: dict[tuple[int, int, int], float] = {}
        self.adaptive = _adaptive_controller(cfg)
        self.active_steps = self.spec_shape[0]
        if metrics:
            # SGLang's scheduler stats start at 0 steps / 0 draft tokens; the first decode
            # report sets the gauges (``_report_load``).
            metrics.set_static(cfg.pool_tokens, cfg.context_len, 0, 0)

    # -- time ------------------------------------------------------------------------------
    def now(self) -> float:
        """Modelled seconds since start."""
        if self.modelled_clock:
            return self.clock
        return (time.monotonic() - self.started) * self.cfg.time_scale

    def ready(self) -> bool:
        return self.now() >= self.cfg.startup_s

    # -- requests --------------------------------------------------------------------------
    def submit(
        self,
        prompt_tokens: int,
        max_new_tokens: int,
        ignore_eos: bool,
        kind: str,
        streaming: bool,
        rid: str,
    ) -> SimRequest:
        """Queue a request; its chunks arrive on ``request.chunks``."""
        prompt = max(1, min(prompt_tokens, self.cfg.context_len - 1))
        max_new = max(1, min(max_new_tokens, self.cfg.context_len - prompt))
        out = max_new if ignore_eos else max(1, int(max_new * self.rng.uniform(0.3, 1.0)))
        req = SimRequest(rid, prompt, max_new, out, kind, streaming, arrival=self.now())
        req.last_chunk_at = req.arrival
        self.waiting.append(req)
        self.wake.set()
        return req

    def avg_accept_length(self) -> float:
        """Lifetime average (``internal_states[0].avg_spec_accept_length``)."""
        return self.lifetime_tokens / self.lifetime_verify if self.lifetime_verify else 0.0

    def flush(self) -> bool:
        """``/flush_cache``: resets lifetime accept stats when idle."""
        if self.running or self.waiting:
            return False
        self.lifetime_tokens = self.lifetime_verify = 0
        return True

    # -- scheduling ------------------------------------------------------------------------
    def _admissible(self) -> int:
        """How many waiting heads ``--max-running-requests`` and the KV pool let in now."""
        cap = self.cfg.max_running_requests
        running, used, n = len(self.running), self.used_tokens, 0
        for head in self.waiting:
            if running >= cap or (used + head.reserved > self.cfg.pool_tokens and running):
                break
            running, used, n = running + 1, used + head.reserved, n + 1
        return n

    def _admit(self, count: int) -> None:
        """Move the first ``count`` waiting requests into the running set (prefill pending)."""
        for _ in range(count):
            head = self.waiting.popleft()
            self.used_tokens += head.reserved
            self.running.append(head)
            self.prefilling.append(head)

    def _decode_gpu_s(self, batch: list[SimRequest]) -> tuple[float, int | None]:
        """The GPU seconds of ``batch``'s decode step and the draft steps it runs (SGLang's
        adaptive tier for the batch; None: the launch's)."""
        if not batch:
            return 0.0, None
        steps = self.adaptive.steps_for_batch(len(batch)) if self.adaptive else None
        if steps is not None:
            self.active_steps = steps  # the gauges read it at the next decode report
        ctx = sum(r.prompt_tokens + r.generated for r in batch) // len(batch)
        key = (len(batch), ctx // 64, -1 if steps is None else steps)
        if key not in self._step_cache:
            scn = dataclasses.replace(self.cfg.plan.scenario, input_len=ctx, output_len=0)
            self._step_cache[key] = gpu_step_time(
                scn, len(batch), self.cfg.speculative, _calibration(), steps=steps
            )
        return self._step_cache[key], steps

    def _next_step(self) -> tuple[list[PrefillPiece], list[SimRequest], float]:
        """This step's prefill pieces (admitting the waiting prompts they start), the decodes
        that advance with them, and its seconds.
        """
        scn = self.cfg.plan.scenario
        ready = [r for r in self.running if r.first_token_at is not None]
        self.prefill_running = len(ready)
        in_progress = len(self.prefilling)
        candidates = list(self.waiting)[: self._admissible()]
        pending = [(r.prefilled, r.prompt_tokens) for r in self.prefilling]
        pending += [(0, r.prompt_tokens) for r in candidates]
        pieces = prefill_pieces(
            pending,
            chunk_tokens(scn),
            self.cfg.max_prefill_tokens,
            len(ready) if scn.mixed_chunk else 0,
        )
        self._admit(sum(1 for p in pieces if p.index >= in_progress))
        decoding = ready if decodes_run(pieces, scn.mixed_chunk) else []
        decode_gpu_s, steps = self._decode_gpu_s(decoding)
        step_s = step_seconds(
            scn, pieces, decode_gpu_s, len(decoding), self.cfg.speculative, _calibration(), steps
        )
        return pieces, decoding, step_s

    async def run(self) -> None:
        """The scheduler loop; runs until cancelled."""
        while True:
            if not self.running and not self.waiting:
                self._report_load(0)  # on_idle: the gauge is stale, published at once
                self._update_gauges()
                self.wake.clear()
                await self.wake.wait()
                continue
            pieces, decoding, step_s = self._next_step()
            # Sleep to an absolute deadline on the modelled timeline, so the event loop's own
            # work (HTTP, bookkeeping) does not stretch modelled time when it is scaled up.
            start = max(self.clock, self.now())
            self.clock = start + step_s
            await asyncio.sleep(max(0.0, (self.clock - self.now()) / self.cfg.time_scale))
            now = self.clock
            self.last_step_s = step_s
            prefilled = [self.prefilling[p.index] for p in pieces]
            for r, p in zip(prefilled, pieces, strict=True):
                r.prefilled = p.end
            for r in prefilled:
                if r.prefilled < r.prompt_tokens:
                    continue  # more chunks to come
                self.prefilling.remove(r)
                r.first_token_at = now
                if self.metrics:
                    self.metrics.ttft.labels(**self.metrics.streaming(r.streaming)).observe(
                        now - r.arrival
                    )
                self._emit(r, 1, now)
            if decoding:
                self._decode(decoding, now, step_s)
            else:
                self.window.append((step_s, 0, 0, 0, 0))  # a prefill-only step
            if pieces:
                self._report_load(self.prefill_running)
            else:
                self.decode_batches += 1
                if self.decode_batches % self.log_interval == 0:
                    self._report_load(len(decoding), decode=True)
            self._update_gauges()

    def _decode(self, batch: list[SimRequest], now: float, step_s: float) -> None:
        committed = verifies = correct = proposed = 0
        algo = self.cfg.plan.resolution.algorithm or ""
        # Adaptive: this batch drafts the tier's steps. At 0 SGLang still verifies (a 1-node
        # tree rooted at the bonus token: ``_build_trivial_verify_input``): one token, no
        # correct draft, and the verify counts in the accept length and verify counts.
        steps = self.active_steps if self.adaptive else self.cfg.depth
        accepted_per_request: list[int] = []
        for r in batch:
            if self.cfg.speculative and steps == 0:
                tokens = 1
                accepted_per_request.append(0)
                r.verify_ct += 1
                r.accept_histogram.append(0)
                verifies += 1
            elif self.cfg.speculative and steps > 0:
                mean = mean_accept(algo, *self.spec_shape, r.kind, self.cfg.accept_override)
                mean = 1 + (mean - 1) * long_context_factor(
                    r.prompt_tokens + r.generated, self.draft_context
                )
                # Acceptance per position is the draft's; the chain is as long as the steps.
                q = continuation_probability(mean, self.cfg.depth)
                tokens, accepted = draw_commit(self.rng, q, steps)
                accepted_per_request.append(accepted)
                r.verify_ct += 1
                r.correct_drafts += accepted
                r.proposed_drafts += steps
                proposed += steps
                r.accept_histogram.append(accepted)
                verifies += 1
                correct += accepted
            else:
                tokens = 1
            tokens = min(tokens, r.output_tokens - r.generated)
            committed += tokens
            self._emit(r, tokens, now)
        if self.cfg.speculative and verifies:
            self.lifetime_tokens += committed
            self.lifetime_verify += verifies
        if self.adaptive and batch:
            self.adaptive.on_verify(len(batch), accepted_per_request or [0] * len(batch))
        self.window.append((step_s, committed, verifies, correct, proposed))

    def _emit(self, r: SimRequest, tokens: int, now: float) -> None:
        if self.metrics and r.generated > 0:
            per_token = (now - r.last_chunk_at) / tokens
            for _ in range(tokens):
                self.metrics.itl.labels(**self.metrics.tok).observe(per_token)
        r.generated += tokens
        r.last_chunk_at = now
        finished = r.generated >= r.output_tokens
        meta: dict[str, Any] = {}
        if finished:
            self.running.remove(r)
            self.used_tokens -= r.reserved
            meta = self._finish(r, now)
            self.wake.set()
        r.chunks.put_nowait(Chunk(tokens, finished, meta, now))

    def _finish(self, r: SimRequest, now: float) -> dict[str, Any]:
        e2e = now - r.arrival
        first = r.first_token_at if r.first_token_at is not None else now
        meta: dict[str, Any] = {
            "id": r.rid,
            "finish_reason": {"type": "length", "length": r.output_tokens}
            if r.output_tokens >= r.max_new_tokens
            else {"type": "stop", "matched": 151645},
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.generated,
            "cached_tokens": 0,
            "reasoning_tokens": 0,
            "weight_version": "default",
            "num_retractions": 0,
            "e2e_latency": e2e,
        }
        if self.cfg.speculative and r.verify_ct:
            ndt = max(self.cfg.depth, *r.accept_histogram) + 1
            hist = [r.accept_histogram.count(i) for i in range(ndt)]
            meta.update(
                {
                    "spec_accept_rate": r.correct_drafts / max(1, r.proposed_drafts),
                    "spec_accept_length": r.generated / r.verify_ct,
                    "spec_num_correct_drafts": r.correct_drafts,
                    "spec_num_proposed_drafts": r.proposed_drafts,
                    "spec_verify_ct": r.verify_ct,
                    "spec_correct_drafts_histogram": hist,
                }
            )
        m = self.metrics
        if m:
            labels = m.streaming(r.streaming)
            m.e2e.labels(**labels).observe(e2e)
            if r.generated > 1:
                m.tpot.labels(**labels).observe((now - first) / (r.generated - 1))
            m.prompt_tokens.labels(**labels).inc(r.prompt_tokens)
            m.generation_tokens.labels(**labels).inc(r.generated)
            m.num_requests.labels(**labels).inc()
            if r.verify_ct:
                m.spec_verify_calls.labels(**m.tok).inc(r.verify_ct)
        return meta

    def _draft_tokens(self) -> int:
        if self.adaptive:
            return self.active_steps + 1
        return int(self.cfg.plan.resolution.get("speculative_num_draft_tokens") or 0)

    def _report_load(self, running: int, decode: bool = False) -> None:
        """Set the load gauges where SGLang 0.5.23's scheduler metrics do (metrics_reporter):
        each prefill batch's report (``report_prefill_stats``: the running batch as it was when
        the prefill batch was built, which excludes the prompts it prefills), every
        ``--decode-log-interval`` decode batches (``report_decode_stats``: the decode batch) and
        when idle (``_maybe_log_idle_metrics``: 0). The queue and the KV pool go with them.
        Between reports the gauges hold, so right after a closed loop's wave finishes together
        the next wave's prefill report reads 0 running until the next decode report.
        """
        m = self.metrics
        if not m:
            return
        s = m.sched
        if decode and self.cfg.speculative:
            # ``report_decode_stats``: the draft worker's active steps (``spec_num_steps``,
            # with ``spec_num_draft_tokens`` = steps + 1 at topk 1), held between reports.
            m.spec_num_steps.labels(**s).set(self.active_steps)
            m.spec_num_draft_tokens.labels(**s).set(self._draft_tokens())
        m.num_running_reqs.labels(**s).set(running)
        m.num_queue_reqs.labels(**s).set(len(self.waiting))
        m.num_used_tokens.labels(**s).set(self.used_tokens)
        m.token_usage.labels(**s).set(self.used_tokens / max(1, self.cfg.pool_tokens))

    def _update_gauges(self) -> None:
        m = self.metrics
        if not m:
            return
        s = m.sched
        secs = sum(w[0] for w in self.window)
        tokens = sum(w[1] for w in self.window)
        m.gen_throughput.labels(**s).set(tokens / secs if secs else 0.0)
        verifies = sum(w[2] for w in self.window)
        if self.cfg.speculative and verifies:
            m.spec_accept_length.labels(**s).set(tokens / verifies)
            m.spec_accept_rate.labels(**s).set(
                sum(w[3] for w in self.window) / max(1, sum(w[4] for w in self.window))
            )


def _adaptive_controller(cfg: SimConfig) -> adaptive.AdaptiveController | None:
    """SGLang's adaptive steps when the launch asks for them and 0.5.23 supports it."""
    r, args = cfg.plan.resolution, cfg.parsed.values
    if not cfg.speculative or not args.get("speculative_adaptive"):
        return None
    topk = r.get("speculative_eagle_topk")
    dp = bool(args.get("enable_dp_attention"))
    if adaptive.unsupported_reason(r.algorithm, int(topk) if topk else None, dp):
        return None
    graphs = cudagraphs.graph_batch_sizes(cfg.plan.scenario.cuda_graph_max_bs, speculative=True)
    steps = int(r.get("speculative_num_steps") or adaptive.initial_steps())
    return adaptive.AdaptiveController(launch_steps=steps, graph_sizes=graphs)


def _calibration() -> Any:
    from specserver_advisor.perf.constants import DEFAULT_CALIBRATION

    return DEFAULT_CALIBRATION
