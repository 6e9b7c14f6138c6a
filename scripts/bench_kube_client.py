"""Benchmark: the operator's own REST client (client.py) against lightkube, on one workload.

Run through ``scripts/bench-kube-client [--objects 1000]``. Starts a private local apiserver
(scripts/devcluster.py), then runs each client in a fresh Python process on the same work in a
namespace of its own: server-side apply of N ConfigMaps (about 3 KB each, the size of a rendered
engine Deployment), three paged LISTs of them (250 a page, the last result kept, as the
operator's cache keeps one), and a GET of each. Prints per client and phase the wall time, the
CPU time of the process and its RSS, and the peak RSS. lightkube is not a dependency of the
project: install it into the virtual environment first (``.venv/bin/pip install lightkube``).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import devcluster  # noqa: E402

CLIENTS = ("current", "lightkube")
PAGE = 250
FIELD_MANAGER = "bench"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def configmap(namespace: str, i: int) -> dict[str, Any]:
    """A ConfigMap of about 3 KB (a rendered engine Deployment's size)."""
    data = {f"arg-{k:02d}": f"--option-{k}={'x' * 90}" for k in range(30)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"obj-{i:04d}",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "bench"},
        },
        "data": data,
    }


def current_client(kubeconfig: Path, namespace: str) -> dict[str, Callable[..., Any]]:
    """The operator's client (specserver_operator.kube.client.KubeClient)."""
    from specserver_operator.kube.client import KubeClient
    from specserver_operator.kube.connection import Connection

    config = json.loads(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    client = KubeClient(
        Connection(
            server=cluster["server"],
            token=user["token"],
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )
    )

    def apply(i: int) -> None:
        client.apply_over(configmap(namespace, i), None)

    def list_all() -> list[Any]:
        return client._list("ConfigMap", namespace, "app.kubernetes.io/managed-by=bench")

    def get(i: int) -> Any:
        return client._get_or_none("ConfigMap", namespace, f"obj-{i:04d}")

    return {"apply": apply, "list": list_all, "get": get}


def lightkube_client(kubeconfig: Path, namespace: str) -> dict[str, Callable[..., Any]]:
    """lightkube's typed synchronous client (server-side apply, chunked LIST)."""
    from lightkube import Client  # type: ignore[import-not-found]
    from lightkube.config.kubeconfig import KubeConfig  # type: ignore[import-not-found]
    from lightkube.resources.core_v1 import ConfigMap  # type: ignore[import-not-found]

    client = Client(config=KubeConfig.from_file(kubeconfig), field_manager=FIELD_MANAGER)

    def apply(i: int) -> None:
        body = configmap(namespace, i)
        client.apply(ConfigMap.from_dict(body), namespace=namespace, force=True)

    def list_all() -> list[Any]:
        labels = {"app.kubernetes.io/managed-by": "bench"}
        return list(client.list(ConfigMap, namespace=namespace, chunk_size=PAGE, labels=labels))

    def get(i: int) -> Any:
        return client.get(ConfigMap, f"obj-{i:04d}", namespace=namespace)

    return {"apply": apply, "list": list_all, "get": get}


def worker(name: str, kubeconfig: Path, namespace: str, count: int) -> dict[str, Any]:
    """One client's run, in this (fresh) process; the figures per phase."""
    started_rss = rss_mb()
    ops = (current_client if name == "current" else lightkube_client)(kubeconfig, namespace)
    out: dict[str, Any] = {"client": name, "rss_mb_interpreter": round(started_rss, 1)}
    out["rss_mb_imported"] = round(rss_mb(), 1)
    kept: list[Any] = []

    def phase(label: str, work: Callable[[], object]) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        out[label] = {
            "wall_s": round(time.perf_counter() - wall, 2),
            "cpu_s": round(time.process_time() - cpu, 2),
            "rss_mb": round(rss_mb(), 1),
        }

    def lists() -> None:
        for _ in range(3):
            kept[:] = ops["list"]()
        assert len(kept) == count, len(kept)

    phase("apply", lambda: [ops["apply"](i) for i in range(count)])
    phase("list_x3", lists)
    phase("get", lambda: [ops["get"](i) for i in range(count)])
    out["rss_mb_peak"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench-kube-client", description=__doc__)
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--base-port", type=int, default=0, help="apiserver port (etcd: the next two)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--namespace", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.kubeconfig, args.namespace, args.objects)))
        return 0
    from specserver_engine.ports import free_loopback_port

    state = Path(tempfile.mkdtemp(prefix="specserver-bench-client-"))
    cluster = devcluster.Cluster(state / "cluster", args.base_port or free_loopback_port())
    results = []
    try:
        cluster.up()
        kubectl = [str(devcluster.KUBECTL), "--kubeconfig", str(cluster.kubeconfig)]
        for name in CLIENTS:
            ns = f"bench-{name}"
            subprocess.run([*kubectl, "create", "namespace", ns], check=True, capture_output=True)
            command = [sys.executable, __file__, "--worker", name, "--namespace", ns]
            command += ["--kubeconfig", str(cluster.kubeconfig), "--objects", str(args.objects)]
            done = subprocess.run(
                command,
                check=True,
                capture_output=True,
                text=True,
            )
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        cluster.down(quiet=True)
        import shutil

        shutil.rmtree(state, ignore_errors=True)
    if args.format == "json":
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        imported, peak = r["rss_mb_imported"], r["rss_mb_peak"]
        print(f"{r['client']:10} imported {imported:6.1f} MB  peak {peak:6.1f} MB")
        for label in ("apply", "list_x3", "get"):
            f = r[label]
            print(
                f"  {label:8} wall {f['wall_s']:7.2f} s  cpu {f['cpu_s']:6.2f} s  "
                f"rss {f['rss_mb']:6.1f} MB"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
