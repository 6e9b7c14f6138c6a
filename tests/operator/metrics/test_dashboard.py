"""The Grafana dashboard shipped in manifests/ covers what the closed-loop issue asks for."""

from __future__ import annotations

import json

from specserver_operator.metrics import registry as opmetrics
from stack import REPO


def test_dashboard_panels_query_real_metric_names() -> None:
    dash = json.loads((REPO / "manifests" / "grafana" / "specserver-dashboard.json").read_text())
    exprs = " ".join(t["expr"] for p in dash["panels"] for t in p["targets"])
    for metric in (
        "specserver_speculation_mode",
        "spec_accept_length",
        "time_to_first_token_seconds_bucket",
        "request_time_per_output_token_seconds_bucket",
        "num_running_reqs",
        "num_queue_reqs",
    ):
        assert metric in exprs, metric
    assert "sglang[:_]" in exprs  # both exposition spellings
    annotation = dash["annotations"]["list"][0]["expr"]
    assert "specserver_decisions_total" in annotation
    exported = {m.name for m in opmetrics.REGISTRY.collect()}
    assert {"specserver_speculation_mode", "specserver_decisions"} <= exported
