"""Fuzzing ``specserver-advisor plan`` and ``replay`` (issue 31): broken model configs, mutated
launch files, observation lines and policies, each run in-process under a time and a memory
bound (``fuzzcli``): exit 0, 1 or 2 and never a traceback. The ``@example`` cases are the
measured failures, kept as named regressions.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from fuzzcli import FUZZ, advisor
from fuzzinputs import (
    JSON_VALUES,
    LLAMA,
    YAML_SNIPPETS,
    Payload,
    broken_model_config,
    laughs,
    mutated_corpus,
)
from hypothesis import example, given
from hypothesis import strategies as st

DATA = Path(__file__).parents[2] / "data"
OBSERVATIONS = (DATA / "observations-rise-fall.jsonl").read_text().splitlines()
POLICY_KEYS = (
    "dryRun",
    "evaluationIntervalSeconds",
    "switchStrategy",
    "tpotSloMilliseconds",
    "acceptLengthFloor",
    "disableAfterBreaches",
    "deadBand",
    "minDwellSeconds",
    "maxSwitchesPerHour",
    "staleAfterSeconds",
    "prometheusUrl",
)
YAML_VALUES = (
    "!!int yes",
    "!!float x",
    "*a",
    "[*a]",
    "{}",
    "[]",
    "~",
    ".inf",
    "-1",
    "1e400",
    "'1'",
)


def deep(depth: int) -> Payload:
    return Payload(('{"architectures": ' + "[" * depth + "]" * depth + "}").encode())


@FUZZ
@given(broken_model_config(), st.booleans())
@example(deep(100_000), True)  # RecursionError reading config.json
@example(Payload(json.dumps({**LLAMA, "architectures": "LlamaForCausalLM"}).encode()), True)
@example(Payload(json.dumps({**LLAMA, "max_position_embeddings": "NaN"}).encode()), False)
def test_plan_broken_model_configs(config: Payload, as_target: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broken, good = Path(tmp) / "broken", Path(tmp) / "good"
        broken.mkdir()
        good.mkdir()
        (broken / "config.json").write_bytes(config.data)
        (good / "config.json").write_text(json.dumps(LLAMA))
        target, draft = (broken, good) if as_target else (good, broken)
        argv = ["plan", "--model", str(target), "--draft", str(draft), "--gpu", "H100"]
        advisor([*argv, "--format", "json"]).check()


@FUZZ
@given(mutated_corpus())
def test_plan_from_mutated_files(case: Payload) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"launch{case.suffix}"
        path.write_bytes(case.data)
        advisor(["plan", "--from", str(path), "--gpu", "L4"]).check()


@st.composite
def observation_lines(draw: st.DrawFn) -> Payload:
    """Recorded observation lines, some replaced by hostile ones."""
    lines = [line.encode() for line in OBSERVATIONS[: draw(st.integers(0, len(OBSERVATIONS)))]]
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines)))
        kind = draw(st.sampled_from(["value", "field", "deep", "bytes"]))
        if kind == "value":
            line = json.dumps(draw(JSON_VALUES)).encode()
        elif kind == "field" and OBSERVATIONS:
            record = json.loads(draw(st.sampled_from(OBSERVATIONS[2:])))
            record[draw(st.sampled_from(sorted(record)))] = draw(JSON_VALUES)
            line = json.dumps(record).encode()
        elif kind == "deep":
            n = draw(st.integers(1, 200_000))
            line = b'{"ts": ' + b"[" * n + b"]" * n + b"}"
        else:
            line = draw(st.binary(max_size=200))
        lines.insert(at, line)
    return Payload(b"\n".join(lines) + b"\n", ".jsonl")


@FUZZ
@given(observation_lines())
@example(Payload(b'{"ts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"))  # RecursionError
def test_replay_observations(observations: Payload) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "obs.jsonl"
        path.write_bytes(observations.data)
        advisor(["replay", "--observations", str(path), "--format", "jsonl"]).check()


@st.composite
def policies(draw: st.DrawFn) -> Payload:
    """An autoSpeculation policy with drawn values, tags, aliases, or not YAML at all."""
    return Payload(draw(_policy()), ".yaml")


@st.composite
def _policy(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["fields", "fields", "snippet", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=1000))
    if kind == "snippet":
        return draw(st.sampled_from(YAML_SNIPPETS)).encode()
    keys = draw(st.lists(st.sampled_from(POLICY_KEYS), min_size=1, max_size=6))
    values = [
        draw(st.sampled_from(YAML_VALUES) | st.from_regex(r"-?[0-9]{1,30}", fullmatch=True))
        for _ in keys
    ]
    body = "".join(f"{k}: {v}\n" for k, v in zip(keys, values, strict=True))
    return ("anchor: &a 1\n" + body).encode()


@FUZZ
@given(policies())
@example(Payload(b"dryRun: !!int yes\n"))  # ValueError: read_policy caught only YAML errors
@example(Payload(b"a: &a [*a]\n"))  # RecursionError in lint/yamlnodes.py
@example(Payload(laughs(9, 9).encode()))  # alias expansion: 9**9 items
def test_replay_policies(policy: Payload) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, obs = Path(tmp) / "policy.yaml", Path(tmp) / "obs.jsonl"
        path.write_bytes(policy.data)
        obs.write_text("\n".join(OBSERVATIONS[:12]) + "\n")
        argv = ["replay", "--observations", str(obs), "--policy", str(path), "--format", "jsonl"]
        advisor(argv).check()
