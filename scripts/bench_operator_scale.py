"""Scale benchmark of the operator: N SpecServers, one local apiserver, one Prometheus.

Run through ``scripts/bench-operator-scale --specservers 1000 [--format json]``. Starts a private
control plane (scripts/devcluster.py) and Prometheus (scripts/devprom.py), a synthetic exporter
whose series carry each SpecServer's ``namespace``/``specserver`` labels (steady low load, so
the policy keeps speculation on), creates the SpecServers, runs the real ``specserver-operator``
process and waits until a whole cycle writes nothing. Then it measures over a few cycles, from
the operator's own ``/metrics``: CPU time per cycle (the cycle thread's), PromQL queries per
cycle, API writes per cycle at steady state, and the process RSS. Stops everything it started.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import devcluster  # noqa: E402
import devprom  # noqa: E402
import specserverdocs  # noqa: E402
from specserver_advisor.policy.promql import signal_queries  # noqa: E402
from specserver_engine.ports import free_loopback_port  # noqa: E402
from specserver_engine.sim.metrics import ITL_BUCKETS, TTFT_BUCKETS  # noqa: E402

NAMESPACE = "bench"
#: Zero-write cycles in a row that count as steady state (the rate windows have filled).
STEADY_CYCLES = 3
TARGETS = {"cpu_s_per_cycle": 1.0, "writes_per_cycle_steady": 0.0, "rss_mb": 140.0}


def specserver(i: int) -> dict[str, Any]:
    """The i-th SpecServer: the demo's EAGLE3 Auto document, evaluated every cycle (5 s), so each
    measured cycle runs the policy for every object."""
    return specserverdocs.eagle3_auto(f"s{i:04d}", NAMESPACE, staleAfterSeconds=60)


def _histogram(name: str, labels: str, buckets: tuple[float, ...], cdf: Any, count: float) -> str:
    lines = [f'sglang:{name}_bucket{{{labels},le="{le}"}} {count * cdf(le):.3f}' for le in buckets]
    lines.append(f'sglang:{name}_bucket{{{labels},le="+Inf"}} {count:.3f}')
    lines.append(f"sglang:{name}_count{{{labels}}} {count:.3f}")
    lines.append(f"sglang:{name}_sum{{{labels}}} {count * buckets[0]:.3f}")
    return "\n".join(lines)


def synthetic_metrics(names: list[str], elapsed: float, idle: bool = False) -> str:
    """SGLang's series for every SpecServer at a steady low load (constant rates), or idle
    after traffic (counters stand still: rates are 0 and latency quantiles NaN)."""
    if idle:
        elapsed = 1000.0

    def ttft_cdf(le: float) -> float:
        return min(1.0, 0.5 + le / 2)

    def tpot_cdf(le: float) -> float:
        return min(1.0, le / 0.04)

    out = []
    for name in names:
        labels = f'namespace="{NAMESPACE}",specserver="{name}",model_name="Qwen/Qwen3-8B"'
        out += [
            f"sglang:spec_accept_length{{{labels}}} 2.7",
            f"sglang:num_running_reqs{{{labels}}} {0 if idle else 4}",
            f"sglang:num_queue_reqs{{{labels}}} 0",
            f"sglang:token_usage{{{labels}}} 0.3",
            f"sglang:generation_tokens_total{{{labels}}} {130 * elapsed:.1f}",
            _histogram("time_to_first_token_seconds", labels, TTFT_BUCKETS, ttft_cdf, elapsed),
            _histogram(
                "request_time_per_output_token_seconds", labels, ITL_BUCKETS, tpot_cdf, elapsed
            ),
            _histogram("inter_token_latency_seconds", labels, ITL_BUCKETS, tpot_cdf, 30 * elapsed),
        ]
    return "\n".join(out) + "\n"


def serve_exporter(
    names: list[str], idle: bool = False
) -> tuple[http.server.ThreadingHTTPServer, int]:
    started = time.monotonic()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            elapsed = 1000 + time.monotonic() - started
            body = synthetic_metrics(names, elapsed, idle).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    port = free_loopback_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, port


def operator_metrics(url: str) -> dict[str, float]:
    """The unlabelled samples of the operator's /metrics."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" in line or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def rss_mb(pid: int) -> tuple[float, float]:
    """(current, peak) resident set size of a process, in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


#: Parallel creates, and answers that mean "busy, try again" (a loaded apiserver answers 504
#: while etcd is slow, and 429 when it sheds load).
CREATE_WORKERS = 4
RETRY_STATUS = (429, 500, 502, 503, 504)
CREATE_ATTEMPTS = 8


def create_specservers(kubeconfig: Path, count: int) -> int:
    """Create the SpecServers with bounded concurrency, retrying busy answers; the retries."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    urllib3.disable_warnings()  # the local apiserver's self-signed certificate

    api = client.CustomObjectsApi(config.new_client_from_config(str(kubeconfig)))
    retries = [0]

    def create(i: int) -> None:
        for attempt in range(CREATE_ATTEMPTS):
            try:
                api.create_namespaced_custom_object(
                    "specserver.io", "v1alpha1", NAMESPACE, "specservers", specserver(i)
                )
                return
            except ApiException as exc:
                if exc.status == 409 and attempt:  # a timed-out create that went through
                    return
                if exc.status not in RETRY_STATUS or attempt == CREATE_ATTEMPTS - 1:
                    raise
            except urllib3.exceptions.HTTPError:
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
            retries[0] += 1
            time.sleep(min(10.0, 0.5 * 2**attempt))

    with ThreadPoolExecutor(CREATE_WORKERS) as pool:
        list(pool.map(create, range(count)))
    return retries[0]


