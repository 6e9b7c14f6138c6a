"""A real Prometheus server on loopback for the demo and the tests (Debian's package).

Scrapes targets listed in a file-based service-discovery file (``targets.json``), which is what
the local node agent and the tests write, with the labels a PodMonitor would attach
(``namespace``, ``specserver``, ``pod``). Standard library only; used by ``scripts/devprom``
and by tests/conftest.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from devcluster import running_pid, spawn_detached, terminate  # noqa: E402

LOOPBACK = "127.0.0.1"


class DevPromError(RuntimeError):
    """Prometheus could not be installed or started."""


def ensure_prometheus() -> str:
    """The prometheus binary, installing Debian's package when missing."""
    found = shutil.which("prometheus")
    if found:
        return found
    if os.geteuid() != 0:
        raise DevPromError("prometheus is not installed; run: sudo apt-get install -y prometheus")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-qq"], check=True, env=env
    )
    subprocess.run(
        [
            "apt-get",
            "-o",
            "DPkg::Lock::Timeout=600",
            "install",
            "-y",
            "-qq",
            "--no-install-recommends",
            "prometheus",
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    # The package starts a system service on :9090; this project runs its own on loopback.
    subprocess.run(
        [
            "sh",
            "-c",
            "command -v systemctl >/dev/null && systemctl stop prometheus "
            "|| pkill -x prometheus || true",
        ],
        check=False,
    )
    found = shutil.which("prometheus")
    if not found:
        raise DevPromError("prometheus package installed but no binary on PATH")
    return found


@dataclass(frozen=True)
class DevProm:
    """One Prometheus: state directory and port."""

    state_dir: Path
    port: int = 19090
    scrape_interval: str = "1s"
    #: Keep the target's own namespace/specserver labels (one exporter for many SpecServers).
    honor_labels: bool = False

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def targets_file(self) -> Path:
        return self.state_dir / "targets.json"

    @property
    def operator_targets_file(self) -> Path:
        """The operator's own /metrics (job ``specserver-operator``, labels honoured as the
        PodMonitor in manifests/monitoring/ does)."""
        return self.state_dir / "operator-targets.json"

    def write_operator_targets(self, targets: list[str]) -> None:
        """Replace the operator metrics targets (host:port on loopback)."""
        tmp = self.operator_targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": targets, "labels": {}}] if targets else []))
        tmp.replace(self.operator_targets_file)

    def pid(self) -> int | None:
        return running_pid(self.state_dir / "prometheus.pid")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def write_targets(self, groups: list[dict[str, object]]) -> None:
        """Replace the scrape targets (atomically: Prometheus may read at any moment)."""
        tmp = self.targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self.targets_file)

    def up(self) -> None:
        """Start Prometheus (idempotent)."""
        if self.pid() and self.ready():
            return
        self.down()
        binary = ensure_prometheus()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if not self.targets_file.exists():
            self.write_targets([])
        config = self.state_dir / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {self.scrape_interval}\n"
            f"  evaluation_interval: {self.scrape_interval}\n"
            "scrape_configs:\n"
            "  - job_name: sglang\n"
            f"    honor_labels: {'true' if self.honor_labels else 'false'}\n"
            "    file_sd_configs:\n"
            f"      - files: ['{self.targets_file}']\n"
            "        refresh_interval: 1s\n"
            "  - job_name: specserver-operator\n"
            "    honor_labels: true\n"
            "    file_sd_configs:\n"
            f"      - files: ['{self.operator_targets_file}']\n"
            "        refresh_interval: 1s\n"
        )
        if not self.operator_targets_file.exists():
            self.write_operator_targets([])
        logfile = self.state_dir / "prometheus.log"
        spawn_detached(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.state_dir / 'data'}",
                f"--web.listen-address={LOOPBACK}:{self.port}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=1d",
            ],
            logfile,
            self.state_dir / "prometheus.pid",
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.ready():
                return
            if self.pid() is None:
                raise DevPromError(f"prometheus exited:\n{logfile.read_text()[-2000:]}")
            time.sleep(0.3)
        raise DevPromError(f"prometheus not ready after 60s; see {logfile}")

    def down(self) -> None:
        """Stop it and drop its data."""
        pid = self.pid()
        if pid is not None:
            terminate(pid)
        (self.state_dir / "prometheus.pid").unlink(missing_ok=True)
        shutil.rmtree(self.state_dir / "data", ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """CLI: up | down | status | install."""
    parser = argparse.ArgumentParser(prog="scripts/devprom")
    parser.add_argument("command", choices=["up", "down", "status", "install"])
    parser.add_argument("--state-dir", type=Path, default=REPO / ".devcluster" / "prometheus")
    parser.add_argument("--port", type=int, default=19090)
    args = parser.parse_args(argv)
    prom = DevProm(args.state_dir.resolve(), args.port)
    try:
        if args.command == "install":
            print(ensure_prometheus())
        elif args.command == "up":
            prom.up()
            print(prom.url)
        elif args.command == "down":
            prom.down()
        else:
            print(
                json.dumps(
                    {
                        "url": prom.url,
                        "ready": prom.ready(),
                        "pid": prom.pid(),
                        "targets": str(prom.targets_file),
                    },
                    indent=2,
                )
            )
    except (DevPromError, subprocess.CalledProcessError) as exc:
        print(f"devprom: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
