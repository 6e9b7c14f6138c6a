"""Issue 13 on the real local control plane: the operator runs as the ServiceAccount of
manifests/rbac.yaml, a tenant with rights on SpecServers only writes hostile SpecServers, and
loopback listeners record every request the operator sends (docs/security.md)."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tenancy import (
    LEAK,
    Recorder,
    free_port,
    install,
    kubeconfig,
    sa_token,
    start_operator,
    stop,
    wait_cycles,
)
from test_operator_e2e import condition

from specserver_engine.ports import free_loopback_port
from stack import REPO, KubeHandle, load_config, pod_security_refusals, wait_for

pytestmark = pytest.mark.cluster

SA = "system:serviceaccount:specserver-system:specserver-operator"
EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


@pytest.fixture(scope="module")
def installed(kube: KubeHandle) -> KubeHandle:
    return install(kube)


def _documented_rights(table: str = "rbac-snapshot") -> dict[str, set[str]]:
    text = (REPO / "docs" / "security.md").read_text()
    block = text.split(f"<!-- {table}: begin -->")[1].split(f"<!-- {table}: end -->")[0]
    rights = {}
    for m in re.finditer(r"^\| `([^`]+)` \| ([a-z, ]+) \|$", block, re.M):
        rights[m.group(1)] = {v.strip() for v in m.group(2).split(",")}
    assert rights, "no RBAC table in docs/security.md"
    return rights


def _can_i_list(kube: KubeHandle, namespace: str) -> dict[str, set[str]]:
    out = kube.kubectl("auth", "can-i", "--list", "--as", SA, "-n", namespace).stdout
    rights: dict[str, set[str]] = {}
    for line in out.splitlines()[1:]:
        m = re.match(r"^(\S+)\s+\[.*?\]\s+\[.*?\]\s+\[(.*)\]\s*$", line)
        if m:  # rows with a resource (non-resource URL rows start with blanks)
            rights.setdefault(m.group(1), set()).update(m.group(2).split())
    return rights


def test_service_account_rights_match_the_documented_set(
    installed: KubeHandle, namespace: str
) -> None:
    assert _can_i_list(installed, namespace) == _documented_rights()
    assert _can_i_list(installed, "kube-system") == _documented_rights()
    own = _documented_rights() | _documented_rights("rbac-own-namespace")
    assert _can_i_list(installed, "specserver-system") == own


def test_operator_pod_passes_restricted(
    kube: KubeHandle, installed: KubeHandle, namespace: str
) -> None:
    """The installed operator's pod, dry-run created in a namespace where the apiserver's Pod
    Security admission enforces "restricted", is admitted."""
    done = installed.kubectl(
        "get", "deploy", "specserver-operator", "-n", "specserver-system", "-o", "json"
    )
    assert pod_security_refusals(kube, namespace, json.loads(done.stdout)) == []


def _metrics(host: str, port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=3) as resp:
            return str(resp.read().decode())
    except OSError:
        return None


def _config_for(path: str) -> bytes:
    name = "qwen3-8b-eagle3" if "eagle" in path else "qwen3-8b"
    return json.dumps(load_config(name)).encode()


def _spec(name: str, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["name"] = name
    spec = doc["spec"]
    spec["autoSpeculation"] = {"evaluationIntervalSeconds": 5}
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            spec.setdefault(section, {})[field] = value
        else:
            spec[section] = value
    return doc


@pytest.fixture
def tenant(installed: KubeHandle, namespace: str, tmp_path: Path) -> Iterator[Path]:
    """A ServiceAccount in ``namespace`` allowed SpecServers only; its kubeconfig."""
    rbac = f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: tenant, namespace: {namespace}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: specservers-only, namespace: {namespace}}}
rules:
  - apiGroups: [specserver.io]
    resources: [specservers, specservers/status]
    verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: tenant, namespace: {namespace}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: specservers-only}}
subjects: [{{kind: ServiceAccount, name: tenant, namespace: {namespace}}}]
"""
    installed.kubectl("apply", "-f", "-", input=rbac)
    token = sa_token(installed, namespace, "tenant")
    yield kubeconfig(tmp_path / "tenant.kubeconfig", installed.server, token)


