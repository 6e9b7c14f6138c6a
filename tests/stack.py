"""What the tests share besides fixtures: repo paths, the bundled configs, this process's loopback
ports, the handle on the local control plane, the operator's and the simulated engine's
processes, the common launch, and ``wait_for`` (the one way a test waits for something).

Tests import these names from here (``from stack import REPO``); ``conftest.py`` holds only
fixtures and hooks and is never imported as a module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from specserver_engine.ports import free_loopback_port

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"

#: Each pytest-xdist worker (``gw0``, ``gw1``, ...; none: index 0) runs its own control plane and
#: Prometheus on its own block of PORT_STRIDE loopback ports above the configured ones, so the
#: cluster tier can be split across processes (``-n 2 --dist loadfile``) and run beside another
#: checkout's. Within a block, from TEST_BASE_PORT: +0 the apiserver, +1 and +2 its etcd, +3 and
#: +4 LeaderWorkerSet's webhook and health probe, +5 and +6 Kueue's (only while a test that asks
#: for ``kueue`` runs) (scripts/devcluster.py; the controller-manager and scheduler serve no
#: port, engines take free ephemeral ones); +10..+49 the tests' own
#: listeners (tests/cluster/tenancy.py); +50..+56 the demo the e2e test runs
#: (tests/e2e/test_closed_loop.py).
#: The state directories follow pytest's per-worker ``tmp_path_factory``.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WORKER_INDEX = int(WORKER[2:]) if WORKER[:2] == "gw" and WORKER[2:].isdigit() else 0
PORT_STRIDE = 100
TEST_BASE_PORT = (
    int(os.environ.get("SPECSERVER_TEST_BASE_PORT", "26443")) + PORT_STRIDE * WORKER_INDEX
)
TEST_PROM_PORT = (
    int(os.environ.get("SPECSERVER_TEST_PROM_PORT", "29090")) + PORT_STRIDE * WORKER_INDEX
)
#: The hostile Prometheus and HF endpoint the shared operator allows (its allow-lists are read at
#: its start): free loopback ports of this process, as the OS hands them out (a fixed port in the
#: ephemeral range could be any client's).
TARPIT_PORT, DRIP_PORT = free_loopback_port(), free_loopback_port()
#: The fixtures that start the real local control plane or Prometheus (conftest.py): a test that
#: uses one, directly or through another fixture, is marked ``cluster``; ``-m "not cluster"``
#: selects the fast tier.
CLUSTER_FIXTURES = frozenset({"kube", "prom"})


def load_script(name: str) -> ModuleType:
    """Import scripts/<name>.py (a script, not a package module) as the module ``name``."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_devcluster() -> ModuleType:
    """Import scripts/devcluster.py."""
    return load_script("devcluster")


def load_config(name: str) -> dict[str, Any]:
    """A bundled model config.json (advisor/specserver_advisor/data/configs)."""
    path = REPO / "advisor" / "specserver_advisor" / "data" / "configs" / f"{name}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@dataclass
class KubeHandle:
    """How tests reach the local apiserver."""

    kubeconfig: Path
    server: str
    #: the CA of the client certificate the apiserver shows admission webhooks (devcluster.py)
    webhook_client_ca: Path | None = None

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{done.stderr}")
        return done

    def env(self) -> dict[str, str]:
        return dict(os.environ, KUBECONFIG=str(self.kubeconfig))


