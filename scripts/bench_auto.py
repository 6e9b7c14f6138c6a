"""bench-auto: Auto against On, Off and On+adaptive, measured side by side in one run.

Starts the local stack (control plane, Prometheus, the operator, the node agent running a
simulated SGLang engine per engine pod) on this script's own ports, applies four SpecServers
that differ only in how speculation is controlled (``auto``: mode Auto; ``on``; ``off``;
``on_adaptive``: mode Enabled with SGLang's ``--speculative-adaptive``), and drives every one with
the same recorded schedule at the same time: low load of code prompts, an overload of chat,
low load of math. Reports per arm and phase the measured goodput (output tokens/s of requests
within the TTFT and TPOT objectives, modelled seconds), TTFT P99, switches, failed requests
and the bands the Auto policy learned, as a table or JSON (``--format json``). Stops
everything it started. Run through ``scripts/bench-auto``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import demo  # noqa: E402
from specserver_advisor.policy.model import learned_preference  # noqa: E402
from specserver_operator.core import policystate  # noqa: E402

NAMESPACE = "default"
TIME_SCALE = demo.TIME_SCALE
TTFT_SLO_S, TPOT_SLO_MS = demo.TTFT_SLO_S, demo.TPOT_SLO_MS
#: arm -> (spec.mode, speculative.adaptive)
ARMS: dict[str, tuple[str, bool]] = {
    "auto": ("Auto", False),
    "on": ("Enabled", False),
    "off": ("Disabled", False),
    "on_adaptive": ("Enabled", True),
}


@dataclass(frozen=True)
class Phase:
    """One step of the recorded schedule (wall seconds; modelled = wall x TIME_SCALE)."""

    name: str
    users: int
    seconds: float
    kind: str


SCHEDULE = (
    Phase("low", 4, 60.0, "code"),
    # 24 users: past the L4 draft pool (13 running), within the pool without it (36).
    Phase("overload", 24, 90.0, "chat"),
    Phase("low_again", 4, 90.0, "math"),
)


@dataclass
class PhaseStats:
    """What one arm's clients saw in one phase."""

    good_tokens: int = 0
    tokens: int = 0
    failed: int = 0
    ttfts: list[float] = field(default_factory=list)
    #: Failed requests by cause (exception type or HTTP status), for the log.
    causes: dict[str, int] = field(default_factory=dict)

    def fail(self, cause: str) -> None:
        self.failed += 1
        self.causes[cause] = self.causes.get(cause, 0) + 1


def specserver(arm: str, gpu: str, auto_adaptive: bool = False) -> dict[str, Any]:
    """The demo's SpecServer, renamed, with this arm's mode (and SGLang's adaptive steps).

    ``auto_adaptive``: the Auto arm's On engine runs ``--speculative-adaptive`` (two-level).
    """
    mode, adaptive = ARMS[arm]
    adaptive = adaptive or (auto_adaptive and arm == "auto")
    doc = copy.deepcopy(demo.SPEC)
    doc["metadata"] = {"name": name_of(arm), "namespace": NAMESPACE}
    doc["spec"]["mode"] = mode
    doc["spec"]["resources"]["gpuType"] = gpu
    if adaptive:
        doc["spec"]["speculative"]["adaptive"] = True
    return doc


def name_of(arm: str) -> str:
    return "qwen3-8b-" + arm.replace("_", "-")


#: The last endpoint read per arm: the node agent rewrites the file while clients read it.
_LAST_ENDPOINT: dict[str, str] = {}


def endpoint(state: Path, arm: str) -> str | None:
    """Where the arm's Service routes now (the last one seen while the file is being rewritten)."""
    try:
        urls = json.loads((state / "agent" / "endpoints.json").read_text())
    except (OSError, ValueError):
        return _LAST_ENDPOINT.get(arm)
    url = (urls.get(f"{NAMESPACE}/{name_of(arm)}") or [None])[0]
    if url:
        _LAST_ENDPOINT[arm] = url
    return url


