"""The second hostile-files campaign (issue 38), each class a test that failed before the fix:
long numbers in every base and YAML 1.1 sexagesimal, override JSON of the wrong shape, plain
arguments out of range, unbounded lists, output that input could steer (workflow commands,
terminal controls), many unknown flags. Each runs in-process under the harness's CPU-time
bound (``fuzzcli``): exit 0, 1 or 2, never a traceback; the output checks are stated here.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from fuzzcli import FUZZ, Outcome, advisor
from fuzzinputs import LAUNCH
from hypothesis import example, given
from hypothesis import strategies as st

from specserver_advisor.errors import shown

#: A line the github format writes: ``::level file=...,line=N,col=N,title=...::message``.
ANNOTATION = re.compile(r"::(error|warning|notice) file=[^\n:,]*,line=\d+,col=\d+,title=[^\n:]*::")
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def steered(run: Outcome, github: bool = False) -> list[str]:
    """Lines of stdout and stderr that input could have forged or that carry raw controls."""
    bad = []
    for stream, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        for line in text.split("\n"):
            if UNSAFE.search(line):
                bad.append(f"{stream}: raw control: {line[:120]!r}")
            if line.startswith("::") and not (github and stream == "stdout"):
                bad.append(f"{stream}: starts with '::': {line[:120]!r}")
            if github and stream == "stdout" and line and not ANNOTATION.match(line):
                bad.append(f"stdout: not an annotation of ours: {line[:120]!r}")
    return bad


def lint(path: Path, *extra: str) -> Outcome:
    return advisor(["lint", *extra, str(path)])


INJECTIONS = st.sampled_from(
    [
        "\n::error file=x,line=1::forged",
        "\r\n::stop-commands::abc",
        "\n::add-mask::secret",
        "\x1b[2J\x1b]8;;http://x\x07link",
        "\u202eevil\u202c",
        "\r::warning::over",
    ]
)


@FUZZ
@given(INJECTIONS, st.sampled_from(["text", "github"]), st.sampled_from(["value", "name", "arg"]))
@example("\n::error file=x,line=1::forged", "text", "name")
@example("\n::error file=x,line=1::forged", "text", "value")
def test_input_cannot_steer_the_output(inject: str, fmt: str, where: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        name = "pod.yaml" if where != "name" else f"p{inject.replace('/', '_')}.yaml"
        path = Path(tmp) / name
        arg = "--bogus" + inject if where == "arg" else "--bogus"
        label = inject if where == "value" else "e"
        path.write_text(
            "kind: Pod\nspec:\n  containers:\n  - name: " + _yaml_str(label) + "\n"
            "    command: [python3, -m, sglang.launch_server]\n"
            f"    args: [--model-path, Qwen/Qwen3-8B, {_yaml_str(arg)}, --tp-size, "
            f"{_yaml_str('2' + inject)}]\n"
        )
        run = lint(path, "--format", fmt)
        run.check()
        assert not steered(run, github=fmt == "github"), steered(run, fmt == "github")
        missing = advisor(["lint", str(Path(tmp) / f"gone{inject}.sh")])
        assert missing.code == 2 and not steered(missing), steered(missing)
        stdin = advisor(
            ["lint", "--stdin-filename", f"x{inject}.sh", "-"], stdin=(LAUNCH + "\n").encode()
        )
        stdin.check()
        assert not steered(stdin), steered(stdin)
        plan = advisor(["plan", "--gpu", "L4", "--model", "Qwen/Qwen3-8B", f"--no-such{inject}"])
        assert not steered(plan), steered(plan)


def _yaml_str(text: str) -> str:
    return '"' + text.encode("unicode_escape").decode().replace('"', '\\"') + '"'


def test_shown_makes_every_control_visible() -> None:
    for char in ["\n", "\r", "\x1b", "\x00", "\x7f", "\x85", "\u202e", "\u2066", "\udcff"]:
        assert char not in shown(f"a{char}b")
    assert shown("a\nb") == "a\\nb" and shown("\u202e") == "\\u202e"
    assert shown("plain/ünïcode path") == "plain/ünïcode path"


NUMBER_FORMS = st.sampled_from(
    [
        "0x" + "f" * 5000,
        "0o" + "7" * 5000,
        "0b" + "1" * 20000,
        "1" + ":59" * 30000,
        "0x_" + "f_" * 3000,
        "9" * 5000,
    ]
)


@FUZZ
@given(NUMBER_FORMS, st.sampled_from(["compose", "pod", "policy", "plan-from"]))
@example("1" + ":59" * 30000, "pod")
@example("0x" + "f" * 5000, "compose")
def test_long_numbers_in_any_base(number: str, where: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.yaml"
        if where == "compose":
            path.write_text(
                "services:\n  engine:\n    image: lmsysorg/sglang:v0.5.23-cu129\n"
                f"    command: {LAUNCH}\n    deploy:\n      resources:\n        reservations:\n"
                f"          devices:\n            - driver: nvidia\n              count: {number}\n"
                "              capabilities: [gpu]\n"
            )
            run = lint(path)
        elif where == "pod":
            path.write_text(
                f"kind: Pod\nspec:\n  containers:\n  - name: e\n    command: [{LAUNCH}]\n"
                f"    resources: {{limits: {{nvidia.com/gpu: {number}}}}}\n"
            )
            run = lint(path)
        else:
            path.write_text(
                "apiVersion: specserver.io/v1alpha1\nkind: SpecServer\nmetadata: {name: a}\n"
                f"spec:\n  replicas: {number}\n"
            )
            argv = (
                ["replay", "--policy", str(path), "--observations", str(path)]
                if where == "policy"
                else ["plan", "--from", str(path), "--gpu", "L4"]
            )
            run = advisor(argv)
        run.check()


@FUZZ
@given(
    st.sampled_from(
        [
            '{"architectures": 5}',
            '{"a": ' + "[" * 200 + "]" * 200 + "}",
            '{"max_position_embeddings": ' + "9" * 5000 + "}",
            '{"rope_theta": NaN}',
            '{"rope_scaling": {"factor": "a", "rope_type": "yarn"}}',
            '{"max_position_embeddings": -5}',
            "[1, 2]",
            '{"text_config": {"num_hidden_layers": "x"}}',
        ]
    )
)
def test_override_json_of_any_shape(value: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "run.sh"
        script.write_text(f"{LAUNCH} --json-model-override-args '{value}'\n")
        linted = lint(script, "--gpu", "L4")
        linted.check()
        named = [line for line in linted.stdout.splitlines() if "SPEC015" in line]
        assert any("--json-model-override-args" in line for line in named), linted.stdout
        run = advisor(["plan", "--from", str(script), "--gpu", "L4"])
        run.check()


@FUZZ
@given(
    st.sampled_from(
        [
            ["plan", "--gpu", "L4", "--model", "Qwen/Qwen3-8B", "--accept-length", v]
            for v in ("nan", "inf", "-inf", "1e308", "-1", "0")
        ]
        + [
            [
                "plan",
                "--gpu",
                "L4",
                "--model",
                "Qwen/Qwen3-8B",
                "--search-shape",
                "--concurrency",
                ",".join(str(i) for i in range(1, 20_001)),
            ],
            [
                "plan",
                "--gpu",
                "L4",
                "--model",
                "Qwen/Qwen3-8B",
                "--concurrency",
                ",".join(str(i) for i in range(1, 20_001)),
            ],
            [
                "plan",
                "--gpu",
                "L4",
                "--model",
                "Qwen/Qwen3-8B",
                "--prompt-len",
                ",".join(str(i) for i in range(1, 20_001)),
            ],
            ["plan", "--gpu", "L4", "--model", "Qwen/Qwen3-8B", "--launch", "9" * 5000],
        ]
    )
)
def test_plain_arguments_out_of_range(argv: list[str]) -> None:
    run = advisor(argv)
    run.check()
    assert run.code == 2, (run.code, run.stderr[-300:])
    option = next(
        a for a in argv if a in ("--accept-length", "--concurrency", "--prompt-len", "--launch")
    )
    assert option in run.stderr, run.stderr[-300:]


def test_a_lint_path_longer_than_name_max_is_named() -> None:
    run = advisor(["lint", "/tmp/" + "a" * 300])
    run.check()
    assert run.code == 2 and "File name too long" in run.stderr


def test_one_path_many_times_is_linted_once() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "run.sh"
        script.write_text(LAUNCH + "\n")
        start = time.process_time()
        run = advisor(["lint", "--format", "json", *[str(script)] * 5_000])
        run.check()
        assert time.process_time() - start < 5.0
        once = advisor(["lint", "--format", "json", str(script)])
        assert run.stdout == once.stdout


def test_a_replay_observation_past_a_float() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        obs = Path(tmp) / "obs.jsonl"
        obs.write_text(
            '{"ts": 0, "mode": "on", "accept_length": 2, "ttft_p99_s": 0.5, "running": '
            + "9" * 400
            + ', "queued": 0, "output_tok_s": 100, "age_s": 1}\n'
        )
        run = advisor(["replay", "--observations", str(obs)])
        run.check()


def test_many_unknown_flags_on_a_pod_are_linted_within_the_budget() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pod.yaml"
        flags = ", ".join(f"--x{i}" for i in range(150_000))
        path.write_text(
            "kind: Pod\nspec:\n  containers:\n  - name: e\n"
            f"    command: [python3, -m, sglang.launch_server]\n    args: [{flags}]\n"
        )
        run = lint(path, "--format", "json")
        run.check()
        assert run.seconds < 5.0, run.seconds


@FUZZ
@given(st.sampled_from(["---\n", "--- {}\n", "...\n", "--- ~\n"]), st.integers(10_001, 500_000))
@example("---\n", 499_000)
@example("--- {}\n", 280_000)
def test_many_documents_are_counted_before_composing(marker: str, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.yaml"
        path.write_text(marker * min(count, 2_000_000 // len(marker)))
        run = lint(path, "--format", "json")
        run.check()
        assert run.code == 2 and "INPUT001" in run.stdout, run.stdout[-300:]
        assert run.seconds < 2.0, run.seconds
