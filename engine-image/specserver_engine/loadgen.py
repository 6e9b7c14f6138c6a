"""A closed-loop load generator for SGLang (real or simulated), printing bench_serving results.

``python -m specserver_engine.loadgen --url URL --schedule 4:60,32:120,4:60`` keeps N users busy
per segment (each sends its next request when the previous finishes, like bench_serving with
``--max-concurrency N``), streams ``/generate`` and prints median/P99 TTFT, TPOT, ITL, output
throughput and accept length. ``--time-scale S`` reports a simulator's modelled time (wall x S).
``--prompt-len`` draws each request's prompt length from a mix given as ``plan --prompt-len``
takes it (one length, equally likely lengths ``128,512,4096``, or percentiles
``p50=512,p99=8192``; the advisor's own parser), seeded by ``--seed``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from specserver_advisor.cli.plan import prompt_mix

#: Prompt lengths with their shares, as ``plan --prompt-len`` parses them.
PromptMix = tuple[tuple[int, float], ...]


@dataclass
class Result:
    """One finished request, in wall seconds."""

    ttft: float
    latency: float
    output_tokens: int
    itls: list[float] = field(default_factory=list)
    accept_length: float | None = None


@dataclass
class Segment:
    """``concurrency`` users for ``seconds`` (or ``requests`` requests)."""

    concurrency: int
    seconds: float | None = None
    requests: int | None = None
    kind: str = "random"


class PromptLengths:
    """Each request's prompt length: drawn from a mix (seeded), or ``input_len`` every time."""

    def __init__(self, input_len: int, mix: PromptMix = (), seed: int = 0) -> None:
        self.input_len = input_len
        self.lengths = [tokens for tokens, _ in mix]
        self.shares = [share for _, share in mix]
        self.rng = random.Random(seed)

    def draw(self) -> int:
        """The next request's prompt tokens."""
        if not self.lengths:
            return self.input_len
        return self.rng.choices(self.lengths, self.shares)[0]


def parse_schedule(text: str, kind: str) -> list[Segment]:
    """``4:60,32:120[:code],...`` -> segments (users:seconds[:prompt kind])."""
    out = []
    for part in text.split(","):
        bits = part.strip().split(":")
        if len(bits) not in (2, 3):
            raise ValueError(f"schedule item {part!r}: expected USERS:SECONDS[:KIND]")
        out.append(Segment(int(bits[0]), float(bits[1]), None, bits[2] if len(bits) == 3 else kind))
    return out


async def one_request(
    session: aiohttp.ClientSession,
    url: str,
    input_len: int,
    output_len: int,
    ignore_eos: bool,
    kind: str,
) -> Result:
    """Stream one /generate request and time it."""
    body = {
        "text": " ".join(["hello"] * input_len),
        "stream": True,
        "prompt_kind": kind,
        "sampling_params": {
            "max_new_tokens": output_len,
            "ignore_eos": ignore_eos,
            "temperature": 0,
        },
    }
    start = time.perf_counter()
    ttft, last, itls, tokens, meta = 0.0, start, [], 0, {}
    async with session.post(f"{url}/generate", json=body, headers={"X-Prompt-Kind": kind}) as resp:
        resp.raise_for_status()
        async for raw in resp.content:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            data = json.loads(line[5:])
            now = time.perf_counter()
            if not ttft:
                ttft = now - start
            else:
                itls.append(now - last)
            last = now
            meta = data.get("meta_info", {})
            tokens = int(meta.get("completion_tokens", tokens))
    return Result(ttft, last - start, tokens, itls, meta.get("spec_accept_length"))


async def run_segment(
    url: str, seg: Segment, input_len: int | PromptLengths, output_len: int, ignore_eos: bool
) -> tuple[list[Result], float]:
    """Keep ``seg.concurrency`` users busy; returns results and wall duration. ``input_len``:
    every prompt's tokens, or the lengths to draw them from."""
    prompts = input_len if isinstance(input_len, PromptLengths) else PromptLengths(input_len)
    results: list[Result] = []
    errors: list[str] = []
    start = time.perf_counter()
    issued = 0
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def user() -> None:
            nonlocal issued
            while True:
                if seg.seconds is not None and time.perf_counter() - start >= seg.seconds:
                    return
                if seg.requests is not None:
                    if issued >= seg.requests:
                        return
                    issued += 1
                try:
                    results.append(
                        await one_request(
                            session, url, prompts.draw(), output_len, ignore_eos, seg.kind
                        )
                    )
                except (TimeoutError, aiohttp.ClientError) as exc:
                    # A dropped connection (a restarting engine, a keep-alive race) is counted
                    # and the user carries on, as bench_serving does with failed requests.
                    errors.append(str(exc))
                    await asyncio.sleep(0.2)

        await asyncio.gather(*(user() for _ in range(seg.concurrency)))
    return results, time.perf_counter() - start


