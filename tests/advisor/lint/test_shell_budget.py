"""The shell evaluator's budget per file (issue 31): loops, nesting, recursion, doubling, long
``if`` chains and huge launch lines all spend one budget, finish fast in bounded memory, and the
launch is reported once as not fully evaluated (INFO004) with its decided flags still checked.

The five named cases run the real CLI in a subprocess under a hard address-space limit and a
timeout (on the code before the budget each one hung or took gigabytes); the rest are unit
tests of the evaluator.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specserver_advisor.lint.engine import Options, run
from specserver_advisor.lint.shell.budget import MAX_ARGS, MAX_NESTING, UNITS, Budget
from specserver_advisor.lint.shell.evaluate import from_shell
from specserver_advisor.lint.shell.words import ShellSyntaxError

#: A launch with one mistake the rules catch (5 draft tokens for 3 steps and topk 1: SPEC004).
LAUNCH = (
    "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 5 --host 0.0.0.0 "
    "--enable-metrics --max-running-requests 8"
)
SIXTEEN = " ".join("abcdefghijklmnop")
LIMIT_S = 20  # the shared 2-core CI machine; each case takes about a second
LIMIT_BYTES = 768 * 2**20


def nested_loops() -> str:
    heads = "".join(f"{'  ' * i}for v{i} in {SIXTEEN}; do\n" for i in range(6))
    tails = "".join(f"{'  ' * i}done\n" for i in reversed(range(6)))
    return f"#!/bin/bash\n{heads}{'  ' * 6}{LAUNCH}\n{tails}"


def recursion() -> str:
    return f"#!/bin/bash\nf() {{\n  for x in {SIXTEEN}; do\n    f $x\n  done\n  {LAUNCH}\n}}\nf\n"


def doubling() -> str:
    steps = "".join(f'V{i + 1}="$V{i} $V{i}"\n' for i in range(25))
    return f"#!/bin/bash\nV0=--enable-metrics\n{steps}{LAUNCH} $V25\n"


def if_chain() -> str:
    ifs = "".join(f'if [ -n "$X{i}" ]; then A{i}=1; else A{i}=2; fi\n' for i in range(2000))
    return f"#!/bin/bash\n{ifs}{LAUNCH}\n"


def huge_line() -> str:
    return f"#!/bin/bash\n{LAUNCH}{' x' * 400_000}\n"


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def lint_bounded(path: Path) -> tuple[int, list[dict[str, object]], str, float]:
    """``specserver-advisor lint`` in a subprocess with a memory limit and a timeout."""
    code = (
        "import sys; from specserver_advisor.cli.main import main; "
        "sys.exit(main(['lint', '--format', 'json', '--select', 'SPEC004,INFO', sys.argv[1]]))"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
        preexec_fn=_limit,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the lint process (the verdict holds on a busy machine; the timeout above is
    # the backstop against a hang).
    elapsed = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return proc.returncode, json.loads(proc.stdout or "[]"), proc.stderr, elapsed


@pytest.mark.parametrize(
    ("make", "limit"),
    [
        (nested_loops, "shell words"),
        (recursion, "shell words"),
        (doubling, "a variable's value grew past"),
        (if_chain, "evaluation steps"),
        (huge_line, "shell words"),
    ],
    ids=[
        "six-nested-loops",
        "recursive-function-around-a-loop",
        "doubling-25-times",
        "2000-if-else",
        "400k-arguments",
    ],
)
def test_pathological_scripts_spend_the_budget(tmp_path: Path, make: object, limit: str) -> None:
    assert callable(make)
    script = tmp_path / "run.sh"
    script.write_text(make())
    rc, diags, stderr, elapsed = lint_bounded(script)
    assert "Traceback" not in stderr and "MemoryError" not in stderr, stderr[-2000:]
    assert rc == 1, stderr
    assert elapsed < LIMIT_S
    launch_line = next(
        n for n, ln in enumerate(script.read_text().splitlines(), 1) if "sglang" in ln
    )
    infos = [d for d in diags if d["code"] == "INFO004"]
    assert len(infos) == 1, infos  # once, however many worlds reached the launch
    assert infos[0]["line"] == launch_line
    assert limit in str(infos[0]["message"])
    # The flags decided before the budget ran out are still checked.
    assert [d["line"] for d in diags if d["code"] == "SPEC004"] == [launch_line]


def test_a_launch_line_is_linted_up_to_max_args() -> None:
    line = LAUNCH + " --enable-metrics" * MAX_ARGS
    (launch,) = from_shell("run.sh", line)
    assert len(launch.args) == MAX_ARGS - 3  # python3 -m sglang.launch_server
    over = len(line.split()) - MAX_ARGS
    assert launch.incomplete == (
        f"the launch line has more than {MAX_ARGS:,} arguments ({over} more were read); "
        f"only the first {MAX_ARGS:,} are checked"
    )
    assert launch.parsed.values["speculative_num_draft_tokens"] == 5


def test_ordinary_scripts_spend_a_sliver_and_carry_no_reason() -> None:
    script = (
        'MODEL=${MODEL:-Qwen/Qwen3-8B}\nARGS=(--model-path "$MODEL" --host 0.0.0.0)\n'
        'for gpu in l4 h100; do\n  if [ "$gpu" = l4 ]; then TP=1; else TP=2; fi\ndone\n'
        'serve() { python3 -m sglang.launch_server "${ARGS[@]}" --tp "$TP" --port "$1"; }\n'
        "serve 30000\n"
    )
    budget = Budget()
    launches = from_shell("run.sh", script, budget=budget)
    assert {la.parsed.values["tp_size"] for la in launches} == {1, 2}
    assert all(la.incomplete is None for la in launches)
    assert budget.spent is None
    assert all(budget.left[unit] > 0.99 * full for unit, full in UNITS.items())


def test_the_commands_of_one_yaml_file_share_one_budget(tmp_path: Path) -> None:
    """Many ``bash -c`` loops in one manifest spend one budget, not one each."""
    loops = "; ".join(f"for v{i} in {SIXTEEN}; do" for i in range(4))
    command = f"{loops} {LAUNCH} --port $v0; done; done; done; done"
    containers = "".join(
        f"        - name: c{k}\n          image: lmsysorg/sglang:v0.5.23-cu129\n"
        f"          command: [bash, -c, {json.dumps(command)}]\n"
        for k in range(40)
    )
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: e}\nspec:\n  template:\n"
        f"    spec:\n      containers:\n{containers}"
    )
    start = time.process_time()
    diags = run([manifest], Options(env={}, enabled=frozenset({"INFO004"}))).diagnostics
    assert time.process_time() - start < 10
    assert diags and all("not fully evaluated" in d.message for d in diags)


def test_blocks_nested_past_the_limit_are_a_clear_input_error(tmp_path: Path) -> None:
    depth = MAX_NESTING + 5
    script = "if true; then\n" * depth + LAUNCH + "\n" + "fi\n" * depth
    with pytest.raises(ShellSyntaxError, match=f"nested deeper than {MAX_NESTING}"):
        from_shell("run.sh", script)
    path = tmp_path / "run.sh"
    path.write_text(script)
    (diag,) = run([path], Options(env={})).diagnostics
    assert diag.code == "INPUT001" and f"nested deeper than {MAX_NESTING}" in diag.message


def test_deeply_nested_default_expansions_read_a_few_levels() -> None:
    word = "${A:-" * 5000 + "--enable-metrics" + "}" * 5000
    start = time.process_time()
    (launch,) = from_shell("run.sh", f"{LAUNCH} {word}\n")
    assert time.process_time() - start < 5
    assert launch.parsed.values["speculative_num_draft_tokens"] == 5


def test_arithmetic_is_64_bit_and_short() -> None:
    """bash wraps at 64 bits, so a larger result is unknown (INFO002), never a huge number; a
    long expression is not parsed at all."""
    script = f"{LAUNCH} --tp $((4294967296 * 4294967296))\n"
    script += f"{LAUNCH} --tp $(({'1+' * 5000}1))\n"
    start = time.process_time()
    first, second = from_shell("run.sh", script)
    assert time.process_time() - start < 5
    assert "tp_size" not in first.parsed.values and "tp_size" not in second.parsed.values
    assert first.unresolved and second.unresolved  # INFO002 names the expression


def test_past_the_budget_each_function_still_runs_once() -> None:
    """A launch after the costly part, inside a function, is still found (the cheap path
    enters each function once, so the second call adds nothing)."""
    costly = nested_loops().replace(LAUNCH, "X=1")
    script = f'{costly}serve() {{ {LAUNCH} --port "$1"; }}\nserve 30000\nserve 30001\n'
    (launch,) = from_shell("run.sh", script)
    assert launch.parsed.values["port"] == 30000
    assert launch.incomplete is not None and "evaluation steps" in launch.incomplete
    assert launch.parsed.values["speculative_num_draft_tokens"] == 5