async def user(
    state: Path, arm: str, phase: Phase, stop_at: float, out: PhaseStats, s: aiohttp.ClientSession
) -> None:
    """A closed-loop client: one streaming request after another until the phase ends."""
    body = {
        "text": "hello " * 512,
        "stream": True,
        "prompt_kind": phase.kind,
        "sampling_params": {"max_new_tokens": 128, "ignore_eos": True},
    }
    while time.monotonic() < stop_at:
        url = endpoint(state, arm)
        if url is None:
            out.fail("no endpoint")
            await asyncio.sleep(0.5)
            continue
        start, first, tokens = time.monotonic(), 0.0, 0
        try:
            async with s.post(f"{url}/generate", json=body) as resp:
                resp.raise_for_status()
                async for raw in resp.content:
                    line = raw.decode().strip()
                    if line.startswith("data:") and line != "data: [DONE]":
                        first = first or time.monotonic()
                        tokens = json.loads(line[5:])["meta_info"]["completion_tokens"]
        except (TimeoutError, aiohttp.ClientError, ValueError, KeyError) as exc:
            out.fail(type(exc).__name__)
            await asyncio.sleep(0.5)
            continue
        if not first:
            out.fail("no token")
            continue
        ttft = (first - start) * TIME_SCALE
        tpot = (time.monotonic() - first) * TIME_SCALE * 1000 / max(1, tokens - 1)
        out.tokens += tokens
        out.ttfts.append(ttft)
        if ttft <= TTFT_SLO_S and tpot <= TPOT_SLO_MS:
            out.good_tokens += tokens


async def drive(stack: demo.Stack, schedule: tuple[Phase, ...]) -> dict[str, list[PhaseStats]]:
    """The load, with the demo's watchdog: a process of the stack that exits stops the run."""
    load = asyncio.create_task(run_phases(stack.state, schedule))
    watchdog = asyncio.create_task(demo.guard(stack))
    done, _ = await asyncio.wait({load, watchdog}, return_when=asyncio.FIRST_COMPLETED)
    for task in (load, watchdog):
        task.cancel()
    return load.result() if load in done else {}


async def run_phases(state: Path, schedule: tuple[Phase, ...]) -> dict[str, list[PhaseStats]]:
    """Every arm gets the same users of the same kind in every phase, at the same time."""
    stats: dict[str, list[PhaseStats]] = {arm: [] for arm in ARMS}
    timeout = aiohttp.ClientTimeout(total=300)
    limits = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=limits) as session:
        for phase in schedule:
            print(
                f"== {time.strftime('%H:%M:%SZ', time.gmtime())} {phase.name}: "
                f"{phase.users} users per arm, {phase.kind} prompts, "
                f"{phase.seconds:.0f}s ({phase.seconds * TIME_SCALE:.0f}s modelled)",
                file=sys.stderr,
                flush=True,
            )
            stop_at = time.monotonic() + phase.seconds
            jobs = []
            for arm in ARMS:
                stats[arm].append(PhaseStats())
                jobs += [
                    user(state, arm, phase, stop_at, stats[arm][-1], session)
                    for _ in range(phase.users)
                ]
            await asyncio.gather(*jobs)
    return stats


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)], 2)


def ready(stack: demo.Stack, arm: str) -> bool:
    obj = json.loads(stack.kubectl("get", "sps", name_of(arm), "-n", NAMESPACE, "-o", "json"))
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def wait_settled(stack: demo.Stack, state: Path, timeout_s: float, quiet_s: float = 15) -> None:
    """Every arm Ready with an endpoint, and no endpoint moved for ``quiet_s`` seconds.

    The first engine of a SpecServer can be replaced once its status settles (a computed
    value lands in the template); load starts after that, so no arm starts on a rollout.
    """
    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while True:
        stack.check()
        now = time.monotonic()
        if now > deadline:
            waiting = [arm for arm in ARMS if endpoint(state, arm) is None or not ready(stack, arm)]
            raise RuntimeError(
                f"the arms did not settle (Ready, endpoints steady for {quiet_s:.0f}s) in "
                f"{timeout_s:.0f}s; not Ready or without an endpoint: {waiting or 'none'} "
                "(a loaded machine: lower --time-scale; see the node agent's log in --state-dir)"
            )
        current = {arm: endpoint(state, arm) for arm in ARMS}
        if current != last:
            last, since = current, now
        elif (
            None not in current.values()
            and now - since >= quiet_s
            and all(ready(stack, arm) for arm in ARMS)
        ):
            return
        time.sleep(1)


