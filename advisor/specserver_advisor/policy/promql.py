"""PromQL for the auto-speculation signals, grouped by namespace and SpecServer.

Pure strings, shared by ``specserver-advisor replay --prometheus`` and the operator (one query per
signal per cycle for every SpecServer at once). SGLang's metrics reach PromQL as ``sglang:name``
or ``sglang_name`` depending on exposition negotiation, so every selector matches both.
"""

from __future__ import annotations

GROUP = ("namespace", "specserver")


def selector(metric: str, matchers: dict[str, str] | None = None) -> str:
    """``{__name__=~"sglang[:_]metric", ...}`` with exact-match label matchers."""
    parts = [f'__name__=~"sglang[:_]{metric}"']
    for key, value in sorted((matchers or {}).items()):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{key}="{escaped}"')
    return "{" + ", ".join(parts) + "}"


def signal_queries(matchers: dict[str, str] | None = None, window: str = "1m") -> dict[str, str]:
    """Observation field -> PromQL returning one series per (namespace, specserver)."""
    by = ", ".join(GROUP)
    quarter = _quarter(window)

    def quantile(q: float, metric: str) -> str:
        rate = f"rate({selector(metric + '_bucket', matchers)}[{window}])"
        return f"histogram_quantile({q}, sum by ({by}, le) ({rate}))"

    return {
        "accept_length": f"avg by ({by}) ({selector('spec_accept_length', matchers)})",
        # SGLang 0.5.23 sets these gauges only at its reports (each prefill batch, with the
        # running batch before it; every --decode-log-interval decode batches; idle) and holds
        # them between: a wave that starts from an empty batch reads 0 running until its 40th
        # decode batch. The most each pod reported running within the last quarter of the
        # window (at least one scrape interval, as the window spans four or more) is the batch
        # it carried; a whole window's maximum outlived the traffic the rates still saw (an
        # idle engine read a running request with no output). The queue stays the newest
        # report: a prompt waiting behind another's chunked prefill is reported queued for a
        # moment at any load, and a maximum would hold that moment (growth over consecutive
        # cycles would then read a steady 4-user load as a queue building).
        "running": f"sum by ({by}) (max_over_time({selector('num_running_reqs', matchers)}"
        f"[{quarter}]))",
        "queued": f"sum by ({by}) ({selector('num_queue_reqs', matchers)})",
        "kv_usage": f"max by ({by}) ({selector('token_usage', matchers)})",
        # Set at each decode report from the draft worker's active steps (0 with speculation
        # off): the window's maximum is 0 only when every report said no drafts ran.
        "spec_num_steps": f"max by ({by}) (max_over_time({selector('spec_num_steps', matchers)}"
        f"[{window}]))",
        "output_tok_s": f"sum by ({by}) (rate({selector('generation_tokens_total', matchers)}"
        f"[{window}]))",
        "ttft_p99_s": quantile(0.99, "time_to_first_token_seconds"),
        "ttft_p50_s": quantile(0.5, "time_to_first_token_seconds"),
        "tpot_p50_ms": f"1000 * {quantile(0.5, 'request_time_per_output_token_seconds')}",
        "itl_p99_ms": f"1000 * {quantile(0.99, 'inter_token_latency_seconds')}",
        "age_s": f"time() - max by ({by}) (timestamp({selector('num_running_reqs', matchers)}))",
    }


def _quarter(window: str) -> str:
    """A quarter of a PromQL range given in seconds or minutes ("60s", "1m"), in whole
    seconds (at least 1)."""
    unit = {"s": 1, "m": 60}[window[-1]]
    return f"{max(1, int(window[:-1]) * unit // 4)}s"