def summarise(
    results: list[Result], wall_s: float, scale: float, concurrency: int
) -> dict[str, Any]:
    """bench_serving's JSONL keys (times in ms, modelled time when scaled)."""

    def pct(values: list[float], q: float) -> float:
        if not values:
            return 0.0
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 * scale

    tpots = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in results if r.output_tokens > 1]
    itls = [i for r in results for i in r.itls]
    tokens = sum(r.output_tokens for r in results)
    accepts = [r.accept_length for r in results if r.accept_length]
    return {
        "max_concurrency": concurrency,
        "completed": len(results),
        "duration_s": round(wall_s * scale, 2),
        "output_throughput": round(tokens / (wall_s * scale), 2) if wall_s else 0.0,
        "median_ttft_ms": round(pct([r.ttft for r in results], 0.5), 1),
        "p99_ttft_ms": round(pct([r.ttft for r in results], 0.99), 1),
        "median_tpot_ms": round(pct(tpots, 0.5), 2),
        "p99_tpot_ms": round(pct(tpots, 0.99), 2),
        "median_itl_ms": round(pct(itls, 0.5), 2),
        "p99_itl_ms": round(pct(itls, 0.99), 2),
        "accept_length": round(statistics.fmean(accepts), 3) if accepts else None,
    }


def render(summary: dict[str, Any]) -> str:
    """The 'Serving Benchmark Result' block."""
    rows = [
        ("Max request concurrency", summary["max_concurrency"]),
        ("Successful requests", summary["completed"]),
        ("Benchmark duration (s)", summary["duration_s"]),
        ("Output token throughput (tok/s)", summary["output_throughput"]),
        ("Accept length", summary["accept_length"] or "-"),
        ("Median TTFT (ms)", summary["median_ttft_ms"]),
        ("P99 TTFT (ms)", summary["p99_ttft_ms"]),
        ("Median TPOT (ms)", summary["median_tpot_ms"]),
        ("P99 TPOT (ms)", summary["p99_tpot_ms"]),
        ("Median ITL (ms)", summary["median_itl_ms"]),
        ("P99 ITL (ms)", summary["p99_itl_ms"]),
    ]
    lines = ["============ Serving Benchmark Result ============"]
    lines += [f"{k:<40}{v:<10}" for k, v in rows]
    lines.append("=" * 50)
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run every segment; print each block and return the summaries."""
    if args.schedule:
        segments = parse_schedule(args.schedule, args.prompt_kind)
    else:
        segments = [Segment(args.concurrency, None, args.num_prompts, args.prompt_kind)]
    prompts = PromptLengths(args.input_len or 512, args.prompt_len or (), args.seed)
    out = []
    for seg in segments:
        results, wall = await run_segment(
            args.url.rstrip("/"), seg, prompts, args.output_len, not args.disable_ignore_eos
        )
        summary = summarise(results, wall, args.time_scale, seg.concurrency)
        summary["prompt_kind"] = seg.kind
        print(render(summary), flush=True)
        out.append(summary)
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    p = argparse.ArgumentParser(prog="python -m specserver_engine.loadgen")
    p.add_argument("--url", required=True)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--num-prompts", type=int, default=64)
    p.add_argument("--schedule", help="USERS:SECONDS[:KIND],... (overrides the two above)")
    p.add_argument("--input-len", type=int, help="every prompt's tokens (default 512)")
    p.add_argument(
        "--prompt-len",
        type=prompt_mix,
        help="varied prompt lengths, instead of --input-len (as plan --prompt-len): "
        "128,512,4096 or p50=512,p90=2048,p99=8192",
    )
    p.add_argument("--seed", type=int, default=0, help="seeds the prompt lengths drawn")
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument(
        "--disable-ignore-eos",
        action="store_true",
        help="real output lengths (the server decides when to stop)",
    )
    p.add_argument("--prompt-kind", default="random", choices=["code", "math", "chat", "random"])
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--output-file", help="append one JSON line per segment")
    args = p.parse_args(argv)
    if args.prompt_len is not None and args.input_len is not None:
        p.error("--prompt-len replaces --input-len: give one of them")
    try:
        summaries = asyncio.run(run(args))
    except (aiohttp.ClientError, ValueError) as exc:
        print(f"loadgen: error: {exc}", file=sys.stderr)
        return 2
    if args.output_file:
        with open(args.output_file, "a") as fh:
            for s in summaries:
                fh.write(json.dumps(s) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
