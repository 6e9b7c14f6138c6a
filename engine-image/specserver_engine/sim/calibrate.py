"""Simulator vs field: the L4 Qwen3-8B sweep run against time-scaled simulated engines.

``python -m specserver_engine.sim.calibrate`` starts a simulated engine with and without EAGLE-3
(clock locked at 900 MHz as in the field runs), drives each dataset kind with the load
generator and prints TPOT at 8 users, output tok/s at 32 users and TTFT at 32 users next to
the published figures, with the ratios. Takes a few minutes on 2 cores, and the event loop's lag
on a loaded machine adds to the modelled times. ``--modelled-clock`` drives the simulated engine
in-process instead, its clock advancing by the modelled steps alone (``SimEngine``'s
``modelled_clock``): the same scheduler and step times without HTTP, the same figures on any
machine, in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import subprocess
import sys
import time
import urllib.request
from typing import Any

from specserver_engine import loadgen
from specserver_engine.ports import free_loopback_port
from specserver_engine.sim.config import build_sim_config
from specserver_engine.sim.engine import SimEngine

L4_ARGS = ["--model-path", "Qwen/Qwen3-8B", "--mem-fraction-static", "0.85", "--sim-gpu", "L4"]
EAGLE3 = [
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "Tengyunw/qwen3_8b_eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]
#: Dataset -> (prompt kind, input tokens, output tokens, ignore_eos). random is the field's
#: 512/128 ignore_eos run; the others are typical lengths of those datasets (assumed).
DATASETS = {
    "random": ("random", 512, 128, True),
    "ShareGPT": ("chat", 300, 220, False),
    "GSM8K": ("math", 120, 180, False),
    "code": ("code", 200, 260, False),
}
#: Published figures (default, EAGLE-3): TPOT ms at 8 users, output tok/s at 32 users (900 MHz).
FIELD = {
    "random": ((67.9, 36.6), (252, 240)),
    "ShareGPT": ((67.5, 41.3), (284.5, 280)),
    "GSM8K": ((65.5, 33.8), (397, 654)),
    "code": ((66.15, 36.8), (365.5, 573.5)),
}
FIELD_TTFT_32 = (2970, 8040)  # random, unlocked clocks: default, EAGLE-3


def _start(extra: list[str], scale: float, clock: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_loopback_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specserver_engine.cli",
            "simulate",
            *L4_ARGS,
            *extra,
            "--time-scale",
            str(scale),
            "--sim-clock-scale",
            str(clock),
            "--sim-startup-seconds",
            "0",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"{url}/ready", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("simulator did not start")


def measure(
    spec: bool, users: int, dataset: str, scale: float, clock: float, rounds: int
) -> dict[str, Any]:
    """One loadgen run against a fresh simulator; summary in modelled time."""
    kind, inp, out, ignore = DATASETS[dataset]
    proc, url = _start(EAGLE3 if spec else [], scale, clock)
    try:
        seg = loadgen.Segment(users, None, users * rounds, kind)
        results, wall = asyncio.run(loadgen.run_segment(url, seg, inp, out, ignore))
        return loadgen.summarise(results, wall, scale, users)
    finally:
        proc.terminate()
        proc.wait()


def measure_modelled(
    spec: bool, users: int, dataset: str, clock: float, rounds: int
) -> dict[str, Any]:
    """``measure`` on an in-process engine whose time is its modelled steps alone."""
    kind, inp, out, ignore = DATASETS[dataset]
    argv = [*L4_ARGS, *(EAGLE3 if spec else []), "--sim-clock-scale", str(clock)]
    return run_modelled(argv, users, rounds, loadgen.PromptLengths(inp), out, ignore, kind)


def run_modelled(
    argv: list[str],
    users: int,
    rounds: int,
    prompts: loadgen.PromptLengths,
    output_len: int,
    ignore_eos: bool = True,
    kind: str = "random",
) -> dict[str, Any]:
    """``users`` closed-loop users of ``rounds`` requests each (prompt lengths drawn from
    ``prompts``) against an in-process simulated engine of ``argv`` on its modelled clock; the
    load generator's summary (ITL: the gaps between a request's streamed chunks, one a step).
    """
    engine = SimEngine(build_sim_config([*argv, "--sim-startup-seconds", "0"], env={}), None, True)

    async def user(index: int) -> list[loadgen.Result]:
        results = []
        for k in range(rounds):
            req = engine.submit(prompts.draw(), output_len, ignore_eos, kind, True, f"{index}-{k}")
            times, tokens = [], 0
            while True:
                chunk = await req.chunks.get()
                times.append(chunk.at)
                tokens += chunk.tokens
                if chunk.finished:
                    break
            itls = [b - a for a, b in itertools.pairwise(times)]
            accept = chunk.meta.get("spec_accept_length")
            results.append(
                loadgen.Result(
                    times[0] - req.arrival, times[-1] - req.arrival, tokens, itls, accept
                )
            )
        return results

    async def run() -> list[loadgen.Result]:
        loop = asyncio.create_task(engine.run())
        try:
            per_user = await asyncio.gather(*(user(i) for i in range(users)))
        finally:
            loop.cancel()
        return [r for rs in per_user for r in rs]

    results = asyncio.run(run())
    return loadgen.summarise(results, engine.clock, 1.0, users)


def main(argv: list[str] | None = None) -> int:
    """Print the simulator-vs-field table."""
    p = argparse.ArgumentParser(prog="python -m specserver_engine.sim.calibrate")
    p.add_argument("--time-scale", type=float, default=4.0)
    p.add_argument("--rounds", type=int, default=3, help="requests per user")
    p.add_argument(
        "--modelled-clock",
        action="store_true",
        help="run the engines in-process on their modelled clock (independent of the load)",
    )
    a = p.parse_args(argv)

    def measure_one(spec: bool, users: int, dataset: str, clock: float) -> dict[str, Any]:
        if a.modelled_clock:
            return measure_modelled(spec, users, dataset, clock, a.rounds)
        return measure(spec, users, dataset, a.time_scale, clock, a.rounds)

    locked = 900 / 2040
    print(
        "| dataset | figure | field default | sim default | ratio | field EAGLE-3 | "
        "sim EAGLE-3 | ratio |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for dataset, (tpot, tput) in FIELD.items():
        rows = []
        for users, key, field in ((8, "median_tpot_ms", tpot), (32, "output_throughput", tput)):
            sims = [measure_one(spec, users, dataset, locked)[key] for spec in (False, True)]
            label = "TPOT@8 ms" if users == 8 else "tok/s@32"
            rows.append(
                f"| {dataset} | {label} | {field[0]} | {sims[0]:.1f} | "
                f"{sims[0] / field[0]:.2f} | {field[1]} | {sims[1]:.1f} | "
                f"{sims[1] / field[1]:.2f} |"
            )
        print("\n".join(rows), flush=True)
    ttft = [measure_one(spec, 32, "random", 1.0)["median_ttft_ms"] for spec in (False, True)]
    print(
        f"| random (boost clock) | TTFT@32 ms | {FIELD_TTFT_32[0]} | {ttft[0]:.0f} | "
        f"{ttft[0] / FIELD_TTFT_32[0]:.2f} | {FIELD_TTFT_32[1]} | {ttft[1]:.0f} | "
        f"{ttft[1] / FIELD_TTFT_32[1]:.2f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