#: Loaded into the operator by ``--trace-memory`` (as sitecustomize): every 5 s a timeline line
#: (RSS, Python's allocated blocks, threads), and at each new RSS high the most numerous object
#: types. Cheap on purpose: tracemalloc's snapshots cost more memory than they explain.
TRACER = """
import collections, gc, os, sys, threading, time

def _rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0

def _watch(path=os.environ["SPECSERVER_BENCH_TRACE"], best=0.0, started=time.monotonic()):
    while True:
        time.sleep(5)
        rss = _rss()
        names = sorted(t.name for t in threading.enumerate())
        with open(path, "a") as f:
            f.write(f"{time.monotonic() - started:6.0f}s RSS {rss:6.1f} MB, "
                    f"{sys.getallocatedblocks():8d} Python blocks, {len(names)} threads\\n")
            if rss > best * 1.05:
                best = rss
                counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
                f.write("        threads: " + ", ".join(names) + "\\n")
                f.write("".join(f"        {n:9d} {k}\\n" for k, n in counts.most_common(12)))

threading.Thread(target=_watch, name="bench-trace-memory", daemon=True).start()
"""

#: Added to TRACER by ``--trace-alloc``: tracemalloc from start-up; when the benchmark creates
#: ``<trace>.dump`` the live Python allocations are written, by the line that made them and by
#: the operator module (first frame in our code) that led there. Costs memory and CPU itself:
#: for attribution, never for the RSS figure.
ALLOC_TRACER = """
import tracemalloc
tracemalloc.start(25)

def _dump(path=os.environ["SPECSERVER_BENCH_TRACE"]):
    while not os.path.exists(path + ".dump"):
        time.sleep(1)
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)])
    total = sum(s.size for s in snap.statistics("filename"))
    by_ours = collections.Counter()
    for trace in snap.traces:
        frames = [f for f in reversed(trace.traceback) if "specserver_" in f.filename]
        ours = f"{frames[0].filename.rsplit('/', 2)[-1]}:{frames[0].lineno}" if frames else "-"
        by_ours[ours] += trace.size
    with open(path + ".alloc", "w") as f:
        f.write(f"traced Python allocations: {total / 2**20:.1f} MB\\n== by line\\n")
        for s in snap.statistics("lineno")[:25]:
            frame = s.traceback[0]
            f.write(f"{s.size / 2**20:8.2f} MB {s.count:8d} {frame.filename}:{frame.lineno}\\n")
        f.write("== by the newest specserver_* frame on the stack\\n")
        for where, size in by_ours.most_common(30):
            f.write(f"{size / 2**20:8.2f} MB {where}\\n")

threading.Thread(target=_dump, name="bench-trace-alloc", daemon=True).start()
"""


def tracer_env(state: Path, alloc: bool = False) -> dict[str, str]:
    """Environment that loads TRACER (and ALLOC_TRACER) into the operator process."""
    folder = state / "trace"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(TRACER + (ALLOC_TRACER if alloc else ""))
    return {"PYTHONPATH": str(folder), "SPECSERVER_BENCH_TRACE": str(state / "memory.txt")}


