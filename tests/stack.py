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
        done = kube.kubectl(
            "create",
            "--dry-run=server",
            "-n",
            namespace,
            "-f",
            "-",
            input=json.dumps(pod),
            check=False,
        )
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
