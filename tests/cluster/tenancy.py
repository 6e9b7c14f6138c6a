"""Helpers for tests/cluster/test_tenant_isolation.py: recording loopback listeners,
ServiceAccount kubeconfigs, and the operator as a process under given credentials and settings."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import loopbackhttp
from loopbackhttp import Answer, serve
from specserver_engine.ports import free_loopback_port
from stack import REPO, TEST_BASE_PORT, KubeHandle, counted, scrape

#: What a hostile listener answers (body and reason phrase); must never be read back.
LEAK = "INTERNAL-ONLY: db_password=hunter2-" + secrets.token_hex(4)
#: Ports for our listeners (this worker's block, stack.py; the first free ones are taken).
PORT_RANGE = range(TEST_BASE_PORT + 10, TEST_BASE_PORT + 50)


def install(kube: KubeHandle) -> KubeHandle:
    """``kubectl apply -k manifests/`` (the RBAC, the namespace, the operator's objects), less
    the ValidatingWebhookConfiguration: no operator pod runs on the dev cluster, so nothing
    serves the installed webhook, and its failurePolicy Fail (issue 37) would refuse every
    SpecServer write that follows. Tests that need the webhook serve their own."""
    kube.kubectl("apply", "-k", str(REPO / "manifests"))
    kube.kubectl("delete", "validatingwebhookconfiguration", "specserver-validation", check=False)
    return kube


def free_port(skip: set[int]) -> int:
    for port in PORT_RANGE:
        if port in skip:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in the test range")


class Recorder:
    """A loopback listener that records every request (path, headers) and answers by route."""

    def __init__(self, port: int) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.routes: list[tuple[str, Callable[[str], Answer]]] = []
        self.server, self.url = serve(self.answer, port, reason=LEAK)

    def answer(self, path: str, headers: dict[str, str]) -> Answer:
        self.requests.append((path, headers))
        for prefix, answer in self.routes:
            if path.startswith(prefix):
                return answer(path)
        return 404, {}, b""

    def close(self) -> None:
        loopbackhttp.stop(self.server)


def kubeconfig(path: Path, server: str, token: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }
    path.write_text(json.dumps(config))
    return path


def sa_token(kube: KubeHandle, namespace: str, name: str) -> str:
    """A token of a ServiceAccount from the TokenRequest API (``kubectl create token``: since
    1.24 no Secret holds one), valid for the test run."""
    done = kube.kubectl("create", "token", name, "-n", namespace, "--duration=2h")
    return done.stdout.strip()


def start_operator(
    config: Path, namespace: str, settings: dict[str, str], log_path: Path
) -> subprocess.Popen[bytes]:
    """``specserver-operator -n namespace`` with ``config`` as its only credentials and only
    ``settings`` of the SPECSERVER_* environment (cycles every second; the Lease in
    specserver-system unless ``settings`` says otherwise)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECSERVER_")}
    env.update(
        KUBECONFIG=str(config),
        PYTHONUNBUFFERED="1",
        SPECSERVER_CYCLE_SECONDS="1",
        SPECSERVER_QUERY_INTERVAL_SECONDS="1",
        # In a pod the Lease goes to the pod's namespace; out of one it would be `default`,
        # where the ServiceAccount has no Lease rights (manifests/rbac.yaml).
        SPECSERVER_LEASE_NAMESPACE="specserver-system",
    )
    env.update(settings)
    port = free_loopback_port()
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specserver_operator.main",
                "-n",
                namespace,
                "--liveness",
                f"http://127.0.0.1:{port}/healthz",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_cycles(metrics_port: int, cycles: int, timeout: float = 120) -> float:
    """Until ``cycles`` whole cycles of the operator serving /metrics on ``metrics_port`` began
    and ended after this call (its ``SPECSERVER_METRICS_PORT``)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    return counted(lambda: scrape(url, "specserver_cycles_total"), cycles, timeout, "cycles")
