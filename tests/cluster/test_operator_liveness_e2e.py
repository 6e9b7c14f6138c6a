"""``/healthz`` on the real stack: the operator as a process whose API server stops answering
(a loopback relay in front of the real apiserver stalls every byte), so no cycle can complete;
the liveness probe must fail then, and answer 200 again once the API server answers."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import pytest
from relays import PROMPT, STALL, Relay
from test_operator_e2e import apply, example, get
from test_operator_faults_e2e import recreated_after_delete

from stack import KubeHandle, Operator, wait_for

pytestmark = pytest.mark.cluster


def relayed_kubeconfig(kube: KubeHandle, relay: Relay, path: Path) -> Path:
    """The session's kubeconfig with the API server reached through ``relay``."""
    config = json.loads(kube.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    path.write_text(json.dumps(config))
    return path


def healthz(port: int) -> int | None:
    """The probe's HTTP status, None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


def log_tail(operator: Operator, lines: int = 150) -> str:
    """The operator's last log lines, without the probes' own chatter."""
    text = Path(operator.log_path).read_text(encoding="utf-8", errors="replace")
    kept = [line for line in text.splitlines() if "/healthz" not in line and "probe" not in line]
    return "\n".join(kept[-lines:])


def test_healthz_fails_while_no_cycle_completes_and_recovers(
    kube: KubeHandle, namespace: str, tmp_path: Path, own_operator: Callable[..., Operator]
) -> None:
    server = urlparse(kube.server)
    relay = Relay(server.hostname or "127.0.0.1", server.port or 443)
    config = relayed_kubeconfig(kube, relay, tmp_path / "kubeconfig")
    operator = own_operator(
        start=False, KUBECONFIG=str(config), SPECSERVER_CYCLE_SECONDS="2", SPECSERVER_VERBOSE="1"
    )
    try:
        operator.start()
        apply(kube, namespace, example())
        wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
        assert healthz(operator.port) == 200
        relay.policy = STALL
        stalled_at = time.monotonic()
        # Four intervals, 30 s at least: the probe fails once that passed with no cycle (not
        # before: a probe that failed sooner would restart a slow but working operator).
        code = wait_for(
            lambda: (c := healthz(operator.port)) not in (200, None) and c, 120, "/healthz to fail"
        )
        assert code >= 500 and time.monotonic() - stalled_at >= 25
        assert operator.proc is not None and operator.proc.poll() is None
        relay.policy = PROMPT
        wait_for(lambda: healthz(operator.port) == 200, 90, "/healthz 200 after recovery")
        recreated_after_delete(kube, namespace, "qwen3-8b", 60)  # the cycle works again
    except AssertionError as exc:  # what the operator did is the diagnosis
        raise AssertionError(f"{exc}\n--- operator log (tail) ---\n{log_tail(operator)}") from exc
    finally:
        operator.stop()
        relay.close()
