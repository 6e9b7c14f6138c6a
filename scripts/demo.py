"""The README's main command: the whole closed loop on one machine, in a few minutes.

Starts the local control plane, Prometheus, the operator and the node agent (which runs
simulated engines for the pods the operator's Deployments create), applies one SpecServer in
mode Auto and, beside it, the same SpecServer always on (mode Enabled) and always off (mode
Disabled), drives the same load at all three (low -> high -> low, different prompt kinds),
prints each of Auto's decisions as it happens and ends with a summary that compares the three
measured goodputs; then stops everything it started. Run through
``scripts/demo`` (which prepares the virtualenv).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import devcluster  # noqa: E402
import devprom  # noqa: E402
import specserverdocs  # noqa: E402

NAMESPACE = "default"
NAME = "qwen3-8b-auto"
PHASES = [(4, 40.0, "code"), (40, 60.0, "chat"), (4, 90.0, "math")]  # users, wall s, kind
TIME_SCALE = 10.0
TTFT_SLO_S, TPOT_SLO_MS = 5.0, 200.0
#: The measured static arms applied beside Auto: name suffix -> spec.mode.
STATIC_ARMS = {"on": "Enabled", "off": "Disabled"}
# Demo pace: decisions every 5 s, a short dwell; defaults are in docs.
SPEC = specserverdocs.eagle3_auto(
    NAME,
    NAMESPACE,
    disableAfterBreaches=2,
    enableAfterPasses=3,
    minDwellSeconds=20,
    maxSwitchesPerHour=20,
    staleAfterSeconds=30,
    ttftP99SloSeconds=TTFT_SLO_S,
    # The standby starts in the new mode; traffic moves only once it is Ready.
    switchStrategy="BlueGreen",
)


class Ports(NamedTuple):
    """The loopback ports the demo listens on."""

    apiserver: int = 17443
    prometheus: int = 19190
    health: int = 18181

    @classmethod
    def parse(cls, text: str) -> Ports:
        try:
            values = [int(part) for part in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"not integers: {text!r}") from None
        if len(values) != 3 or not all(1024 <= v <= 65535 for v in values):
            raise argparse.ArgumentTypeError(
                f"expected APISERVER,PROMETHEUS,HEALTH (1024-65535), got {text!r}"
            )
        return cls(*values)


class DemoFailed(RuntimeError):
    """A process the demo started has exited, or the engine never came up: stop at once."""


@dataclass
class Watched:
    """A process the demo depends on: how to tell it still runs, and where it logs."""

    name: str
    log: Path
    alive: Callable[[], bool]
    exit_code: Callable[[], int | None] = lambda: None


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file (empty when it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


@dataclass
class Stats:
    """What the clients saw (modelled seconds)."""

    good_tokens: int = 0
    tokens: int = 0
    errors: int = 0
    per_phase: list[dict[str, Any]] = field(default_factory=list)


class Stack:
    """Everything the demo starts, so it can stop all of it."""

    def __init__(self, state: Path, ports: Ports) -> None:
        self.state = state
        self.ports = ports
        self.cluster = devcluster.Cluster(state / "cluster", ports.apiserver)
        self.prom = devprom.DevProm(state / "prometheus", ports.prometheus)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.watched: list[Watched] = []

    def up(self) -> None:
        print(
            "== starting the control plane, Prometheus, the operator and the node agent", flush=True
        )
        self.cluster.up()
        for part in devcluster.COMPONENTS:
            self.watched.append(
                Watched(
                    part,
                    self.cluster.state_dir / f"{part}.log",
                    lambda part=part: self.cluster.pid(part) is not None,
                )
            )
        self.prom.up()
        self.watched.append(
            Watched(
                "Prometheus",
                self.prom.state_dir / "prometheus.log",
                lambda: self.prom.pid() is not None,
            )
        )
        env = dict(
            os.environ,
            KUBECONFIG=str(self.cluster.kubeconfig),
            # The kubectl of the same release as the apiserver (devcluster builds both).
            PATH=f"{devcluster.BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
            PYTHONWARNINGS="ignore",
            SPECSERVER_PROMETHEUS_URL=self.prom.url,
            SPECSERVER_CYCLE_SECONDS="2",
            SPECSERVER_QUERY_INTERVAL_SECONDS="2",
            # The demo's pace: Prometheus scrapes every second (devprom) and Auto evaluates every
            # 5 s, so a 20 s rate window holds 20 scrapes and 4 evaluations (default 60 s).
            SPECSERVER_SIGNAL_WINDOW_SECONDS="20",
        )
        self.env = env
        subprocess.run(
            ["kubectl", "apply", "-f", str(REPO / "crds")],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self.cluster.wait_established("crd/specservers.specserver.io")
        self.spawn(
            [
                sys.executable,
                "-m",
                "specserver_operator.main",
                "--liveness",
                f"http://127.0.0.1:{self.ports.health}/healthz",
            ],
            "operator",
            "operator.log",
        )
        self.spawn(
            [
                sys.executable,
                str(REPO / "scripts" / "nodeagent.py"),
                "--kubeconfig",
                str(self.cluster.kubeconfig),
                "--state-dir",
                str(self.state / "agent"),
                "--targets-file",
                str(self.prom.targets_file),
                "--time-scale",
                str(TIME_SCALE),
                "--startup-seconds",
                "30",
            ],
            "node agent",
            "agent.log",
        )

    def spawn(self, argv: list[str], name: str, log: str) -> None:
        """Start a process the demo depends on; it is watched from now on."""
        out = open(self.state / log, "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        out.close()
        self.procs.append(proc)
        self.watched.append(Watched(name, self.state / log, lambda: proc.poll() is None, proc.poll))

    def check(self) -> None:
        """Raise DemoFailed, with the end of its log, when a watched process has exited."""
        for part in self.watched:
            if part.alive():
                continue
            code = part.exit_code()
            how = f"exited with code {code}" if code is not None else "is no longer running"
            raise DemoFailed(
                f"the {part.name} {how}; last lines of {part.log}:\n{log_tail(part.log)}"
            )

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", *args],
            env=self.env,
            input=stdin,
            text=True,
            capture_output=True,
            check=True,
        )
        return done.stdout

    def down(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        self.prom.down()
        self.cluster.down(quiet=True)


def static_name(arm: str) -> str:
    """The SpecServer of a static arm (``on``/``off``) beside the Auto one."""
    return f"qwen3-8b-always-{arm}"


def static_spec(arm: str) -> dict[str, Any]:
    """The demo's SpecServer, renamed, with speculation fixed on or off."""
    doc = json.loads(json.dumps(SPEC))
    doc["metadata"]["name"] = static_name(arm)
    doc["spec"]["mode"] = STATIC_ARMS[arm]
    return doc