#: The labels that make the apiserver's own Pod Security admission enforce "restricted" on a
#: namespace (every test namespace carries them: conftest.py's ``namespace``).
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates (``{"metadata", "spec"}``) of a Deployment, a LeaderWorkerSet (leader
    and worker) or a Pod."""
    if obj.get("kind") == "Pod":
        return [{"metadata": obj.get("metadata", {}), "spec": obj["spec"]}]
    if obj.get("kind") == "LeaderWorkerSet":
        tpl = obj["spec"]["leaderWorkerTemplate"]
        return [t for t in (tpl.get("leaderTemplate"), tpl["workerTemplate"]) if t]
    return [obj["spec"]["template"]]


def dry_run_create(
    kube: KubeHandle, namespace: str, obj: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """``kubectl create --dry-run=server`` of ``obj`` in ``namespace``: the apiserver's whole
    admission (schema, CEL rules, Pod Security, webhooks) judges it and nothing is stored."""
    return kube.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False
    )


def pod_security_refusals(kube: KubeHandle, namespace: str, obj: dict[str, Any]) -> list[str]:
    """What the apiserver's Pod Security admission says about each pod ``obj`` would make, in
    ``namespace`` (which enforces "restricted"): a server-side dry run of each pod, so nothing
    is created; [] when all are admitted."""
    refusals = []
    for i, template in enumerate(pod_templates(obj)):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"pss-probe-{i}",
                "labels": dict((template.get("metadata") or {}).get("labels") or {}),
            },
            "spec": {**template["spec"], "serviceAccountName": "default"},
        }
        done = dry_run_create(kube, namespace, pod)
        if done.returncode != 0:
            refusals.append(done.stderr.strip())
    return refusals


def render_example(path: Path) -> list[dict[str, Any]]:
    """The children the operator renders for a shipped example (in namespace ``llm``): its
    Deployment or LeaderWorkerSet and Service; under BlueGreen, the first deploy's two."""
    import yaml

    from specserver_advisor.lint.launchlint import build_engine_config
    from specserver_advisor.loaders.configchain import ModelConfigs
    from specserver_advisor.loaders.configs import bundled
    from specserver_advisor.models import Mode, SpecServer
    from specserver_operator.core import bluegreen
    from specserver_operator.core.render import build_blue_green, build_children

    doc = yaml.safe_load(path.read_text())
    doc["metadata"]["namespace"] = "llm"
    server = SpecServer.model_validate(doc)
    target = bundled(server.spec.model.path)
    draft = bundled(server.spec.draft.path) if server.spec.draft else None
    assert target is not None
    configs = ModelConfigs(target.config, draft.config if draft else None, None, None, "t")
    cfg = build_engine_config(server.spec, configs, server.spec.mode != Mode.DISABLED)
    assert cfg.valid, cfg.message
    uid = "00000000-0000-0000-0000-000000000000"
    auto = server.spec.auto_speculation
    if auto is not None and auto.switch_strategy.value == "BlueGreen":
        # First deploy: the wanted mode serves, the other is rendered as the standby at zero.
        want = "on" if cfg.speculative else "off"
        other = build_engine_config(server.spec, configs, not cfg.speculative)
        modes = {want: cfg, bluegreen.other(want): other}
        plan = bluegreen.plan(want, server.spec.replicas, None, {}, {})
        children: list[dict[str, Any]] = build_blue_green(
            server, uid, modes, plan.replicas, plan.serve
        )
        return children
    return list(build_children(server, uid, cfg))


def load_devprom() -> ModuleType:
    """Import scripts/devprom.py."""
    return load_script("devprom")


QWEN_EAGLE3 = [
    "--model-path",
    "Qwen/Qwen3-8B",
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
    "--mem-fraction-static",
    "0.85",
]


@dataclass
class Simulator:
    """A running ``specserver-engine simulate`` process."""

    url: str
    port: int
    process: subprocess.Popen[str]

    def wait_ready(self, timeout: float = 30.0) -> None:
        import urllib.error

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"simulator exited: {self.process.stdout.read()}")  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(f"{self.url}/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise AssertionError("simulator not ready in time")


T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str, poll_s: float = 0.5) -> T:
    """Call ``check`` until it returns something true, and return that. ``timeout`` (seconds of
    wall time) is only a backstop against a hang: past it the test fails saying ``what`` never
    happened. A verdict about pace counts steps (``Operator.wait_cycles``), never wall time."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} never happened ({timeout:g} s backstop)")
        time.sleep(poll_s)


def events(kube: KubeHandle, namespace: str, reason: str | None = None) -> list[dict[str, Any]]:
    """The Events in ``namespace`` (those with ``reason`` when given), read from the apiserver."""
    done = kube.kubectl("get", "events", "-n", namespace, "-o", "json")
    items = json.loads(done.stdout)["items"]
    return [e for e in items if reason is None or e.get("reason") == reason]


def scrape(url: str, name: str) -> float:
    """One sample of a Prometheus text exposition at ``url`` (0 when it has none yet)."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def counted(read: Callable[[], float], steps: int, timeout: float, what: str) -> float:
    """Wait until the counter ``read`` has gone ``steps`` past its value now, plus one for the
    step under way (so ``steps`` whole steps began after this call); the counter then. This is
    how a test says "nothing happens within N cycles": a count of the operator's own steps, as
    slow as the machine is, not a number of seconds."""
    start = read()
    return wait_for(
        lambda: (now := read()) >= start + steps + 1 and now, timeout, f"{steps} more {what}"
    )


