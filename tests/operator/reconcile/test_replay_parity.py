"""Replay parity: ``specserver-advisor replay`` decides exactly as the operator's autopilot.

The operator side is ``autopilot.auto_step`` driven cycle by cycle with a status dict it patches
(as the controller does), an engine that becomes Ready in the new mode right after each switch,
and the policy context the operator computes from the SpecServer and its configs. The replay side
is the CLI (``replay --policy SpecServer``) for every example, and ``replay.replay`` with the
CLI's context for a generated set of SpecServers, policies and observation series.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.cli.plan import strict_json
from specserver_advisor.launch.model import policy_context_for
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import Mode, SpecServer, SpecServerSpec, SwitchInProgress
from specserver_advisor.policy.model import Decision, Observation, PolicyContext, SpecMode
from specserver_advisor.replay.replay import replay
from specserver_operator.core import policystate
from specserver_operator.core.autopilot import auto_step
from specserver_operator.reconcile.configsource import from_inline
from stack import REPO

EXAMPLES = sorted((REPO / "manifests" / "examples").glob("*.yaml"))


def operator_configs(spec: SpecServerSpec) -> ModelConfigs:
    """The configs the operator reads for a spec without a ConfigMap or endpoint."""
    inline = from_inline(spec)
    if inline is not None:
        return inline
    target = bundled(spec.model.path)
    draft = bundled(spec.draft.path) if spec.draft else None
    assert target is not None
    return ModelConfigs(target.config, draft.config if draft else None, None, None, "bundled")


def operator_decisions(
    spec: SpecServerSpec, ctx: PolicyContext, series: list[Observation]
) -> list[Decision]:
    """The autopilot's decision at each observation (a switch completes before the next)."""
    spec = spec.model_copy(update={"mode": Mode.AUTO})  # the operator evaluates only in Auto
    status: dict[str, Any] = {}
    running = SpecMode.ON
    out = []
    for obs in series:
        stored = policystate.parse(status.get("policyState"))  # as observe.py reads it
        step = auto_step(
            spec, status, None, stored, copy.copy(obs), None, ctx, running, True, obs.ts
        )
        assert step.decision is not None
        out.append(step.decision)
        status.update(step.status)
        if status.get("switch"):
            running = SpecMode.from_status(status["switch"]["target"])
            stored = policystate.parse(status.get("policyState"))
            switch = SwitchInProgress.model_validate(status["switch"])
            done = auto_step(spec, status, switch, stored, None, None, ctx, running, True, obs.ts)
            assert done.switch_result == "completed"
            status.update(done.status)
    return out


def series(seed: int, length: int = 120) -> list[Observation]:
    """Load that rises and falls, acceptance that drifts and collapses, gaps and stale reads."""
    rng = random.Random(seed)
    out, load, accept = [], rng.uniform(1, 8), rng.uniform(1.8, 3.2)
    for i in range(length):
        load = max(0.0, load + rng.gauss(0, 3) + (6 if 30 <= i < 50 else 0) - (6 if i >= 70 else 0))
        accept = min(4.5, max(1.0, accept + rng.gauss(0, 0.2)))
        if 85 <= i < 95:
            accept = 1.1  # acceptance collapses at low load
        cap = rng.choice([8, 16, 32])
        running, queued = min(load, cap), max(0.0, load - cap)
        gap = rng.random() < 0.04
        out.append(
            Observation(
                ts=1_780_000_000 + 30 * i,
                accept_length=None if gap else round(accept, 2),
                ttft_p99_s=None if gap else round(0.3 + 0.25 * queued + rng.random() * 0.3, 3),
                running=None if gap else round(running, 1),
                queued=None if gap else round(queued, 1),
                output_tok_s=None if gap else round(30 * running * (1 + rng.random()), 1),
                age_s=rng.choice([3, 5, 8, 400]) if rng.random() < 0.05 else 4,
            )
        )
    return out


def write_jsonl(path: Path, observations: list[Observation]) -> Path:
    lines = [json.dumps({k: v for k, v in vars(o).items() if v is not None}) for o in observations]
    path.write_text("\n".join(lines) + "\n")
    return path


