"""``/healthz`` on the real stack: the operator as a process whose API server stops answering
(a loopback relay in front of the real apiserver stalls every byte), so no cycle can complete;
the liveness probe must fail then, and answer 200 again once the API server answers."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from test_operator_e2e import apply, example, get, wait_for
from test_operator_faults_e2e import Operator, recreated_after_delete

from conftest import KubeHandle


class StallingRelay:
    """A loopback TCP relay to the apiserver; while ``stalled`` is set it relays no byte in
    either direction (connections stay open, new ones are accepted and held): an API server
    that stopped answering, as seen by one client only."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stalled = threading.Event()
        self.closed = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.closed.is_set():
            try:
                client = self.sock.accept()[0]
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                continue
            self.conns += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.2)
        try:
            while not self.closed.is_set():
                if self.stalled.is_set():
                    time.sleep(0.1)
                    continue
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        self.sock.close()
        for conn in self.conns:
            conn.close()


def relayed_kubeconfig(kube: KubeHandle, relay: StallingRelay, path: Path) -> Path:
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
    kube: KubeHandle, namespace: str, tmp_path: Path
) -> None:
    server = urlparse(kube.server)
    relay = StallingRelay(server.hostname or "127.0.0.1", server.port or 443)
    config = relayed_kubeconfig(kube, relay, tmp_path / "kubeconfig")
    operator = Operator(
        kube, KUBECONFIG=str(config), SPECSERVER_CYCLE_SECONDS="2", SPECSERVER_VERBOSE="1"
    )
    try:
        operator.start()
        apply(kube, namespace, example())
        wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
        assert healthz(operator.port) == 200
        relay.stalled.set()
        stalled_at = time.monotonic()
        # Four intervals, 30 s at least: the probe fails within that and a little slack.
        code = wait_for(
            lambda: (c := healthz(operator.port)) not in (200, None) and c, 50, "/healthz to fail"
        )
        assert code >= 500 and time.monotonic() - stalled_at >= 25
        assert operator.proc is not None and operator.proc.poll() is None
        relay.stalled.clear()
        wait_for(lambda: healthz(operator.port) == 200, 90, "/healthz 200 after recovery")
        recreated_after_delete(kube, namespace, "qwen3-8b", 60)  # the cycle works again
    except AssertionError as exc:  # what the operator did is the diagnosis
        raise AssertionError(f"{exc}\n--- operator log (tail) ---\n{log_tail(operator)}") from exc
    finally:
        operator.stop()
        relay.close()
