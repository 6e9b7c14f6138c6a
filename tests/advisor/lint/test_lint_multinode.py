"""The multi-node lint rules (MN001-MN006) on LeaderWorkerSet manifests in the shapes people
publish, and the single-node rules held off a worker, which serves no API (SGLang 0.5.23's node
rank >= 1 answers only its health server: /ping, /health, /health_generate, /metrics).

``tests/advisor/fixtures/mn00N`` holds one manifest per mistake (the LWS project's SGLang
example with that mistake) and the correct example; ``tests/advisor/multinode`` the ``bash -c``
forms, a shared template (no ``leaderTemplate``) and several mistakes in one file, each with
the exact findings in its ``expected.yaml``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.lint.sources import from_yaml
from stack import REPO

FIXTURES = REPO / "tests" / "advisor" / "fixtures"
CORPUS = REPO / "tests" / "advisor" / "multinode"
MODELS = ["--model-dir", str(FIXTURES / "models")]
CODES = [f"MN00{n}" for n in range(1, 7)]


def lint(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict[str, object]]:
    main(["lint", *MODELS, "--format", "json", str(path)])
    found: list[dict[str, object]] = json.loads(capsys.readouterr().out or "[]")
    return found


def worker_lines(path: Path) -> range:
    text = path.read_text().splitlines()
    start = next(i for i, line in enumerate(text, 1) if "workerTemplate:" in line)
    end = next((i for i, line in enumerate(text, 1) if i > start and line == "---"), len(text))
    return range(start, end + 1)


@pytest.mark.parametrize("code", CODES)
def test_each_mistake_draws_its_rule_and_the_worker_no_single_node_rule(
    code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = FIXTURES / code.lower() / "fail.yaml"
    found = lint(capsys, bad)
    assert code in {d["code"] for d in found}, found
    on_worker = {d["code"] for d in found if d["line"] in worker_lines(bad)}
    assert not on_worker & {"SPEC011", "SPEC012"}, found
    good = lint(capsys, FIXTURES / code.lower() / "pass.yaml")
    assert good == [], good


def test_the_corpus_gives_exactly_the_expected_findings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected = yaml.safe_load((CORPUS / "expected.yaml").read_text())
    assert sorted(expected) == sorted(p.name for p in CORPUS.glob("*.yaml") if p.stem != "expected")
    for name, codes in expected.items():
        found = [f"{d['line']}:{d['code']}" for d in lint(capsys, CORPUS / name)]
        assert found == codes, name


def test_the_single_node_rules_run_where_the_template_serves_http(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The published shape's worker has no --host and draws no SPEC012 (it serves no API);
    # the leader without --host does, and so does the worker's launch as a lone template,
    # which LWS runs as the leader too.
    text = (FIXTURES / "mn001" / "pass.yaml").read_text()
    assert lint(capsys, FIXTURES / "mn001" / "pass.yaml") == []
    no_host = tmp_path / "no-host.yaml"
    no_host.write_text(text.replace('              - --host\n              - "0.0.0.0"\n', ""))
    assert [d["code"] for d in lint(capsys, no_host)] == ["SPEC012"]
    doc = yaml.safe_load(text.split("---")[0])
    del doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    launches, _ = from_yaml("shared.yaml", json.dumps(doc))
    assert [(la.group.role, la.serves_http) for la in launches if la.group] == [("shared", True)]
    shared = tmp_path / "shared.yaml"
    shared.write_text(json.dumps(doc))
    assert [d["code"] for d in lint(capsys, shared)] == ["SPEC012"]


def rank_from_index(text: str) -> list[tuple[str, bool | None]]:
    launches, _ = from_yaml("lws.yaml", text)
    return [(la.group.role, la.group.rank_from_index) for la in launches if la.group]


def test_the_rank_is_known_to_follow_the_index_however_the_command_builds_it() -> None:
    wrapped = (CORPUS / "bash-wrapped.yaml").read_text()
    assert rank_from_index(wrapped) == [("leader", None), ("worker", True)]
    literal = wrapped.replace('--node-rank "$RANK"', "--node-rank 1")
    assert rank_from_index(literal) == [("leader", None), ("worker", False)]
    listed = (FIXTURES / "mn002" / "pass.yaml").read_text()
    assert rank_from_index(listed) == [("leader", None), ("worker", True)]


def test_a_service_pinned_to_the_leader_index_selects_no_worker(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (FIXTURES / "mn004" / "fail.yaml").read_text()
    assert "MN004" in {d["code"] for d in lint(capsys, FIXTURES / "mn004" / "fail.yaml")}
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(
        text.replace(
            "    leaderworkerset.sigs.k8s.io/name: sglang\n",
            "    leaderworkerset.sigs.k8s.io/name: sglang\n"
            '    leaderworkerset.sigs.k8s.io/worker-index: "0"\n',
        )
    )
    assert lint(capsys, pinned) == []
    head = pinned.read_text().split("worker-index: ")[0]
    for index, selects in (("1", True), ("9" * 5000, False), ("\u00b2", False), ("-1", False)):
        pinned.write_text(f"{head}worker-index: '{index}'\n")  # hostile values: no index
        assert ("MN004" in {d["code"] for d in lint(capsys, pinned)}) is selects, index[:8]
    other = tmp_path / "other.yaml"
    other.write_text(text.replace("name: sglang\n  ports", "name: another-lws\n  ports"))
    assert lint(capsys, other) == []


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        ("--tp 4 --nnodes 2 --node-rank 0", "MN003"),  # no --dist-init-addr
        ("--tp 3 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000", "MN005"),
        ("--tp 2 --pp-size 3 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000", "MN005"),
    ],
)
def test_scripts_outside_a_group_get_the_launch_rules(
    argv: str, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "node0.sh"
    script.write_text(f"#!/bin/sh\npython3 -m sglang.launch_server --model-path m {argv}\n")
    assert [d["code"] for d in lint(capsys, script)] == [code]
    fixed = "--tp 4 --pp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000"
    script.write_text(f"#!/bin/sh\npython3 -m sglang.launch_server --model-path m {fixed}\n")
    assert lint(capsys, script) == []


def test_a_multi_node_specserver_lints_as_its_leader_runs_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A SpecServer with resources.nodes 2 renders --node-rank $(LWS_WORKER_INDEX): read as the
    leader runs it, SGLang's parser takes it (no SPEC015), and no multi-node rule fires on the
    operator's own flags."""
    path = REPO / "tests" / "data" / "deepseek-v3-two-nodes.yaml"
    assert yaml.safe_load(path.read_text())["spec"]["resources"]["nodes"] == 2
    found = lint(capsys, path)
    codes = {f["code"] for f in found}
    assert "SPEC015" not in codes and not codes & set(CODES), found


