"""A local node agent for the dev cluster: it plays the kubelets of a pool of GPU nodes.

Dev tooling, not part of the operator. It registers ``--nodes`` Node objects (CPU, memory and
``nvidia.com/gpu`` capacity of ``--node-*``; labelled ``nvidia.com/gpu.product``), keeps each
node's Lease in ``kube-node-lease`` and its Ready condition fresh, and runs only the pods the real
kube-scheduler has bound to its nodes (``spec.nodeName``): a pod no node can hold stays Pending
with the scheduler's own ``PodScheduled=False/Unschedulable`` condition. For an engine pod
(``app.kubernetes.io/managed-by=specserver``) it runs ``specserver-engine simulate`` with the
pod's own SGLang arguments on a loopback port, reports readiness back through ``pods/status`` (so
readiness-gated switching is exercised), stops processes whose pods are gone (a changed pod
template rolls out new pods), and writes Prometheus file-based discovery with the labels a
PodMonitor would attach; any other pod bound to its nodes is reported Running with no process.
Used by scripts/demo and the closed-loop tests. Needs the project's virtualenv (kubernetes
client).

Multi-node SpecServers are LeaderWorkerSets reconciled by LWS's real controller (started by
scripts/devcluster.py): it creates the StatefulSets whose pods land here. A group's pods are
treated as one TP group across nodes: the leader (worker index 0) runs ONE simulated engine for
the whole group (its args, ``$(VAR)`` expanded from the pod's env as the kubelet does, carry
``--tp-size`` and ``--nnodes``, so the advisor's performance model prices the cross-node
all-reduces), and its start-up is ``MULTINODE_STARTUP_FACTOR`` times the single-node one;
workers run no process (they serve no HTTP) and are Running/Ready at once; only the leader is a
scrape target and an endpoint.
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

from specserver_advisor.launch import expansion
from specserver_engine.ports import free_loopback_port

#: Node names: NODE_PREFIX + index (``--node-prefix`` extends it: NODE_PREFIX + extension +
#: index). Every Node whose name starts with NODE_PREFIX is a node agent's: one that is not in the
#: running agent's pool is a stale one (an earlier agent's, in the same control plane) and is
#: deleted at start, so the pool's shape is all the scheduler can place on.
NODE_PREFIX = "specserver-dev-node-"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
#: Seconds between Lease renewals and Ready heartbeats (a kubelet's default lease is 40 s).
HEARTBEAT_S = 10.0
LEASE_S = 40
#: Wall seconds a deleted pod's engine keeps serving its in-flight requests (not new ones).
DRAIN_S = 5.0
SELECTOR = "app.kubernetes.io/managed-by=specserver"
#: A multi-node group's simulated start-up relative to one node's (``--startup-seconds``): each
#: node loads its own shard in parallel, but the group starts when the slowest node has, after
#: the cross-node NCCL rendezvous and communicator set-up of the TP group. The node agent's figure
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


def _now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class NodeShape:
    """What each simulated node offers the scheduler."""

    count: int = 4
    gpus: int = 8
    cpu: str = "256"
    memory: str = "2Ti"
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"
    #: what the node names carry after NODE_PREFIX, before the index (a DNS-1123 label part)
    prefix: str = ""

    def names(self) -> list[str]:
        return [f"{NODE_PREFIX}{self.prefix}{i}" for i in range(self.count)]

    def node(self, name: str) -> dict[str, Any]:
        """The Node object (status included: capacity and allocatable)."""
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": "110",
            "nvidia.com/gpu": str(self.gpus),
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    GPU_PRODUCT_LABEL: self.gpu_product,
                },
            },
            "status": {"capacity": capacity, "allocatable": capacity},
        }


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
    #: its exit is in the agent's log (said once)
    exit_logged: bool = False

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
    shape: NodeShape = field(default_factory=NodeShape)
    coord: Any = None
    engines: dict[str, Engine] = field(default_factory=dict)
    #: uids of bound pods that are not engines, reported Running with no process
    others: set[str] = field(default_factory=set)
    last_heartbeat: float = 0.0

    def register_nodes(self) -> None:
        """Create (or refresh) every node of the pool, its Lease, its Ready condition; delete
        the stale agent nodes (``NODE_PREFIX``) outside the pool first: with the node lifecycle
        controller off (scripts/devcluster.py) an earlier agent's Nodes stay Ready and
        schedulable after it stops, and would offer the scheduler GPUs nothing runs on."""
        mine = set(self.shape.names())
        for stale in self.core.list_node().items:
            name = stale.metadata.name
            if name.startswith(NODE_PREFIX) and name not in mine:
                try:
                    self.core.delete_node(name)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
        for name in self.shape.names():
            node = self.shape.node(name)
            try:
                self.core.create_node(node)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            self.core.patch_node_status(name, {"status": node["status"]})
            # The apiserver taints a new Node not-ready (TaintNodesByCondition); the node
            # lifecycle controller, which would lift it, is off on the dev cluster.
            self.core.patch_node(name, {"spec": {"taints": None}})
        self.heartbeat()

    def heartbeat(self) -> None:
        """Renew each node's Lease and Ready condition, as a kubelet does."""
        self.last_heartbeat = time.monotonic()
        for name in self.shape.names():
            self.renew_lease(name)
            self.mark_ready(name)

    def renew_lease(self, name: str) -> None:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": LEASE_S,
                "renewTime": _now_micro(),
            },
        }
        if self.coord is None:
            return
        try:
            self.coord.patch_namespaced_lease(name, "kube-node-lease", {"spec": lease["spec"]})
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.coord.create_namespaced_lease("kube-node-lease", lease)

    def mark_ready(self, name: str) -> None:
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
        self.core.patch_node_status(name, status)

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
                "podIP": "127.0.0.1",
                "hostIP": "127.0.0.1",
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

    def report_other(self, pod: Any) -> None:
        """A bound pod that is no engine: Running and Ready, with no process behind it."""
        now = _now()
        conds = [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        status = {
            "status": {
                "phase": "Running",
                "startTime": now,
                "podIP": "127.0.0.1",
                "hostIP": "127.0.0.1",
                "conditions": conds,
                "containerStatuses": [
                    {
                        "name": c.name,
                        "ready": True,
                        "restartCount": 0,
                        "image": c.image or "",
                        "imageID": "",
                        "started": True,
                        "state": {"running": {"startedAt": now}},
                    }
                    for c in pod.spec.containers
                ],
            }
        }
        try:
            self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, status)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def finish_deletion(self, pod: Any) -> bool:
        """Graceful deletion as a kubelet does it: out of the endpoints at once, in-flight
        requests get DRAIN_S to finish, then the engine stops and the pod is gone. True while
        the pod still drains."""
        uid = pod.metadata.uid
        engine = self.engines.get(uid)
        if engine is not None:
            since = engine.terminating_since or time.monotonic()
            engine.terminating_since = since
            if time.monotonic() - since < DRAIN_S:
                return True
        self.stop(uid)
        self.others.discard(uid)
        try:
            self.core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
        return False

    def step(self) -> None:
        if time.monotonic() - self.last_heartbeat >= HEARTBEAT_S:
            self.heartbeat()
        mine = set(self.shape.names())
        pods = [
            pod
            for pod in self.core.list_pod_for_all_namespaces().items
            if pod.spec.node_name in mine
        ]
        alive = set()
        for pod in pods:
            uid = pod.metadata.uid
            if pod.metadata.deletion_timestamp is not None:
                if self.finish_deletion(pod):
                    alive.add(uid)
                continue
            alive.add(uid)
            if uid in self.engines or uid in self.others:
                continue
            if (pod.status.phase or "") in ("Succeeded", "Failed"):
                continue  # ran here before this agent started; a kubelet does not rerun it
            if (pod.metadata.labels or {}).get("app.kubernetes.io/managed-by") == "specserver":
                self.engines[uid] = self.start(pod)
                self.report(self.engines[uid], False)
            else:
                self.others.add(uid)
                self.report_other(pod)
        self.others &= alive
        for uid in list(self.engines):
            if uid not in alive:
                self.stop(uid)
        for engine in self.engines.values():
            if engine.proc is None:
                continue  # a worker: Ready since it started (report above)
            exited = engine.proc.poll() is not None
            ready = not exited and _ready(engine.url)
            if exited and not engine.exit_logged:
                # Reported Failed: the scheduler frees its GPUs for whatever is Pending.
                engine.exit_logged = True
                rc = engine.proc.returncode
                print(f"engine {engine.namespace}/{engine.pod} exited ({rc})", flush=True)
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
    defaults = NodeShape()
    p.add_argument("--nodes", type=int, default=defaults.count, help="simulated nodes")
    p.add_argument("--node-gpus", type=int, default=defaults.gpus, help="nvidia.com/gpu per node")
    p.add_argument("--node-cpu", default=defaults.cpu, help="CPU capacity per node")
    p.add_argument("--node-memory", default=defaults.memory, help="memory capacity per node")
    p.add_argument(
        "--gpu-product", default=defaults.gpu_product, help=f"the nodes' {GPU_PRODUCT_LABEL} label"
    )
    p.add_argument(
        "--node-prefix",
        default="",
        help=f"node names are {NODE_PREFIX}<this><index> (a fresh pool: no earlier pod bound)",
    )
    args = p.parse_args(argv)
    longest = f"{NODE_PREFIX}{args.node_prefix}{max(args.nodes - 1, 0)}"
    if len(longest) > 63:  # also the kubernetes.io/hostname label's value
        p.error(f"--node-prefix: node name {longest!r} is over 63 characters")
    config.load_kube_config(args.kubeconfig)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    agent = Agent(
        client.CoreV1Api(),
        args.state_dir,
        args.targets_file,
        args.time_scale,
        args.startup_seconds,
        shape=NodeShape(
            args.nodes,
            args.node_gpus,
            args.node_cpu,
            args.node_memory,
            args.gpu_product,
            args.node_prefix,
        ),
        coord=client.CoordinationV1Api(),
    )
    agent.register_nodes()
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