def operator_env(kube: KubeHandle, **env: str) -> dict[str, str]:
    """The environment of an operator process the tests start as the cluster's admin.

    These operators run without the webhook that records Secret grants, and judge the shipped
    examples (which name a Secret) as an admin writes them; the grant path itself is
    test_secret_grants_e2e.py's (its operator gets the default, approval required)."""
    base = {
        "KUBECONFIG": str(kube.kubeconfig),
        "SPECSERVER_REQUIRE_SECRET_APPROVAL": "false",
        "PYTHONUNBUFFERED": "1",
    }
    return {**os.environ, **base, **env}


def http_ok(url: str) -> bool:
    """Whether ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


#: The shared operator of this process once a test asked for it (tests/cluster/conftest.py).
SHARED_OPERATORS: list[Operator] = []


def stop_shared_operators() -> None:
    """Stop the shared operator (if running): before a fixture or test starts an operator of
    its own, since two over the same namespaces would each act (it starts again for the next
    test that asks for ``operator``)."""
    for op in SHARED_OPERATORS:
        op.stop()


class Operator:
    """A ``specserver-operator`` process against the local apiserver (every namespace unless
    ``args`` say ``-n``), as the cluster's admin, with ``env`` on top of ``operator_env``: its
    liveness and metrics ports (new ones each start), its log file, its own counters. ``stop``
    then ``start`` is a restart. The fixtures in tests/cluster/conftest.py hand these out."""

    def __init__(self, kube: KubeHandle, *args: str, **env: str) -> None:
        self.kube = kube
        self.args, self.env = args, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = self.metrics_port = 0
        self.log_path = ""

    def start(self, wait: bool = True) -> None:
        self.port, self.metrics_port = free_loopback_port(), free_loopback_port()
        env = operator_env(self.kube, SPECSERVER_METRICS_PORT=str(self.metrics_port), **self.env)
        self.log_path = str(Path(tempfile.gettempdir()) / f"specserver-operator-{self.port}.log")
        self.log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specserver_operator.main",
                *self.args,
                "--liveness",
                f"http://127.0.0.1:{self.port}/healthz",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        if wait:
            healthz = f"http://127.0.0.1:{self.port}/healthz"
            wait_for(lambda: http_ok(healthz), 60, f"the operator's liveness at {healthz}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_size(self) -> int:
        """Bytes of this process's log so far (where a test's own part of it begins)."""
        return os.path.getsize(self.log_path)

    def log_text(self, since: int = 0) -> str:
        """This process's log from byte ``since`` (a shared operator's log holds every test's
        lines since it started)."""
        with open(self.log_path, "rb") as log:
            log.seek(since)
            return log.read().decode("utf-8", errors="replace")

    def metric(self, name: str) -> float:
        """One sample of the operator's own /metrics (0 when it has none yet)."""
        return scrape(f"http://127.0.0.1:{self.metrics_port}/metrics", name)

    def wait_cycles(self, cycles: int, timeout: float = 120) -> float:
        """Until ``cycles`` whole observation cycles began and ended after this call."""
        return counted(
            lambda: self.metric("specserver_cycles_total"), cycles, timeout, "operator cycles"
        )

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
            self.proc = None