#: Wall seconds the arms may take to settle at ``demo.TIME_SCALE`` 10 on a quiet machine: four
#: engines start (30 modelled seconds each, some twice), plus the operator's first cycles.
SETTLE_S_AT_SCALE_10 = 300.0


def settle_timeout(time_scale: float) -> float:
    """The settle timeout for a time scale: engines start ``10 / time_scale`` times slower."""
    return SETTLE_S_AT_SCALE_10 * max(1.0, 10.0 / time_scale)


def busy_ports(ports: demo.Ports) -> list[str]:
    """The loopback ports this run needs that something else holds, each with its use."""
    wanted = {
        ports.apiserver: "apiserver",
        ports.apiserver + 1: "etcd client",
        ports.apiserver + 2: "etcd peer",
        ports.prometheus: "Prometheus",
        ports.health: "operator health",
    }
    busy = []
    for port, use in wanted.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As the servers bind: a port held only by closed connections (TIME_WAIT, after the
            # last run) is free; one that something listens on is not.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                busy.append(f"{port} ({use})")
    return busy


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections (Linux default 32768-60999)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def ephemeral_ports(ports: demo.Ports) -> list[int]:
    """The ports of this run (etcd's included) that an outgoing connection may take first."""
    low, high = ephemeral_range()
    wanted = (ports.apiserver, ports.apiserver + 1, ports.apiserver + 2)
    return [p for p in (*wanted, ports.prometheus, ports.health) if low <= p <= high]


def auto_record(stack: demo.Stack) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The Auto arm's decision ledger and learned bands (its policy state)."""
    obj = json.loads(stack.kubectl("get", "sps", name_of("auto"), "-n", NAMESPACE, "-o", "json"))
    status = obj.get("status") or {}
    ledger = [
        {k: e.get(k) for k in ("time", "action", "reason", "mode")}
        for e in status.get("decisions") or []
    ]
    bands: dict[str, str] = {}
    state = policystate.parse(status.get("policyState"))
    if state is not None:
        for band in state.bands:
            pref = learned_preference(state, band)
            if pref:
                bands[band] = pref
    return ledger, bands


def summarise(
    stats: dict[str, list[PhaseStats]],
    schedule: tuple[Phase, ...],
    ledger: list[dict[str, Any]],
    bands: dict[str, str],
    gpu: str,
) -> dict[str, Any]:
    """The documented JSON: arms -> goodput, ttft_p99_s, switches, failed_requests, phases."""
    total_s = sum(p.seconds for p in schedule) * TIME_SCALE
    switches = sum(1 for e in ledger if e.get("action") in ("enable", "disable"))
    arms: dict[str, Any] = {}
    for arm, phases in stats.items():
        arms[arm] = {
            "goodput": round(sum(p.good_tokens for p in phases) / total_s, 1),
            "ttft_p99_s": p99([t for p in phases for t in p.ttfts]),
            "switches": switches if arm == "auto" else 0,
            "failed_requests": sum(p.failed for p in phases),
            "phases": [
                {
                    "name": ph.name,
                    "goodput": round(st.good_tokens / (ph.seconds * TIME_SCALE), 1),
                    "ttft_p99_s": p99(st.ttfts),
                    "failed_requests": st.failed,
                }
                for ph, st in zip(schedule, phases, strict=True)
            ],
        }
    arms["auto"]["learned_bands"] = bands
    arms["auto"]["decisions"] = ledger
    return {
        "gpu": gpu,
        "time_scale": TIME_SCALE,
        "slo": {"ttft_s": TTFT_SLO_S, "tpot_ms": TPOT_SLO_MS},
        "schedule": [p.__dict__ for p in schedule],
        "arms": arms,
    }


def render(summary: dict[str, Any]) -> str:
    """The table: one row per arm, goodput per phase, then the whole schedule."""
    names = [p["name"] for p in summary["schedule"]]
    head = "| arm | goodput | " + " | ".join(names) + " | TTFT P99 s | switches | failed |"
    lines = [head, "|---|" + "---:|" * (len(names) + 4)]
    for arm, a in summary["arms"].items():
        per_phase = " | ".join(f"{p['goodput']:.1f}" for p in a["phases"])
        lines.append(
            f"| {arm} | {a['goodput']:.1f} | {per_phase} | {a['ttft_p99_s']} | "
            f"{a['switches']} | {a['failed_requests']} |"
        )
    bands = summary["arms"]["auto"]["learned_bands"]
    lines.append("")
    lines.append(f"learned bands (auto): {bands or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench-auto")
    parser.add_argument("--format", choices=["table", "json"], default="table")
    parser.add_argument("--gpu", default="L4", help="modelled card (L4: pool-bound; H100)")
    parser.add_argument("--state-dir", type=Path, default=REPO / ".devcluster" / "bench-auto")
    parser.add_argument(
        "--ports",
        type=demo.Ports.parse,
        default=demo.Ports(27453, 27457, 27458),
        metavar="APISERVER,PROMETHEUS,HEALTH",
        help="loopback ports (default 27453,27457,27458; etcd takes the two after APISERVER; "
        "keep them below the kernel's ephemeral range, where any outgoing connection may take "
        "one)",
    )
    parser.add_argument(
        "--two-level",
        action="store_true",
        help="the Auto arm's On engine runs SGLang's --speculative-adaptive (two-level control)",
    )
    parser.add_argument(
        "--phase-scale", type=float, default=1.0, help="multiply every phase's length"
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=demo.TIME_SCALE,
        help="simulated engines run this many times faster than the modelled GPU (lower it "
        "on a busy machine: a CPU stall of one wall second costs this many modelled seconds)",
    )
    args = parser.parse_args(argv)
    if args.time_scale <= 0:
        parser.error("--time-scale must be positive")
    global TIME_SCALE
    TIME_SCALE = demo.TIME_SCALE = args.time_scale  # the node agent reads demo's at start
    schedule = tuple(Phase(p.name, p.users, p.seconds * args.phase_scale, p.kind) for p in SCHEDULE)
    busy = busy_ports(args.ports)
    if busy:
        print(
            f"bench-auto: loopback port(s) in use: {', '.join(busy)}; another run or another "
            "user holds them: stop it or pass --ports APISERVER,PROMETHEUS,HEALTH "
            "(etcd takes the two after APISERVER)",
            file=sys.stderr,
        )
        return 2
    shared = ephemeral_ports(args.ports)
    if shared:
        low, high = ephemeral_range()
        print(
            f"bench-auto: warning: port(s) {', '.join(map(str, shared))} lie in the kernel's "
            f"ephemeral range {low}-{high}: any process's outgoing connection may take one "
            "while the stack starts ('address already in use'); prefer ports below it",
            file=sys.stderr,
        )
    args.state_dir.mkdir(parents=True, exist_ok=True)
    stack = demo.Stack(args.state_dir, args.ports)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the result
            stack.up()
        for arm in ARMS:
            stack.kubectl(
                "apply", "-f", "-", stdin=json.dumps(specserver(arm, args.gpu, args.two_level))
            )
        wait_settled(stack, args.state_dir, timeout_s=settle_timeout(args.time_scale))
        stats = asyncio.run(drive(stack, schedule))
        time.sleep(3)
        for arm, phases in stats.items():
            causes = [p.causes for p in phases if p.causes]
            if causes:
                print(f"bench-auto: {arm} failed requests: {causes}", file=sys.stderr)
        ledger, bands = auto_record(stack)
        summary = summarise(stats, schedule, ledger, bands, args.gpu)
        summary["two_level"] = args.two_level
        print(json.dumps(summary, indent=2) if args.format == "json" else render(summary))
    except (RuntimeError, subprocess.CalledProcessError) as exc:  # DemoFailed included
        print(f"bench-auto: {exc}", file=sys.stderr)
        return 1
    finally:
        stack.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