def worker_variant(
    tmp_path: Path, base: str, change: Callable[[dict[str, Any]], None]
) -> tuple[Path, str]:
    """The fixture ``base`` with ``change`` applied to its worker container; its own text."""
    docs = list(yaml.safe_load_all((FIXTURES / base).read_text()))
    change(docs[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0])
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path, path.read_text()


def _probe(get: dict[str, Any] | None = None, tcp: dict[str, Any] | None = None) -> Any:
    def change(c: dict[str, Any]) -> None:
        c["readinessProbe"] = {"httpGet": get} if get is not None else {"tcpSocket": tcp}

    return change


def _args(drop: tuple[str, ...] = (), add: tuple[str, ...] = ()) -> Any:
    def change(c: dict[str, Any]) -> None:
        cmd = c["command"]
        for flag in drop:
            at = cmd.index(flag)
            del cmd[at : at + 2]
        cmd.extend(add)

    return change


def _both(*changes: Any) -> Any:
    def change(c: dict[str, Any]) -> None:
        for one in changes:
            one(c)

    return change


# The worker of mn006/pass.yaml runs --host 0.0.0.0 --port 40000; each case changes it.
WORKER_PROBES = [
    ("health on its port", _probe({"path": "/health", "port": 40000}), False),
    ("ping", _probe({"path": "/ping", "port": 40000}), False),
    ("health_generate", _probe({"path": "/health_generate", "port": 40000}), False),
    ("health with a query", _probe({"path": "/health?probe=1", "port": 40000}), False),
    ("an API path", _probe({"path": "/v1/models", "port": 40000}), True),
    ("generate", _probe({"path": "/generate", "port": 40000}), True),
    ("no path: /", _probe({"port": 40000}), True),
    ("metrics without --enable-metrics", _probe({"path": "/metrics", "port": 40000}), True),
    (
        "metrics with --enable-metrics",
        _both(_probe({"path": "/metrics", "port": 40000}), _args(add=("--enable-metrics",))),
        False,
    ),
    ("the leader's default port", _probe({"path": "/health", "port": 30000}), True),
    ("tcp on its port", _probe(tcp={"port": 40000}), False),
    ("tcp on another port", _probe(tcp={"port": 30000}), True),
    ("HTTPS", _probe({"path": "/health", "port": 40000, "scheme": "HTTPS"}), True),
    ("a port name it does not declare", _probe({"path": "/health", "port": "http"}), True),
    (
        "a port name it declares",
        _both(
            _probe({"path": "/health", "port": "http"}),
            lambda c: c.update(ports=[{"name": "http", "containerPort": 40000}]),
        ),
        False,
    ),
    ("no --host: it binds 127.0.0.1", _args(drop=("--host",)), True),
    (
        "no --port: it listens on 30000",
        _both(_args(drop=("--port",)), _probe({"path": "/health", "port": 30000})),
        False,
    ),
    ("the probe's own host: not judged", _probe({"path": "/x", "port": 1, "host": "h"}), False),
]


