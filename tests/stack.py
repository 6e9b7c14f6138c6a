"""What the tests share besides fixtures: repo paths, the bundled configs, the handle on the local
control plane, the simulated engine's process, the common launch.

Tests import these names from here (``from stack import REPO``); ``conftest.py`` holds only
fixtures and hooks and is never imported as a module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
TEST_BASE_PORT = int(os.environ.get("SPECSERVER_TEST_BASE_PORT", "26443"))
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
        import time
        import urllib.error
        import urllib.request

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
