"""Issue 31, the reading layer: hostile files, stdin and configs give exit 2 and one clear line.

Each case runs ``specserver-advisor`` as a process (a traceback, a hang or gigabytes are what the
issue measured): exit code 2, no ``Traceback``, the file (and line) named, a time bound, and for
the oversized file a memory bound (it is refused from its size, never read whole).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cliprocess import advisor, clean_refusal
from stack import load_config

#: 10^8 items in 380 bytes: eight levels of ten aliases each.
BILLION_LAUGHS = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{b}: &{b} [{','.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcdefg", "bcdefgh", strict=True)
)
RECURSIVE_ALIAS = "a: &a [*a]\n"


def test_lint_stdin_that_is_not_utf8_is_input001(tmp_path: Path) -> None:
    run = advisor(tmp_path, "lint", "--stdin-filename", "x.yaml", "-", stdin=b"kind: \xff\xfe\n")
    text = clean_refusal(run, "INPUT001", "x.yaml", "not UTF-8")
    assert "line 1" in text


def test_lint_config_settings_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"select: \xff\n")
    (tmp_path / "run.sh").write_text("echo hi\n")
    run = advisor(tmp_path, "lint", "--config", "bad.yaml", "run.sh")
    clean_refusal(run, "bad.yaml", "not UTF-8")


@pytest.mark.parametrize("name", ["settings.yaml", "pyproject.toml"])
def test_settings_file_too_large_is_refused_unread(tmp_path: Path, name: str) -> None:
    with (tmp_path / name).open("wb") as f:
        f.truncate(900_000_000)  # sparse: 900 MB on disk costs nothing
    (tmp_path / "run.sh").write_text("echo hi\n")
    run = advisor(tmp_path, "lint", "--config", name, "run.sh")
    clean_refusal(run, name, "too large (900000000 bytes")
    assert run.max_rss_mib < 300


@pytest.mark.parametrize(
    "argv",
    [
        ("lint", "big.yaml"),
        ("plan", "--from", "big.yaml", "--gpu", "L4"),
        ("replay", "--observations", "big.yaml"),
        ("replay", "--observations", "obs.jsonl", "--policy", "big.yaml"),
    ],
)
def test_a_900_mb_file_is_refused_from_its_size(tmp_path: Path, argv: tuple[str, ...]) -> None:
    with (tmp_path / "big.yaml").open("wb") as f:
        f.truncate(900_000_000)
    (tmp_path / "obs.jsonl").write_text('{"ts": 1}\n')
    run = advisor(tmp_path, *argv)
    clean_refusal(run, "big.yaml", "too large")
    assert run.max_rss_mib < 300, run.max_rss_mib
    assert run.seconds < 20


@pytest.mark.parametrize(
    "argv",
    [
        ("lint", "laughs.yaml"),
        ("replay", "--observations", "obs.jsonl", "--policy", "laughs.yaml"),
        ("plan", "--from", "laughs.yaml", "--gpu", "L4"),
        ("lint", "--config", "laughs.yaml", "run.sh"),
    ],
)
def test_billion_laughs_is_refused_quickly(tmp_path: Path, argv: tuple[str, ...]) -> None:
    assert len(BILLION_LAUGHS) <= 400
    (tmp_path / "laughs.yaml").write_text(BILLION_LAUGHS)
    (tmp_path / "obs.jsonl").write_text('{"ts": 1}\n')
    (tmp_path / "run.sh").write_text("echo hi\n")
    run = advisor(tmp_path, *argv, timeout=30)
    clean_refusal(run, "laughs.yaml", "expands to more than 1000000 nodes")
    assert run.seconds < 10, run.seconds
    assert run.max_rss_mib < 300, run.max_rss_mib


@pytest.mark.parametrize(
    "argv",
    [
        ("lint", "loop.yaml"),
        ("replay", "--observations", "obs.jsonl", "--policy", "loop.yaml"),
        ("plan", "--from", "loop.yaml", "--gpu", "L4"),
        ("lint", "--config", "loop.yaml", "run.sh"),
    ],
)
def test_a_recursive_alias_is_refused(tmp_path: Path, argv: tuple[str, ...]) -> None:
    (tmp_path / "loop.yaml").write_text(RECURSIVE_ALIAS)
    (tmp_path / "obs.jsonl").write_text('{"ts": 1}\n')
    (tmp_path / "run.sh").write_text("echo hi\n")
    run = advisor(tmp_path, *argv)
    clean_refusal(run, "loop.yaml", "recursive YAML alias", "line 1")


def test_replay_with_a_deeply_nested_observation_line(tmp_path: Path) -> None:
    (tmp_path / "obs.jsonl").write_text(
        '{"ts": 1}\n{"ts": 2, "running": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    )
    run = advisor(tmp_path, "replay", "--observations", "obs.jsonl")
    clean_refusal(run, "obs.jsonl:2", "nested more than 64 levels deep")


def test_replay_observations_that_are_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "obs.jsonl").write_bytes(b'{"ts": 1}\n{"ts": 2, "mode": "\xff"}\n')
    run = advisor(tmp_path, "replay", "--observations", "obs.jsonl")
    clean_refusal(run, "obs.jsonl", "not UTF-8", "line 2")


def test_a_policy_tag_that_does_not_fit_its_value(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text("windowSeconds: 60\ndryRun: !!int yes\n")
    (tmp_path / "obs.jsonl").write_text('{"ts": 1}\n')
    run = advisor(tmp_path, "replay", "--observations", "obs.jsonl", "--policy", "policy.yaml")
    clean_refusal(run, "policy.yaml", "tag:yaml.org,2002:int does not fit 'yes'", "line 2")


def test_lint_names_the_line_of_a_tag_that_does_not_fit(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text("kind: Pod\nmetadata:\n  x: !!float abc\n")
    run = advisor(tmp_path, "lint", "--format", "json", "d.yaml")
    text = clean_refusal(run, "INPUT001", "does not fit 'abc'")
    assert '"line": 3' in text


def test_a_settings_tag_that_does_not_fit_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("select: SPEC\ngpu: !!float L4\n")
    (tmp_path / "run.sh").write_text("echo hi\n")
    run = advisor(tmp_path, "lint", "--config", "s.yaml", "run.sh")
    clean_refusal(run, "s.yaml: tag:yaml.org,2002:float does not fit 'L4'", "(line 2, column 6)")


@pytest.mark.parametrize(
    "argv",
    [
        ("lint", "fifo.yaml"),
        ("plan", "--from", "fifo.yaml", "--gpu", "L4"),
        ("replay", "--observations", "fifo.yaml"),
        ("replay", "--observations", "obs.jsonl", "--policy", "fifo.yaml"),
        ("fleetsim", "--policy", "fifo.yaml"),
        ("plan", "--model", "fifo-model", "--gpu", "L4"),
    ],
)
def test_a_named_pipe_without_a_writer_does_not_hang(tmp_path: Path, argv: tuple[str, ...]) -> None:
    # F's campaign: open() of a FIFO waited forever for a writer (every reader hung).
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "fifo-model").mkdir()
    os.mkfifo(tmp_path / "fifo-model" / "config.json")
    (tmp_path / "obs.jsonl").write_text('{"ts": 1}\n')
    run = advisor(tmp_path, *argv, timeout=20)
    assert run.rc in (0, 1, 2) and "Traceback" not in run.err, (run.rc, run.err)
    assert run.seconds < 15, run.seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("x: !!bool maybe\n", "tag:yaml.org,2002:bool does not fit 'maybe'"),
        ("x: !!timestamp nope\n", "tag:yaml.org,2002:timestamp does not fit 'nope'"),
    ],
)
@pytest.mark.parametrize(
    "argv",
    [
        ("lint", "t.yaml"),
        ("lint", "--config", "t.yaml", "run.sh"),
        ("replay", "--observations", "obs.jsonl", "--policy", "t.yaml"),
        ("fleetsim", "--policy", "t.yaml"),
        ("plan", "--from", "t.yaml", "--gpu", "L4"),
    ],
)
def test_a_tag_whose_constructor_raises_a_key_or_attribute_error(
    tmp_path: Path, argv: tuple[str, ...], text: str, says: str
) -> None:
    # F's campaign: only ValueError/TypeError were caught: KeyError, AttributeError tracebacks.
    (tmp_path / "t.yaml").write_text(text)
    (tmp_path / "obs.jsonl").write_text('{"ts": 1}\n')
    (tmp_path / "run.sh").write_text("echo hi\n")
    run = advisor(tmp_path, *argv)
    clean_refusal(run, "t.yaml", says, "line 1, column 4")


@pytest.mark.parametrize(
    "argv", [("lint", "run.sh"), ("lint", "--config", "pyproject.toml", "run.sh")]
)
def test_a_pyproject_whose_tool_is_not_a_table(tmp_path: Path, argv: tuple[str, ...]) -> None:
    # F's campaign: ``tool = 5`` was an AttributeError ('int' object has no attribute 'get').
    (tmp_path / "pyproject.toml").write_text("tool = 5\n")
    (tmp_path / "run.sh").write_text("echo hi\n")
    run = advisor(tmp_path, *argv)
    clean_refusal(run, "pyproject.toml: tool: expected a table, got int")


def _model_dirs(tmp_path: Path) -> tuple[str, str]:
    for name, config in (("target", "qwen3-8b"), ("draft", "qwen3-8b-eagle3")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(load_config(config)))
    return str(tmp_path / "target"), str(tmp_path / "draft")


def _launch(target: str, draft: str, *flags: str) -> str:
    return (
        f"python -m sglang.launch_server --model-path {target} --speculative-algorithm EAGLE3 "
        f"--speculative-draft-model-path {draft} {' '.join(flags)}\n"
    )


@pytest.mark.parametrize("flag", ["--steps", "--topk"])
def test_plan_with_a_huge_speculative_count_answers_in_time(tmp_path: Path, flag: str) -> None:
    # F's campaign: the accept-length prior summed one term per step (10^9 steps: minutes,
    # 10^23: for ever).
    target, draft = _model_dirs(tmp_path)
    huge = str(10**9)
    run = advisor(tmp_path, "plan", "--model", target, "--draft", draft, "--gpu", "L4", flag, huge)
    assert run.rc in (0, 1) and "Traceback" not in run.err, (run.rc, run.err)
    assert run.seconds < 15, run.seconds
    (tmp_path / "run.sh").write_text(_launch(target, draft, "--speculative-num-steps", huge))
    run = advisor(tmp_path, "plan", "--from", "run.sh", "--gpu", "L4")
    assert run.rc in (0, 1) and "Traceback" not in run.err and run.seconds < 15


@pytest.mark.parametrize(
    "flag", ["--tp-size", "--pp-size", "--chunked-prefill-size", "--cuda-graph-max-bs-decode"]
)
def test_a_flag_past_any_launch_is_named_not_an_overflow(tmp_path: Path, flag: str) -> None:
    # F's campaign: a 401-digit --chunked-prefill-size (SGLang's int() takes it) was an
    # OverflowError (int too large to convert to float) in memory.memory_settings.
    target, draft = _model_dirs(tmp_path)
    (tmp_path / "run.sh").write_text(_launch(target, draft, flag, str(10**400)))
    run = advisor(tmp_path, "plan", "--from", "run.sh", "--gpu", "L4")
    clean_refusal(run, f"run.sh: {flag}=100000000000... (401 digits): out of range")
    run = advisor(tmp_path, "plan", "--model", target, "--draft", draft, "--gpu", "L4", flag, "1e3")
    assert run.rc == 2 and "Traceback" not in run.err  # SGLang's int() refuses it
    run = advisor(tmp_path, "lint", "--gpu", "L4", "run.sh")
    assert run.rc in (0, 1) and "Traceback" not in run.err, run.err
    run = advisor(
        tmp_path, "plan", "--model", target, "--draft", draft, "--gpu", "L4", "--steps", str(10**23)
    )
    clean_refusal(run, "--speculative-num-steps=100000000000000000000000: out of range")


@pytest.mark.parametrize("value", ["nan", "inf", "1e309"])
def test_a_non_finite_mem_fraction_static_leaves_no_pool_named(tmp_path: Path, value: str) -> None:
    # F's campaign: int(nan) in memory._tokens, a ValueError traceback from plan and lint.
    target, draft = _model_dirs(tmp_path)
    shown = "nan" if value == "nan" else "inf"
    run = advisor(
        tmp_path, "plan", "--model", target, "--draft", draft, "--gpu", "L4",
        f"--mem-fraction-static={value}",
    )  # fmt: skip
    assert run.rc == 1 and "Traceback" not in run.err, run.err
    assert f"under --mem-fraction-static={shown}" in run.out + run.err
    (tmp_path / "run.sh").write_text(_launch(target, draft, "--mem-fraction-static", value))
    run = advisor(tmp_path, "plan", "--from", "run.sh", "--gpu", "L4")
    assert run.rc == 1 and "Traceback" not in run.err, run.err
    run = advisor(tmp_path, "lint", "--gpu", "L4", "run.sh")
    assert run.rc in (0, 1) and "Traceback" not in run.err, run.err


def test_replay_with_an_absurd_but_finite_accept_length(tmp_path: Path) -> None:
    # F's campaign (seed 99): accept_length 1e308 made the policy's learning band round(inf),
    # an OverflowError in policy_model.band_of (the operator's autopilot evaluates the same).
    line = {"mode": "on", "accept_length": 1e308, "ttft_p99_s": 0.5, "running": 4, "queued": 0}
    rows = [json.dumps({**line, "ts": 30 * i, "output_tok_s": 100, "age_s": 1}) for i in range(4)]
    (tmp_path / "obs.jsonl").write_text("\n".join(rows) + "\n")
    run = advisor(tmp_path, "replay", "--observations", "obs.jsonl")
    assert run.rc == 0 and "Traceback" not in run.err, run.err