@pytest.mark.parametrize(
    ("case", "change", "fails"), WORKER_PROBES, ids=[c[0] for c in WORKER_PROBES]
)
def test_a_worker_probe_draws_mn006_exactly_when_sglangs_worker_cannot_pass_it(
    case: str, change: Any, fails: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SGLang 0.5.23's node rank >= 1 answers /ping, /health, /health_generate (and /metrics
    with --enable-metrics) on its own --host/--port, plain HTTP (tests/oracle/
    test_worker_health_server.py holds these routes to SGLang's source)."""
    assert lint(capsys, FIXTURES / "mn006" / "pass.yaml") == []
    path, _ = worker_variant(tmp_path, "mn006/pass.yaml", change)
    found = lint(capsys, path)
    assert [d["code"] for d in found] == (["MN006"] if fails else []), found
    if fails:  # on the worker's probe, naming why
        assert found[0]["line"] in worker_lines(path), found
        assert "can never pass on the workers" in str(found[0]["message"])


def test_a_service_on_the_workers_draws_mn004_and_their_port_and_podmonitor_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker listens on its --port (health and metrics): declaring it, or scraping it,
    is no mistake; a Service selecting it sends API requests there, which it answers 404."""
    found = lint(capsys, FIXTURES / "mn004" / "fail.yaml")
    assert [d["code"] for d in found] == ["MN004"], found
    assert "Service sglang-leader" in str(found[0]["message"])

    def declare_and_scrape(c: dict[str, Any]) -> None:
        c["ports"] = [{"name": "http", "containerPort": 30000}]
        c["command"] += ["--enable-metrics", "--host", "0.0.0.0"]

    path, text = worker_variant(tmp_path, "mn004/pass.yaml", declare_and_scrape)
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": "sglang"},
        "spec": {
            "selector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "sglang"}},
            "podMetricsEndpoints": [{"port": "http"}],
        },
    }
    path.write_text(text + "---\n" + yaml.safe_dump(monitor))
    assert lint(capsys, path) == []
    as_service = {**monitor, "apiVersion": "v1", "kind": "Service"}
    as_service["spec"] = {"selector": {"leaderworkerset.sigs.k8s.io/name": "sglang"}}
    path.write_text(text + "---\n" + yaml.safe_dump(as_service))
    assert [d["code"] for d in lint(capsys, path)] == ["MN004"]