def test_tenant_gets_no_secret_out_of_the_operator(
    installed: KubeHandle, namespace: str, tenant: Path, tmp_path: Path
) -> None:
    kube = installed
    victim_value, tenant_value, admin_value = (secrets.token_hex(16) for _ in range(3))
    victim = f"{namespace}-victim"
    kube.kubectl("create", "namespace", victim)
    kube.kubectl(
        "create",
        "secret",
        "generic",
        "prod-api",
        "-n",
        victim,
        f"--from-literal=token={victim_value}",
    )
    kube.kubectl(
        "create",
        "secret",
        "generic",
        "hf-token",
        "-n",
        namespace,
        f"--from-literal=token={tenant_value}",
    )
    first = free_port(set())
    a, b = Recorder(first), Recorder(free_port({first}))
    a.routes = [
        (
            "/hf-allowed",
            lambda p: (302, {"Location": b.url + p.replace("/hf-allowed", "/cdn")}, b""),
        ),
        ("/prom-allowed", lambda p: (403, {}, LEAK.encode())),
        ("/", lambda p: (403, {}, LEAK.encode())),
    ]
    b.routes = [("/cdn", lambda p: (200, {}, _config_for(p)))]
    admin_token = tmp_path / "admin-hf-token"
    admin_token.write_text(admin_value)
    op_config = kubeconfig(
        tmp_path / "operator.kubeconfig",
        kube.server,
        sa_token(kube, "specserver-system", "specserver-operator"),
    )
    log_path = tmp_path / "operator.log"
    settings = {
        "SPECSERVER_PROMETHEUS_ALLOWED_URLS": a.url + "/prom-allowed",
        "SPECSERVER_HF_ALLOWED_ENDPOINTS": a.url + "/hf-allowed",
        "SPECSERVER_HF_TOKEN_FILE": str(admin_token),
        "SPECSERVER_METRICS_PORT": str(metrics_port := free_loopback_port()),
    }
    proc = start_operator(op_config, namespace, settings, log_path)
    try:

        def tenant_apply(
            doc: dict[str, Any], check: bool = True
        ) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["kubectl", "--kubeconfig", str(tenant), "apply", "-n", namespace, "-f", "-"],
                input=json.dumps(doc),
                capture_output=True,
                text=True,
                timeout=60,
                check=check,
            )

        unknown = {"path": "org/not-bundled-model"}
        tenant_apply(
            _spec(
                "plain",
                model=unknown,
                modelSource={
                    "hfEndpoint": a.url + "/hf-plain",
                    "hfTokenSecretRef": {"name": "hf-token"},
                },
            )
        )
        refused = tenant_apply(
            _spec(
                "traversal",
                model=unknown,
                modelSource={
                    "hfEndpoint": a.url + "/hf-plain",
                    "hfTokenSecretRef": {"name": f"../../{victim}/secrets/prod-api"},
                },
            ),
            check=False,
        )
        assert refused.returncode != 0 and "hfTokenSecretRef.name" in refused.stderr
        tenant_apply(
            _spec(
                "redirect",
                model={"path": "org/qwen3-8b"},
                draft={"path": "org/eagle-draft"},
                # No hfTokenSecretRef: no review approved one here (test_secret_grants_e2e.py).
                modelSource={"hfEndpoint": a.url + "/hf-allowed"},
            )
        )
        tenant_apply(
            _spec(
                "prom-allowed",
                autoSpeculation={
                    "prometheusUrl": a.url + "/prom-allowed",
                    "evaluationIntervalSeconds": 5,
                },
            )
        )
        tenant_apply(
            _spec(
                "prom-denied",
                autoSpeculation={
                    "prometheusUrl": a.url + "/prom-denied",
                    "evaluationIntervalSeconds": 5,
                },
            )
        )
        tenant_apply(_spec("config-file", engine__extraArgs=["--config", "/models/x.yaml"]))
        tenant_apply(
            _spec("model-override", engine__extraArgs=["--json-model-override-args", "{}"])
        )
        tenant_apply(_spec("host-path", modelSource={"volume": {"hostPath": "/"}}))
        tenant_apply(_spec("remote-code", engine__extraArgs=["--trust-remote"]))

        def sps(name: str) -> dict[str, Any] | None:
            got = kube.kubectl("get", "sps", name, "-n", namespace, "-o", "json", check=False)
            return json.loads(got.stdout) if got.returncode == 0 else None

        def reason(name: str, type_: str) -> tuple[str, str, str] | None:
            c = condition(sps(name), type_)
            return (c["status"], c["reason"], c["message"]) if c else None

        plain = wait_for(lambda: reason("plain", "ConfigValid"), 90, "plain ConfigValid")
        assert plain[0] == "Unknown" and "allow-list" in plain[2]
        assert (
            wait_for(lambda: reason("config-file", "ConfigValid"), 60, "config")[1]
            == "OwnedFlagInExtraArgs"
        )
        override = wait_for(lambda: reason("model-override", "ConfigValid"), 60, "override")
        assert override[:2] == ("False", "OwnedFlagInExtraArgs")
        assert "--json-model-override-args" in override[2]
        assert (
            wait_for(lambda: reason("host-path", "ConfigValid"), 60, "hostPath")[1]
            == "PodPolicyRefused"
        )
        remote = wait_for(lambda: reason("remote-code", "ConfigValid"), 60, "remote code")
        assert remote[:2] == ("False", "PodPolicyRefused") and "--trust-remote-code" in remote[2]
        assert "SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS" in remote[2]
        no_engine = kube.kubectl("get", "deploy", "remote-code", "-n", namespace, check=False)
        assert no_engine.returncode != 0
        allowed = wait_for(
            lambda: (r := reason("prom-allowed", "MetricsAvailable")) and "403" in r[2] and r,
            90,
            "403",
        )
        assert allowed[0] == "False" and "HTTP 403 Forbidden" in allowed[2]
        denied = wait_for(lambda: reason("prom-denied", "MetricsAvailable"), 60, "denied")
        assert "allow-list" in denied[2]
        deployment = wait_for(
            lambda: (
                json.loads(got.stdout)
                if (
                    got := kube.kubectl(
                        "get", "deploy", "redirect", "-n", namespace, "-o", "json", check=False
                    )
                ).returncode
                == 0
                else None
            ),
            90,
            "the redirect SpecServer's engine",
        )
        assert pod_security_refusals(kube, namespace, deployment) == []
        assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
        # /metrics lists every tenant's SpecServers: loopback only unless the admin opens it
        # (127.0.0.2 is this host too; a listener on 0.0.0.0 would answer there).
        series = wait_for(lambda: _metrics("127.0.0.1", metrics_port), 30, "operator metrics")
        assert f'namespace="{namespace}"' in series
        assert _metrics("127.0.0.2", metrics_port) is None
        # The engines' NetworkPolicy is valid in a SpecServer namespace (the operator's own
        # came with manifests/).
        kube.kubectl(
            "apply", "-n", namespace, "-f", str(REPO / "manifests" / "networkpolicy-engines.yaml")
        )
        wait_cycles(metrics_port, 3)  # a few more cycles: every repeat would be recorded too
        events = kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
        assert "OwnedFlagInExtraArgs" in events  # the operator may post events
    finally:
        stop(proc)
        a.close()
        b.close()
        kube.kubectl("delete", "namespace", victim, "--wait=false", check=False)
    recorded = a.requests + b.requests
    sent = json.dumps(recorded)
    for value in (victim_value, tenant_value):
        assert value not in sent
    assert not any(p.startswith(("/hf-plain", "/prom-denied")) for p, _ in a.requests)
    assert any(p.startswith("/prom-allowed") for p, _ in a.requests)
    hf = [(p, h) for p, h in a.requests if p.startswith("/hf-allowed")]
    assert hf and all(h.get("Authorization") == f"Bearer {admin_value}" for _, h in hf)
    assert b.requests and all("Authorization" not in h for _, h in b.requests)
    statuses = kube.kubectl("get", "sps", "-n", namespace, "-o", "json").stdout
    events = kube.kubectl("get", "events", "-n", namespace, "-o", "json").stdout
    log_text = log_path.read_text(errors="replace")
    for where, text in (("status", statuses), ("events", events), ("operator log", log_text)):
        assert "hunter2" not in text and "INTERNAL-ONLY" not in text, where
        assert admin_value not in text, where
    assert "is forbidden" not in log_text  # the ServiceAccount's rights were enough
