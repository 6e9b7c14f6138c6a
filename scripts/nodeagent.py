"""A local node agent for the dev cluster: it plays the kubelet for specserver engine pods.

Dev tooling, not part of the operator. It registers one Node, binds pending engine pods to it,
runs ``specserver-engine simulate`` with each pod's own SGLang arguments on a loopback port,
reports readiness back through ``pods/status`` (so readiness-gated switching is exercised),
stops processes whose pods are gone (a changed pod template rolls out new pods), and writes
Prometheus file-based discovery with the labels a PodMonitor would attach. Used by scripts/demo
and the closed-loop tests. Needs the project's virtualenv (kubernetes client).

It also plays LeaderWorkerSet's controller (lwsstandin.py, run each step) for multi-node
SpecServers. A group's pods are treated as one TP group across nodes: the leader runs ONE
simulated engine for the whole group (its args, ``$(VAR)`` expanded from the pod's env as the
kubelet does, carry ``--tp-size`` and ``--nnodes``, so the advisor's performance model prices the
cross-node all-reduces), and its start-up is ``MULTINODE_STARTUP_FACTOR`` times the single-node
one; workers run no process (they serve no HTTP) and are Running/Ready at once; only the leader
is a scrape target and an endpoint.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from lwsstandin import WORKER_INDEX_LABEL, LwsStandIn
from specserver_advisor.launch import expansion
from specserver_engine.ports import free_loopback_port

NODE = "specserver-dev-node"
#: Wall seconds a deleted pod's engine keeps serving its in-flight requests (not new ones).
DRAIN_S = 5.0
SELECTOR = "app.kubernetes.io/managed-by=specserver"
#: A multi-node group's simulated start-up relative to one node's (``--startup-seconds``): each
#: node loads its own shard in parallel, but the group starts when the slowest node has, after
#: the cross-node NCCL rendezvous and communicator set-up of the TP group. The stand-in's figure
#: (not measured); the advisor's switch budget prices multi-node restarts on its own.
MULTINODE_STARTUP_FACTOR = 1.5


def expand(arg: str, env: dict[str, str]) -> str:
    """``$(VAR)`` in a container arg from the container's env, as the kubelet expands it
    (Kubernetes' rules exactly: specserver_advisor/launch/expansion.py)."""
    return expansion.expand(arg, expansion.mapping_for(env))


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args[:-1] else None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ready", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@dataclass
class Engine:
    """One simulated engine process for one pod."""

    uid: str
    namespace: str
    pod: str
    specserver: str
    port: int
    #: None for a LeaderWorkerSet worker: the leader's process models the whole group
    proc: subprocess.Popen[bytes] | None
    labels: dict[str, str] = field(default_factory=dict)
    ready: bool = False
    terminating_since: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Agent:
    """The agent's state and loop."""

    core: client.CoreV1Api
    state_dir: Path
    targets_file: Path | None
    time_scale: float
    startup_s: float
    engines: dict[str, Engine] = field(default_factory=dict)
    #: LeaderWorkerSet's controller, played here (None: not played)
    lws: LwsStandIn | None = None

    def register_node(self) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
            "status": {
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                "allocatable": {
                    "cpu": "64",
                    "memory": "512Gi",
                    "pods": "110",
                    "nvidia.com/gpu": "8",
                },
            },
        }
        try:
            self.core.create_node(node)
        except ApiException as exc:
            if exc.status != 409:
                raise
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "SpecserverDevAgent",
                        "message": "simulated engines",
                        "lastHeartbeatTime": _now(),
                        "lastTransitionTime": _now(),
                    }
                ],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            }
        }
        self.core.patch_node_status(NODE, status)

    def start(self, pod: Any) -> Engine:
        containers = {c.name: c for c in pod.spec.containers}
        engine = containers.get("engine") or pod.spec.containers[0]
        labels = pod.metadata.labels or {}
        if labels.get(WORKER_INDEX_LABEL, "0") != "0":
            return Engine(
                pod.metadata.uid,
                pod.metadata.namespace,
                pod.metadata.name,
                labels.get("specserver.io/name", ""),
                0,
                None,
                dict(labels),
                ready=True,
            )
        env = {e.name: e.value for e in engine.env or [] if e.value is not None}
        args = [expand(a, env) for a in engine.args or []]
        nnodes = int(_flag(args, "--nnodes") or 1)
        startup = self.startup_s * (MULTINODE_STARTUP_FACTOR if nnodes > 1 else 1.0)
        gpu = "L4"
        for init in pod.spec.init_containers or []:
            init_args = list(init.args or [])
            if "--gpu-type" in init_args:
                gpu = init_args[init_args.index("--gpu-type") + 1]
        port = free_loopback_port()
        argv = [
            sys.executable,
            "-m",
            "specserver_engine.cli",
            "simulate",
            *args,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--sim-gpu",
            gpu,
            "--time-scale",
            str(self.time_scale),
            "--sim-startup-seconds",
            str(startup),
        ]
        log = open(self.state_dir / f"{pod.metadata.name}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return Engine(
            pod.metadata.uid,
            pod.metadata.namespace,
            pod.metadata.name,
            labels.get("specserver.io/name", ""),
            port,
            proc,
            dict(labels),
        )

    def report(self, engine: Engine, exited: bool) -> None:
        ready = engine.ready and not exited
        cond = "True" if ready else "False"
        status = {
            "status": {
                "phase": "Failed" if exited else "Running",
                "startTime": _now(),
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": _now()},
                    {"type": "ContainersReady", "status": cond, "lastTransitionTime": _now()},
                    {"type": "Ready", "status": cond, "lastTransitionTime": _now()},
                ],
                "containerStatuses": [
                    {
                        "name": "engine",
                        "ready": ready,
                        "restartCount": 0,
                        "image": "specserver-engine-simulator",
                        "imageID": "",
                        "started": not exited,
                        "state": {"running": {"startedAt": _now()}}
                        if not exited
                        else {
                            "terminated": {
                                "exitCode": (engine.proc and engine.proc.returncode) or 1,
                                "reason": "Error",
                            }
                        },
                    }
                ],
            }
        }
        try:
            self.core.patch_namespaced_pod_status(engine.pod, engine.namespace, status)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def step(self) -> None:
        if self.lws is not None:
            self.lws.step()
        pods = self.core.list_pod_for_all_namespaces(label_selector=SELECTOR).items
        alive = set()
        for pod in pods:
            uid = pod.metadata.uid
            if pod.metadata.deletion_timestamp is not None:
                # Graceful deletion as a kubelet does it: out of the endpoints at once, in-flight
                # requests get DRAIN_S to finish, then the engine stops and the pod is gone.
                engine = self.engines.get(uid)
                if engine is not None:
                    since = engine.terminating_since or time.monotonic()
                    engine.terminating_since = since
                    if time.monotonic() - since < DRAIN_S:
                        alive.add(uid)
                        continue
                self.stop(uid)
                try:
                    self.core.delete_namespaced_pod(
                        pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                    )
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                continue
            alive.add(uid)
            if not pod.spec.node_name:
                body = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": pod.metadata.name},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
                }
                try:
                    self.core.create_namespaced_binding(
                        pod.metadata.namespace, body, _preload_content=False
                    )
                except ApiException as exc:
                    if exc.status not in (404, 409):
                        raise
                    continue
            if uid not in self.engines:
                self.engines[uid] = self.start(pod)
                self.report(self.engines[uid], False)
        for uid in list(self.engines):
            if uid not in alive:
                self.stop(uid)
        for engine in self.engines.values():
            if engine.proc is None:
                continue  # a worker: Ready since it started (report above)
            exited = engine.proc.poll() is not None
            ready = not exited and _ready(engine.url)
            if ready != engine.ready or exited:
                engine.ready = ready
                self.report(engine, exited)
        services = self.core.list_service_for_all_namespaces(label_selector=SELECTOR).items
        self.write_discovery(
            {
                (svc.metadata.namespace, svc.metadata.name): dict(svc.spec.selector or {})
                for svc in services
            }
        )

    def stop(self, uid: str) -> None:
        engine = self.engines.pop(uid, None)
        if engine and engine.proc is not None and engine.proc.poll() is None:
            os.killpg(engine.proc.pid, signal.SIGTERM)
            try:
                engine.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(engine.proc.pid, signal.SIGKILL)
                engine.proc.wait()

    def write_discovery(self, services: dict[tuple[str, str], dict[str, str]]) -> None:
        """Scrape targets for every engine; endpoints per Service, as kube-proxy would route.

        A Service's endpoints are the ready engines of its namespace whose pod labels match its
        selector, so a BlueGreen switch moves traffic exactly when the operator moves the
        selector.
        """
        groups = [
            {
                "targets": [f"127.0.0.1:{e.port}"],
                "labels": {"namespace": e.namespace, "specserver": e.specserver, "pod": e.pod},
            }
            for e in self.engines.values()
            if e.proc is not None
        ]
        endpoints: dict[str, list[str]] = {}
        for (namespace, name), selector in sorted(services.items()):
            endpoints[f"{namespace}/{name}"] = [
                e.url
                for e in self.engines.values()
                if e.ready
                and e.proc is not None
                and e.terminating_since is None
                and e.namespace == namespace
                and selector
                and all(e.labels.get(k) == v for k, v in selector.items())
            ]
        for path, data in (
            (self.targets_file, groups),
            (self.state_dir / "endpoints.json", endpoints),
        ):
            if path is None:
                continue
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(path)

    def shutdown(self) -> None:
        for uid in list(self.engines):
            self.stop(uid)


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    p = argparse.ArgumentParser(prog="scripts/nodeagent.py")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--targets-file", type=Path, help="Prometheus file_sd JSON to write")
    p.add_argument("--time-scale", type=float, default=10.0)
    p.add_argument(
        "--startup-seconds",
        type=float,
        default=30.0,
        help="modelled engine start-up (weight loading)",
    )
    args = p.parse_args(argv)
    config.load_kube_config(args.kubeconfig)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    core = client.CoreV1Api()
    agent = Agent(
        core,
        args.state_dir,
        args.targets_file,
        args.time_scale,
        args.startup_seconds,
        lws=LwsStandIn(core, client.CustomObjectsApi()),
    )
    agent.register_node()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    try:
        while not stopping:
            try:
                agent.step()
            except (ApiException, OSError) as exc:
                print(f"nodeagent: {exc}", file=sys.stderr, flush=True)
            time.sleep(1.0)
    finally:
        agent.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