def endpoint(state: Path, name: str = NAME) -> str | None:
    try:
        urls = json.loads((state / "agent" / "endpoints.json").read_text())
        return (urls.get(f"{NAMESPACE}/{name}") or [None])[0]
    except (OSError, ValueError):
        return None


async def user(
    state: Path,
    stop_at: float,
    kind: str,
    stats: Stats,
    session: aiohttp.ClientSession,
    name: str = NAME,
) -> None:
    body = {
        "text": "hello " * 512,
        "stream": True,
        "prompt_kind": kind,
        "sampling_params": {"max_new_tokens": 128, "ignore_eos": True},
    }
    while time.monotonic() < stop_at:
        url = endpoint(state, name)
        if url is None:
            await asyncio.sleep(0.5)
            continue
        start, first, tokens = time.monotonic(), 0.0, 0
        try:
            async with session.post(f"{url}/generate", json=body) as resp:
                async for raw in resp.content:
                    line = raw.decode().strip()
                    if line.startswith("data:") and line != "data: [DONE]":
                        first = first or time.monotonic()
                        tokens = json.loads(line[5:])["meta_info"]["completion_tokens"]
        except (aiohttp.ClientError, ValueError, KeyError):
            stats.errors += 1
            await asyncio.sleep(0.5)
            continue
        ttft = (first - start) * TIME_SCALE
        tpot = (time.monotonic() - first) * TIME_SCALE * 1000 / max(1, tokens - 1)
        stats.tokens += tokens
        if ttft <= TTFT_SLO_S and tpot <= TPOT_SLO_MS:
            stats.good_tokens += tokens