def as_rows(decisions: list[Decision]) -> list[dict[str, Any]]:
    """The operator's decisions as ``replay --format jsonl`` writes them (strict JSON: an
    unbounded value as the text "inf")."""
    return [json.loads(json.dumps(strict_json(d.to_json()), sort_keys=True)) for d in decisions]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_replay_of_each_example_decides_as_the_operator(
    example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = SpecServer.model_validate(_yaml(example))
    ctx = policy_context_for(server.spec, operator_configs(server.spec))
    for seed in (1, 2, 3):
        obs = series(seed)
        expected = as_rows(operator_decisions(server.spec, ctx, obs))
        jsonl = write_jsonl(tmp_path / f"obs-{seed}.jsonl", obs)
        argv = ["replay", "--policy", str(example), "--observations", str(jsonl)]
        assert main([*argv, "--format", "jsonl"]) == 0
        got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert got == expected
        assert {r["action"] for r in got} != {"keep"} or example.stem.endswith("off")


GENERATED_MODELS = [
    ("Qwen/Qwen3-8B", "Tengyunw/qwen3_8b_eagle3", "EAGLE3", ["L4", "A10G", "L40S", "H100"]),
    ("meta-llama/Llama-3.1-8B-Instruct", None, "NGRAM", ["A10G", "L4", "A100-80G"]),
    (
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex",
        "EAGLE3",
        ["H100", "A100-80G", "L40S"],
    ),
]


def generated_specs(count: int) -> list[dict[str, Any]]:
    rng = random.Random(15)
    out = []
    for _ in range(count):
        model, draft, algo, gpus = rng.choice(GENERATED_MODELS)
        engine: dict[str, Any] = {}
        if rng.random() < 0.6:
            engine["memFractionStatic"] = rng.choice([0.8, 0.85, 0.9])
        if rng.random() < 0.5:
            engine["maxRunningRequests"] = rng.choice([8, 16, 48])
        if rng.random() < 0.3:
            engine["extraArgs"] = ["--kv-cache-dtype", "fp8_e4m3"]
        policy: dict[str, Any] = {
            "minDwellSeconds": rng.choice([0, 120, 600]),
            "disableAfterBreaches": rng.choice([1, 2, 3]),
            "enableAfterPasses": rng.choice([1, 3]),
            "ttftP99SloSeconds": rng.choice([1.0, 2.0, 5.0]),
            "explore": rng.random() < 0.5,
            "dryRun": rng.random() < 0.1,
        }
        if rng.random() < 0.3:
            policy["acceptLengthFloor"] = rng.choice([1.3, 1.6, 2.0])
        spec: dict[str, Any] = {
            "model": {"path": model},
            "speculative": {"algorithm": algo},
            "mode": "Auto",
            "engine": engine,
            "resources": {"gpus": 1, "gpuType": rng.choice(gpus)},
            "autoSpeculation": policy,
        }
        if draft:
            spec["draft"] = {"path": draft}
        if algo == "EAGLE3" and rng.random() < 0.4:
            spec["speculative"]["adaptive"] = True  # SGLang adapts steps; policy context knows
        out.append(spec)
    return out


@pytest.mark.parametrize("index", range(12))
def test_replay_of_generated_specservers_decides_as_the_operator(
    index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = generated_specs(12)[index]
    spec = SpecServerSpec.model_validate(raw)
    ctx = policy_context_for(spec, operator_configs(spec))
    path = tmp_path / "sps.yaml"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "specserver.io/v1alpha1",
                "kind": "SpecServer",
                "metadata": {"name": "g"},
                "spec": raw,
            }
        )
    )
    obs = series(100 + index)
    jsonl = write_jsonl(tmp_path / "obs.jsonl", obs)
    assert (
        main(["replay", "--policy", str(path), "--observations", str(jsonl), "--format", "jsonl"])
        == 0
    )
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert got == as_rows(operator_decisions(spec, ctx, obs))
    # And the library call with the operator's own context gives the same.
    policy = spec.auto_speculation
    assert policy is not None
    assert as_rows(replay(obs, policy, ctx)) == got


def test_replay_of_the_l4_example_turns_speculation_off_when_acceptance_collapses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"
    spec = SpecServer.model_validate(_yaml(example)).spec
    ctx = policy_context_for(spec, operator_configs(spec))
    obs = [
        Observation(
            ts=1_780_000_000 + 30 * i,
            accept_length=2.6 if i < 5 else 1.1,
            ttft_p99_s=0.4,
            running=4,
            queued=0,
            output_tok_s=120,
            age_s=4,
        )
        for i in range(12)
    ]
    jsonl = write_jsonl(tmp_path / "collapse.jsonl", obs)
    argv = ["replay", "--policy", str(example), "--observations", str(jsonl)]
    assert main([*argv, "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert ("disable", "AcceptLengthLow") in [(r["action"], r["reason"]) for r in rows]
    assert rows == as_rows(operator_decisions(spec, ctx, obs))
    first = rows[0]["thresholds"]
    # The operator's numbers, not the neutral context's (crossover infinity, floor 1.05).
    assert first["accept_floor"] == pytest.approx(round(ctx.break_even_accept * 1.05, 3))
    assert first["accept_floor"] > 1.05
    # The example caps both engines at 16 requests (spec.engine.maxRunningRequests) and both
    # pools hold 16: below the cap speculation never loses throughput, so no crossover.
    # (strict JSON writes an unbounded crossover as the text "inf")
    assert float(first["crossover"]) == pytest.approx(ctx.crossover(first["expected_accept"]))


def _yaml(path: Path) -> Any:
    from specserver_advisor.loaders import yamlnodes

    return yamlnodes.load_all(path.read_text())[0]
