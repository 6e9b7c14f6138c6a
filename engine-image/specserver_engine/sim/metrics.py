"""SGLang 0.5.23's Prometheus metrics, with its exact names, types, labels and buckets.

The simulated engine updates these; ``/metrics`` (only with ``--enable-metrics``) renders them
with prometheus_client's content negotiation, so names reach PromQL as ``sglang:x`` (classic
text) or ``sglang_x`` (OpenMetrics) exactly as a real server's do.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
E2E_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
    600,
    1200,
    1800,
    2400,
)
SCHEDULER_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
TOKENIZER_LABELS = ("model_name", "engine_type")


class EngineMetrics:
    """One engine's metric families in a private registry."""

    def __init__(self, model_name: str) -> None:
        # SGLang exports through the multiprocess collector, which writes no _created series.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry()
        r = self.registry
        self.sched = {
            "model_name": model_name,
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        self.tok = {"model_name": model_name, "engine_type": "unified"}

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"sglang:{name}", doc, SCHEDULER_LABELS, registry=r)

        self.num_running_reqs = gauge("num_running_reqs", "The number of running requests.")
        self.num_queue_reqs = gauge(
            "num_queue_reqs", "The number of requests in the waiting queue."
        )
        self.gen_throughput = gauge("gen_throughput", "The generation throughput (token/s).")
        self.token_usage = gauge("token_usage", "The token usage.")
        self.num_used_tokens = gauge("num_used_tokens", "The number of used tokens.")
        self.cache_hit_rate = gauge("cache_hit_rate", "The prefix cache hit rate.")
        self.spec_accept_length = gauge(
            "spec_accept_length", "The average acceptance length of speculative decoding."
        )
        self.spec_accept_rate = gauge(
            "spec_accept_rate", "The average acceptance rate of speculative decoding."
        )
        self.spec_num_steps = gauge("spec_num_steps", "Active speculative num steps.")
        self.spec_num_draft_tokens = gauge("spec_num_draft_tokens", "Active draft tokens.")
        self.max_total_num_tokens = gauge(
            "max_total_num_tokens", "Maximum total number of tokens in the KV pool."
        )
        self.context_len = gauge("context_len", "The context length.")
        self.page_size = gauge("page_size", "The page size.")

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(f"sglang:{name}", doc, labels, registry=r)

        stream = (*TOKENIZER_LABELS, "is_streaming")
        self.prompt_tokens = counter("prompt_tokens", "Number of prefill tokens processed.", stream)
        self.generation_tokens = counter(
            "generation_tokens", "Number of generation tokens processed.", stream
        )
        self.num_requests = counter("num_requests", "Number of requests processed.", stream)
        self.spec_verify_calls = counter(
            "spec_verify_calls", "Number of speculative verify calls.", TOKENIZER_LABELS
        )

        def histogram(
            name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]
        ) -> Histogram:
            return Histogram(f"sglang:{name}", doc, labels, buckets=buckets, registry=r)

        self.ttft = histogram(
            "time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            stream,
            TTFT_BUCKETS,
        )
        self.itl = histogram(
            "inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            TOKENIZER_LABELS,
            ITL_BUCKETS,
        )
        self.tpot = histogram(
            "request_time_per_output_token_seconds",
            "Histogram of request time per output token in seconds.",
            stream,
            ITL_BUCKETS,
        )
        self.e2e = histogram(
            "e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            stream,
            E2E_BUCKETS,
        )

    def set_static(self, pool_tokens: int, context_len: int, steps: int, draft_tokens: int) -> None:
        """Gauges SGLang sets once at start-up."""
        self.max_total_num_tokens.labels(**self.sched).set(pool_tokens)
        self.context_len.labels(**self.sched).set(context_len)
        self.page_size.labels(**self.sched).set(1)
        self.spec_num_steps.labels(**self.sched).set(steps)
        self.spec_num_draft_tokens.labels(**self.sched).set(draft_tokens)
        for g in (
            self.num_running_reqs,
            self.num_queue_reqs,
            self.gen_throughput,
            self.token_usage,
            self.num_used_tokens,
            self.cache_hit_rate,
            self.spec_accept_length,
            self.spec_accept_rate,
        ):
            g.labels(**self.sched).set(0)

    def streaming(self, is_streaming: bool) -> dict[str, str]:
        """Tokenizer labels with ``is_streaming``."""
        return {**self.tok, "is_streaming": "true" if is_streaming else "false"}