async def guard(stack: Stack) -> None:
    """Fail the load at once when a process the demo depends on exits."""
    while True:
        stack.check()
        await asyncio.sleep(0.5)


async def drive(stack: Stack, stats: Stats, side: dict[str, Stats] | None = None) -> None:
    """Run the load phases while the guard watches the stack."""
    load = asyncio.create_task(run_phases(stack.state, stats, side or {}))
    watchdog = asyncio.create_task(guard(stack))
    done, _ = await asyncio.wait({load, watchdog}, return_when=asyncio.FIRST_COMPLETED)
    for task in (load, watchdog):
        task.cancel()
    for task in done:
        task.result()


async def run_phases(state: Path, stats: Stats, side: dict[str, Stats]) -> None:
    """Each phase's users at Auto and, the same number at the same time, at each static arm."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        for users, seconds, kind in PHASES:
            print(
                f"== load: {users} users, {kind} prompts, {seconds:.0f}s "
                f"({seconds * TIME_SCALE:.0f}s modelled)",
                flush=True,
            )
            before = stats.good_tokens
            stop_at = time.monotonic() + seconds
            clients = [user(state, stop_at, kind, stats, session) for _ in range(users)]
            for arm, arm_stats in side.items():
                name = static_name(arm)
                clients += [
                    user(state, stop_at, kind, arm_stats, session, name) for _ in range(users)
                ]
            await asyncio.gather(*clients)
            stats.per_phase.append(
                {
                    "users": users,
                    "kind": kind,
                    "seconds": seconds,
                    "good_tokens": stats.good_tokens - before,
                }
            )


def watch(stack: Stack, stop: threading.Event, seen: list[dict[str, Any]]) -> None:
    """Print each new ledger entry with the signals at that moment."""
    while not stop.is_set():
        try:
            obj = json.loads(stack.kubectl("get", "sps", NAME, "-n", NAMESPACE, "-o", "json"))
        except subprocess.CalledProcessError:
            time.sleep(1)
            continue
        status = obj.get("status") or {}
        m = status.get("lastMetrics") or {}
        for entry in (status.get("decisions") or [])[len(seen) :]:
            seen.append(entry)
            print(
                f"   {entry['time']}  {entry['action']:>7} -> speculation {entry['mode']:<3}  "
                f"{entry['reason']:<22} accept={m.get('acceptLength', '-')} "
                f"ttft_p99={m.get('ttftP99Seconds', '-')}s "
                f"running={m.get('runningRequests', '-')}",
                flush=True,
            )
        stop.wait(1.0)


def main(argv: list[str] | None = None) -> int:
    """Run the demo."""
    parser = argparse.ArgumentParser(prog="scripts/demo")
    parser.add_argument("--summary-json", type=Path)
    parser.add_argument("--state-dir", type=Path, default=REPO / ".devcluster" / "demo")
    parser.add_argument(
        "--strategy",
        choices=["BlueGreen", "RollingUpdate", "Recreate"],
        default="BlueGreen",
        help="how the engine is switched (BlueGreen: no request is dropped)",
    )
    parser.add_argument(
        "--ports",
        type=Ports.parse,
        default=Ports(),
        metavar="APISERVER,PROMETHEUS,HEALTH",
        help=(
            "loopback ports (default 17443,19190,18181; etcd, then LWS's webhook and probe, "
            "take the four after APISERVER)"
        ),
    )
    args = parser.parse_args(argv)
    SPEC["spec"]["autoSpeculation"]["switchStrategy"] = args.strategy
    args.state_dir.mkdir(parents=True, exist_ok=True)
    stack = Stack(args.state_dir, args.ports)
    stats, seen, stop = Stats(), [], threading.Event()
    side = {arm: Stats() for arm in STATIC_ARMS}
    started = time.time()
    try:
        stack.up()
        stack.kubectl("apply", "-f", "-", stdin=json.dumps(SPEC))
        for arm in STATIC_ARMS:
            stack.kubectl("apply", "-f", "-", stdin=json.dumps(static_spec(arm)))
        print(
            f"== SpecServer {NAMESPACE}/{NAME} applied (mode Auto), beside it "
            f"{static_name('on')} (Enabled) and {static_name('off')} (Disabled) for the "
            "measured comparison; waiting for the engines",
            flush=True,
        )
        deadline = time.monotonic() + 180
        names = [NAME, *(static_name(arm) for arm in STATIC_ARMS)]
        while any(endpoint(args.state_dir, name) is None for name in names):
            stack.check()
            if time.monotonic() > deadline:
                raise DemoFailed(
                    "the engines did not become ready in 180s; last lines of the node agent's "
                    f"log:\n{log_tail(args.state_dir / 'agent.log')}"
                )
            time.sleep(1)
        watcher = threading.Thread(target=watch, args=(stack, stop, seen), daemon=True)
        watcher.start()
        run_started = time.time()
        asyncio.run(drive(stack, stats, side))
        time.sleep(3)
        stop.set()
        watcher.join(timeout=5)
        summary = summarise(seen, run_started, time.time(), stats, side)
        print_summary(summary)
        print(f"== done in {time.time() - started:.0f}s; stopping everything", flush=True)
        if args.summary_json:
            args.summary_json.write_text(json.dumps(summary, indent=2))
    except DemoFailed as failure:
        print(f"demo failed: {failure}", file=sys.stderr, flush=True)
        return 1
    finally:
        stop.set()
        stack.down()
    return 0


def summarise(
    ledger: list[dict[str, Any]],
    start: float,
    end: float,
    stats: Stats,
    side: dict[str, Stats] | None = None,
) -> dict[str, Any]:
    """The documented summary: switches, time in mode, decisions, goodput."""
    import datetime

    def ts(text: str) -> float:
        return (
            datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
            .replace(tzinfo=datetime.UTC)
            .timestamp()
        )

    time_in = {"on": 0.0, "off": 0.0}
    mode, since = "on", start
    for entry in ledger:
        at = max(start, ts(entry["time"]))
        time_in[mode] += at - since
        mode, since = entry["mode"].lower(), at
    time_in[mode] += end - since
    wall = end - start
    side = side or {}

    def goodput(arm_stats: Stats | None) -> float | None:
        if arm_stats is None:
            return None
        return round(arm_stats.good_tokens / (wall * TIME_SCALE), 1)

    return {
        "switches": sum(1 for e in ledger if e["action"] in ("enable", "disable")),
        "time_in_mode": {k: round(v, 1) for k, v in time_in.items()},
        "decisions": [
            {"ts": e["time"], "action": e["action"], "reason": e["reason"]} for e in ledger
        ],
        "goodput": {
            "adaptive": goodput(stats),
            "always_on": goodput(side.get("on")),
            "always_off": goodput(side.get("off")),
        },
        "client_errors_during_switches": stats.errors,
        "switch_strategy": SPEC["spec"]["autoSpeculation"]["switchStrategy"],
        "time_scale": TIME_SCALE,
    }


def print_summary(s: dict[str, Any]) -> None:
    g = s["goodput"]
    print("== summary", flush=True)
    print(
        f"   switches: {s['switches']}; time with speculation on {s['time_in_mode']['on']}s, "
        f"off {s['time_in_mode']['off']}s (wall)"
    )
    print(
        f"   goodput (output tok/s within TTFT<={TTFT_SLO_S}s and TPOT<={TPOT_SLO_MS}ms, "
        f"modelled time), measured side by side under the same load: Auto {g['adaptive']}, "
        f"always-on {g['always_on']}, always-off {g['always_off']}"
    )
    print(
        f"   client requests that failed during switches ({s['switch_strategy']}): "
        f"{s['client_errors_during_switches']}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
