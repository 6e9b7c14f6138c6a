"""Rendered children for the shipped examples, pinned as golden files.

Regenerate with ``pytest tests/operator --update-golden``. Every golden file is validated against
the Kubernetes OpenAPI schema (kubernetes-validate, strict) and its engine arguments are checked
by the advisor: SGLang 0.5.23 would parse them, resolve them without a startup error, and every
speculative value is explicit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.resolve import resolve_launch
from stack import REPO, render_example

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))
GOLDEN = REPO / "tests" / "golden"
K8S_VERSION = "1.25.0"


def render(path: Path) -> list[dict[str, Any]]:
    """The children the operator renders for the example at ``path`` (stack.render_example)."""
    return render_example(path)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_golden(path: Path, request: pytest.FixtureRequest) -> None:
    children = render(path)
    text = yaml.safe_dump_all(children, sort_keys=True)
    golden = GOLDEN / f"{path.stem}.yaml"
    if request.config.getoption("--update-golden"):
        golden.write_text(text)
    assert golden.exists(), f"missing {golden}; run pytest --update-golden"
    assert text == golden.read_text(), f"{golden} differs; run pytest --update-golden"


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_golden_files_are_valid_kubernetes(path: Path) -> None:
    for obj in yaml.safe_load_all(path.read_text()):
        if obj["kind"] == "LeaderWorkerSet":  # a CRD: each pod template validated as a Pod
            group = obj["spec"]["leaderWorkerTemplate"]
            for role in ("leaderTemplate", "workerTemplate"):
                pod = {"apiVersion": "v1", "kind": "Pod", **group[role]}
                pod["metadata"] = {**pod["metadata"], "name": f"{obj['metadata']['name']}-0"}
                kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
            continue
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_golden_engine_args_pass_the_advisor(path: Path) -> None:
    deployment = next(
        o
        for o in yaml.safe_load_all(path.read_text())
        if o["kind"] in ("Deployment", "LeaderWorkerSet")
    )
    if deployment["kind"] == "LeaderWorkerSet":
        group = deployment["spec"]["leaderWorkerTemplate"]
        template = group["leaderTemplate"]
        worker = group["workerTemplate"]["spec"]["containers"][0]
        assert worker["args"] == template["spec"]["containers"][0]["args"]  # one launch
    else:
        template = deployment["spec"]["template"]
    engine = template["spec"]["containers"][0]
    assert engine["command"] == ["sglang", "serve"]
    nodes = deployment["spec"].get("leaderWorkerTemplate", {}).get("size", 1)
    parsed = parse_server_argv(as_leader(engine["args"], nodes))  # LWS_* as the leader has them
    assert parsed.issues == []
    values = parsed.values
    assert values["host"] == "0.0.0.0" and values["enable_metrics"]
    assert "max_running_requests" in values
    resolution = resolve_launch(values, bundled(values["model_path"]).config)  # type: ignore[union-attr]
    assert resolution.errors == []
    if resolution.speculative:
        assert not [w for w in resolution.warnings if "adjusted" in w or "reset" in w]
        mode = deployment["metadata"]["labels"]["specserver.io/mode"]
        assert mode == "on"
    preflight = template["spec"]["initContainers"][0]
    assert preflight["args"][-len(engine["args"]) :] == engine["args"]


def test_golden_files_and_examples_lint_clean() -> None:
    from specserver_advisor.lint.engine import Options, lint

    diagnostics, count = lint([GOLDEN, REPO / "manifests" / "examples"], Options(env={}))
    assert count >= 8
    # A SpecServer without a model volume downloads into the engine's writable home, an
    # emptyDir (docs/engine.md, "Where the engine writes"): POD005 says so, and only there.
    downloads = sorted(
        f"{p.stem}.yaml"
        for p in EXAMPLES
        if not (yaml.safe_load(p.read_text())["spec"].get("modelSource") or {}).get("volume")
    )
    assert downloads
    assert sorted((Path(d.path).name, d.code) for d in diagnostics) == [
        (name, "POD005") for name in downloads
    ]
    assert all(Path(d.path).parent == GOLDEN for d in diagnostics)
