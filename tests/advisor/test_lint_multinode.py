"""The multi-node lint rules (MN001-MN006) on LeaderWorkerSet manifests in the shapes people
publish, and the single-node rules held off a worker, which serves no HTTP.

``tests/advisor/fixtures/mn00N`` holds one manifest per mistake (the LWS project's SGLang
example with that mistake) and the correct example; ``tests/advisor/multinode`` the ``bash -c``
forms, a shared template (no ``leaderTemplate``) and several mistakes in one file, each with
the exact findings in its ``expected.yaml``.
"""

from __future__ import annotations

import json
from pathlib import Path

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
    # The published shape's worker has no --host and draws no SPEC012 (it serves no HTTP);
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