#: Seconds between reads of the operator's /metrics (each costs the operator a rendering of
#: every per-SpecServer series: polled faster, the benchmark itself loads what it measures).
POLL_S = 1.0


def wait_cycle(url: str, after: float, timeout: float = 300) -> dict[str, float]:
    """Metrics once the cycle counter has passed ``after``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            m = operator_metrics(url)
            if m.get("specserver_cycles_total", 0) > after:
                return m
        except OSError:
            pass
        # The first cycle (every child created) takes minutes: no need to ask twice a second.
        time.sleep(POLL_S if after else 5 * POLL_S)
    raise SystemExit(f"bench-operator-scale: no operator cycle within {timeout:.0f}s")


def run(
    count: int,
    measure_cycles: int,
    state: Path,
    log: Any,
    verbose: bool = False,
    idle: bool = False,
    base_port: int = 0,
    prom_port: int = 0,
    trace_memory: bool = False,
    trace_alloc: bool = False,
) -> dict[str, Any]:
    cluster = devcluster.Cluster(state / "cluster", base_port or free_loopback_port())
    prom = devprom.DevProm(
        state / "prometheus",
        prom_port or free_loopback_port(),
        scrape_interval="5s",
        honor_labels=True,
    )
    exporter, export_port = serve_exporter([f"s{i:04d}" for i in range(count)], idle)
    operator: subprocess.Popen[bytes] | None = None
    try:
        log(f"== control plane and Prometheus ({state})")
        cluster.up()
        prom.up()
        prom.write_targets([{"targets": [f"127.0.0.1:{export_port}"], "labels": {}}])
        env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig))
        kubectl = [str(devcluster.KUBECTL), "--kubeconfig", str(cluster.kubeconfig)]
        subprocess.run(
            [*kubectl, "apply", "-f", str(REPO / "crds")],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            cluster.wait_established("crd/specservers.specserver.io")
        except devcluster.DevClusterError as err:
            raise SystemExit(f"bench-operator-scale: the CRD was not Established: {err}") from None
        subprocess.run(
            [*kubectl, "create", "namespace", NAMESPACE], check=True, stdout=subprocess.DEVNULL
        )
        started = time.monotonic()
        retried = create_specservers(cluster.kubeconfig, count)
        log(
            f"== created {count} SpecServers in {time.monotonic() - started:.1f}s"
            f" ({retried} busy answers retried)"
        )
        metrics_port, live_port = free_loopback_port(), free_loopback_port()
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specserver_operator.main",
                "--liveness",
                f"http://127.0.0.1:{live_port}/healthz",
                *(["--verbose"] if verbose else []),
            ],
            env=dict(
                env,
                SPECSERVER_PROMETHEUS_URL=prom.url,
                SPECSERVER_METRICS_PORT=str(metrics_port),
                SPECSERVER_CYCLE_SECONDS="5",
                SPECSERVER_QUERY_INTERVAL_SECONDS="4",
                PYTHONWARNINGS="ignore",
                MALLOC_ARENA_MAX="2",  # as manifests/operator.yaml runs it
                **(tracer_env(state, trace_alloc) if trace_memory or trace_alloc else {}),
            ),
            stdout=open(state / "operator.log", "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
        started = time.monotonic()
        m = wait_cycle(url, 0, timeout=1800)  # the first cycle creates every child
        first_cycle = time.monotonic() - started
        log(f"   cycle 1 (creates every child): {first_cycle:.0f}s")
        started = time.monotonic()  # steady state is timed from the end of the first cycle
        steady_after = None
        quiet = 0  # consecutive cycles over every SpecServer that wrote nothing
        while steady_after is None:
            before = m
            m = wait_cycle(url, before["specserver_cycles_total"])
            wrote = m["specserver_api_writes_total"] - before["specserver_api_writes_total"]
            seen = m.get("specserver_cycle_specservers", 0)
            log(
                f"   cycle {m['specserver_cycles_total']:.0f}: {seen:.0f} SpecServers, "
                f"{wrote:.0f} writes"
            )
            quiet = quiet + 1 if seen == count and wrote == 0 else 0
            if quiet >= STEADY_CYCLES:
                steady_after = time.monotonic() - started
            elif time.monotonic() - started > 900:
                raise SystemExit(
                    "bench-operator-scale: no steady state within 15 minutes of the first cycle"
                )
        log(f"== steady after {steady_after:.0f}s; measuring {measure_cycles} cycles")
        first = m
        last = wait_cycle(url, first["specserver_cycles_total"] + measure_cycles - 1)
        cycles = last["specserver_cycles_total"] - first["specserver_cycles_total"]

        def per_cycle(name: str) -> float:
            return (last[name] - first[name]) / cycles

        current, peak = rss_mb(operator.pid)
        if trace_alloc:
            dumped = state / "memory.txt.alloc"
            (state / "memory.txt.dump").touch()
            for _ in range(120):
                if dumped.exists() and dumped.stat().st_size:
                    time.sleep(1)  # written at once; let it finish
                    log("== live Python allocations at steady state (--trace-alloc)")
                    log(dumped.read_text())
                    break
                time.sleep(1)
        wall = (
            last["specserver_cycle_duration_seconds_sum"]
            - first["specserver_cycle_duration_seconds_sum"]
        ) / cycles
        return {
            "specservers": count,
            "load": "idle" if idle else "steady",
            "cycles_measured": int(cycles),
            "cpu_s_per_cycle": round(per_cycle("specserver_cycle_cpu_seconds_total"), 3),
            "cycle_wall_s": round(wall, 3),
            "queries_per_cycle": round(per_cycle("specserver_prometheus_queries_total"), 2),
            "signals": len(signal_queries()),
            "writes_per_cycle_steady": round(per_cycle("specserver_api_writes_total"), 2),
            "rss_mb": round(current, 1),
            "rss_peak_mb": round(peak, 1),
            "first_cycle_s": round(first_cycle, 1),
            "steady_after_s": round(steady_after, 1),
        }
    finally:
        if (trace_memory or trace_alloc) and (state / "memory.txt").exists():
            log("== the operator's memory over time (--trace-memory)")
            log((state / "memory.txt").read_text())
        if operator is not None:
            operator.terminate()
            try:
                operator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                operator.kill()
        exporter.shutdown()
        prom.down()
        cluster.down(quiet=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench-operator-scale", description=__doc__)
    p.add_argument("--specservers", type=int, default=1000)
    p.add_argument("--cycles", type=int, default=6, help="cycles to measure at steady state")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--load",
        choices=["steady", "idle"],
        default="steady",
        help="steady low load, or idle after traffic (rates 0, latency quantiles NaN)",
    )
    p.add_argument(
        "--base-port",
        type=int,
        default=0,
        help="apiserver port (etcd takes the next two); default: a free one",
    )
    p.add_argument("--prom-port", type=int, default=0, help="Prometheus port; default: a free one")
    p.add_argument(
        "--trace-memory",
        action="store_true",
        help="print the operator's RSS, Python blocks and threads over time, and the most "
        "numerous object types at each new high",
    )
    p.add_argument(
        "--trace-alloc",
        action="store_true",
        help="with --trace-memory's timeline, trace the operator's Python allocations "
        "(tracemalloc: slower, more memory) and print at steady state where the live ones "
        "were made",
    )
    p.add_argument("--keep-state", action="store_true", help="keep logs and data afterwards")
    p.add_argument("--verbose", action="store_true", help="debug log of the operator (kept state)")
    args = p.parse_args(argv)
    if args.specservers < 1 or args.cycles < 1:
        p.error("--specservers and --cycles must be at least 1")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr if args.format == "json" else sys.stdout, flush=True)

    # SIGTERM unwinds like Ctrl-C, so the control plane and Prometheus are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    state = Path(tempfile.mkdtemp(prefix="specserver-bench-"))
    result = run(
        args.specservers,
        args.cycles,
        state,
        log,
        args.verbose,
        args.load == "idle",
        args.base_port,
        args.prom_port,
        args.trace_memory,
        args.trace_alloc,
    )
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            target = TARGETS.get(key)
            mark = (
                "" if target is None else f"   (target < {target:g})" if target else "   (target 0)"
            )
            if key == "queries_per_cycle":
                mark = f"   (target: independent of N; {result['signals']} signals)"
            print(f"{key:26} {value}{mark}")
    if not args.keep_state:
        import shutil

        shutil.rmtree(state, ignore_errors=True)
    else:
        log(f"state kept in {state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
