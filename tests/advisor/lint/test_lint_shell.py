"""The shell evaluator under ``lint``: launch lines built from variables, arithmetic, branches,
functions and arrays are read the way bash runs them; what cannot be known is an INFO."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specserver_advisor.lint.engine import Options, run
from specserver_advisor.lint.model import Diagnostic, Launch
from specserver_advisor.lint.shell.evaluate import from_shell
from specserver_advisor.lint.shell.words import ShellSyntaxError

QWEN = "--model-path Qwen/Qwen3-8B"
GOOD_SPEC = (
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 "
    "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
)


def launches(text: str) -> list[Launch]:
    return from_shell("run.sh", text)


def lint_text(tmp_path: Path, text: str) -> list[Diagnostic]:
    path = tmp_path / "run.sh"
    path.write_text(text)
    return run([path], Options(env={})).diagnostics


def codes(diags: list[Diagnostic]) -> list[tuple[int, str]]:
    return [(d.line, d.code) for d in diags]


def test_args_built_in_a_variable_by_appending(tmp_path: Path) -> None:
    script = (
        "m=Qwen/Qwen3-8B\n"
        'args="--model-path $m --enable-metrics --max-running-requests 64"\n'
        'args+=" --speculative-algorithm EAGLE3 --speculative-draft-model-path '
        'Tengyunw/qwen3_8b_eagle3"\n'
        'args="$args --speculative-num-steps 3 --speculative-eagle-topk 1 '
        '--speculative-num-draft-tokens 5"\n'
        "python3 -m sglang.launch_server $args\n"
    )
    (launch,) = launches(script)
    assert launch.parsed.values["model_path"] == "Qwen/Qwen3-8B"
    assert launch.parsed.values["speculative_algorithm"] == "EAGLE3"
    assert launch.parsed.issues == []
    diags = lint_text(tmp_path, script)
    # The one mistake (5 draft tokens with 3 steps, topk 1) is reported where it was written.
    assert codes(diags) == [(4, "SPEC004")]
    assert (
        diags[0].column
        == len('args="$args --speculative-num-steps 3 --speculative-eagle-topk 1 ') + 1
    )


def test_variables_defaults_exports_and_arithmetic() -> None:
    script = (
        "MODEL=/data/models/qwen3-8b\n"
        "DRAFT=${DRAFT:-Tengyunw/qwen3_8b_eagle3}\n"
        ": ${STEPS:=3}\n"
        "dp=4\n"
        "export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1\n"
        "NOT_EXPORTED=1\n"
        "python -m sglang.launch_server --model-path ${MODEL} --speculative-algorithm EAGLE3 \\\n"
        "    --speculative-draft-model-path $DRAFT --speculative-num-steps $STEPS \\\n"
        "    --max-running-requests $((dp * 512 / 2)) --dp-size $(( dp ))\n"
    )
    (launch,) = launches(script)
    v = launch.parsed.values
    assert v["model_path"] == "/data/models/qwen3-8b"
    assert v["speculative_draft_model_path"] == "Tengyunw/qwen3_8b_eagle3"
    assert v["speculative_num_steps"] == 3
    assert v["max_running_requests"] == 1024 and v["dp_size"] == 4
    assert launch.env == {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    assert launch.first_line == 7 and launch.last_line == 9
    assert launch.positions[launch.parsed.positions["max_running_requests"]].line == 9
    assert not launch.unresolved


def test_unknown_variables_are_info_never_false_errors(tmp_path: Path) -> None:
    script = (
        "python -m sglang.launch_server --model-path $MODEL --enable-metrics "
        f"--max-running-requests $MRR {GOOD_SPEC} $EXTRA_ARGS --tp $(nproc)\n"
    )
    (launch,) = launches(script)
    assert set(launch.unresolved) == {"MODEL", "MRR", "EXTRA_ARGS", "$(nproc)"}
    assert launch.parsed.issues == []
    diags = lint_text(tmp_path, script)
    assert sorted(d.code for d in diags) == ["INFO002"] * 4, diags
    messages = sorted(d.message for d in diags)
    assert [m.split(" ")[0] for m in messages[:3]] == ["$EXTRA_ARGS", "$MODEL", "$MRR"]
    assert messages[3].startswith("the output of $(nproc) is unknown")


def test_if_and_case_branches_are_each_linted(tmp_path: Path) -> None:
    script = (
        'if [ "$SPEC" = 1 ]; then\n'
        '  SPEC_ARGS="--speculative-algorithm EAGLE3 --speculative-num-steps 3"\n'
        'elif [ -n "$NGRAM" ]; then\n'
        '  SPEC_ARGS="--speculative-algorithm NGRAM"\n'
        "else\n"
        "  SPEC_ARGS=\n"
        "fi\n"
        f"python -m sglang.launch_server {QWEN} --enable-metrics --max-running-requests 8 "
        "$SPEC_ARGS\n"
        'case "$GPU" in\n'
        "  h100) python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
        "--speculativ-algo EAGLE3 ;;\n"
        "  *) python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 ;;\n"
        "esac\n"
    )
    found = launches(script)
    algos = sorted(str(la.parsed.values.get("speculative_algorithm")) for la in found[:3])
    assert algos == ["EAGLE3", "NGRAM", "None"]
    diags = lint_text(tmp_path, script)
    # The EAGLE3 branch gives steps without topk (SPEC005: SGLang's TypeError) and has no draft
    # (SPEC007), both at its assignment; the h100 case misspells a flag.
    assert sorted(codes(diags)) == [(2, "SPEC005"), (2, "SPEC007"), (10, "SPEC015")]


def test_functions_arrays_and_positional_parameters() -> None:
    script = (
        "ARGS=(--model-path Qwen/Qwen3-8B --enable-metrics)\n"
        'ARGS+=(--speculative-algorithm "EAGLE3" --speculative-num-steps 3)\n'
        "serve() {\n"
        '  local port="$1"; shift\n'
        '  exec python3 -m sglang.launch_server "${ARGS[@]}" --port "$port" "$@"\n'
        "}\n"
        "function bench {\n"
        "  python3 -m sglang.bench_serving --backend sglang --max-concurrency ${1:-8}\n"
        "}\n"
        "serve 30000 --tp 2\n"
        "bench 32\n"
    )
    server, bench = launches(script)
    assert server.args == [
        "--model-path",
        "Qwen/Qwen3-8B",
        "--enable-metrics",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--port",
        "30000",
        "--tp",
        "2",
    ]
    assert server.positions[3].line == 2 and server.first_line == 5
    assert bench.kind == "bench" and bench.parsed.values["max_concurrency"] == "32"


def test_quoting_heredocs_comments_and_pipelines() -> None:
    script = (
        "cat <<EOF > /tmp/notes\n"
        "python -m sglang.launch_server --model-path not/a/launch\n"
        "EOF\n"
        "# python -m sglang.launch_server --model-path commented/out\n"
        "X='single $NOT_EXPANDED'\n"
        'CUDA_VISIBLE_DEVICES=0,1 nohup python -m sglang.launch_server --model-path "a b" '
        '--served-model-name "$X" > server.log 2>&1 </dev/null &>>all.log | tee log.txt &\n'
    )
    (launch,) = launches(script)
    assert launch.parsed.values["model_path"] == "a b"
    assert launch.parsed.values["served_model_name"] == "single $NOT_EXPANDED"
    assert launch.env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert launch.args[-1] == "single $NOT_EXPANDED" and launch.parsed.issues == []


def test_unterminated_quote_is_an_input_error_with_its_position(tmp_path: Path) -> None:
    with pytest.raises(ShellSyntaxError) as err:
        launches('echo ok\npython -m sglang.launch_server --model-path "oops\n')
    assert (err.value.line, err.value.column) == (2, 45)
    diags = lint_text(tmp_path, 'echo ok\npython -m sglang.launch_server --model-path "oops\n')
    assert [(d.code, d.line, d.column) for d in diags] == [("INPUT001", 2, 45)]


def test_branch_explosion_is_bounded() -> None:
    script = "".join(f"if a; then V{i}=1; else V{i}=2; fi\n" for i in range(30))
    script += f"python -m sglang.launch_server {QWEN}\n"
    assert 1 <= len(launches(script)) <= 16


MODELS = Path(__file__).parents[1] / "fixtures" / "models"


@pytest.mark.parametrize(
    ("model", "algorithm", "expected"),
    [
        ("Qwen/Qwen3-8B", "NEXTN", ["SPEC007"]),
        ("Qwen/Qwen3-8B", "EAGLE", ["SPEC007"]),
        ("Qwen/Qwen3-8B", "EAGLE3", ["SPEC007"]),
        ("deepseek-ai/DeepSeek-V3", "NEXTN", []),
        ("deepseek-ai/DeepSeek-V3", "EAGLE", []),
        ("deepseek-v3-no-mtp", "NEXTN", ["SPEC007"]),
        ("org/not-found", "NEXTN", []),  # unknown target: INFO001 says the rule did not run
        ("org/not-found", "EAGLE3", ["SPEC007"]),
    ],
)
def test_nextn_and_eagle_without_a_draft_need_mtp_layers(
    tmp_path: Path, model: str, algorithm: str, expected: list[str]
) -> None:
    path = tmp_path / "run.sh"
    path.write_text(
        f"python -m sglang.launch_server --model-path {model} --speculative-algorithm "
        f"{algorithm} --enable-metrics --max-running-requests 8\n"
    )
    options = Options(env={}, enabled=frozenset({"SPEC007"}), model_dirs=[MODELS])
    diags = run([path], options).diagnostics
    assert [d.code for d in diags] == expected
    if expected and "no-mtp" in model:
        assert "DeepseekV3ForCausalLM has no MTP layers" in diags[0].message


SHELLISH = st.lists(
    st.sampled_from(
        [
            *"abcXYZ_=$-{}()[]:+#;&|'\"\\`\n\t <>*@!0123",
            *("python -m sglang.launch_server ", "--tp ", "if ", "then ", "fi ", "case "),
            *("esac ", "$((", "))", "${", "for x in ", "do ", "done ", "f() { ", "}"),
            *("<<EOF\n", "EOF\n"),
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(SHELLISH)
def test_arbitrary_shell_never_raises_anything_but_a_syntax_error(text: str) -> None:
    try:
        found = from_shell("x.sh", text)
    except ShellSyntaxError as exc:
        assert exc.line >= 1 and exc.column >= 1
        return
    for launch in found:
        assert len(launch.args) == len(launch.positions)


def test_crlf_line_ends_and_continuations() -> None:
    script = "M=Qwen/Qwen3-8B\r\npython -m sglang.launch_server \\\r\n  --model-path $M --tp 2\r\n"
    (launch,) = launches(script)
    assert launch.args == ["--model-path", "Qwen/Qwen3-8B", "--tp", "2"]
    assert launch.positions[2].line == 3


def test_model_paths_that_break_path_expansion_are_info(tmp_path: Path) -> None:
    diags = lint_text(
        tmp_path,
        "python -m sglang.launch_server --model-path ~nosuchuser0/m --enable-metrics "
        f"--max-running-requests 8 {GOOD_SPEC}\n",
    )
    assert [d.code for d in diags] == ["INFO001"]


def test_flag_names_are_decided_when_their_values_are_variables(tmp_path: Path) -> None:
    """argparse matches option names (prefixes, ambiguity, unknown names) before it reads a
    value: a variable value hides only the value, never the flag name around it."""
    script = (
        f"python3 -m sglang.launch_server {QWEN} {GOOD_SPEC} --host 0.0.0.0 --enable-metrics \\\n"
        "  --cuda-graph-max-bs $CONC --max-running-requests $CONC \\\n"
        "  --speculative-skip-dp-mlp-sync=$SKIP --tp $TP\n"
    )
    diags = lint_text(tmp_path, script)
    found = [(d.line, d.code, d.message) for d in diags if d.code == "SPEC015"]
    assert [(line, code) for line, code, _ in found] == [(2, "SPEC015"), (3, "SPEC015")]
    assert "ambiguous option: --cuda-graph-max-bs could match" in found[0][2]
    assert "unrecognized arguments: --speculative-skip-dp-mlp-sync" in found[1][2]
    info = {d.message.split()[0]: d.message for d in diags if d.code == "INFO002"}
    # Said once per variable, naming what waits for it: the values, not the names.
    assert info["$CONC"].endswith(
        "the value it gives --cuda-graph-max-bs, --max-running-requests is not checked "
        "(flag names are)"
    )
    assert "--tp" in info["$TP"] and "--speculative-skip-dp-mlp-sync" in info["$SKIP"]


def test_what_a_variable_may_be_is_still_not_guessed(tmp_path: Path) -> None:
    """Only names are decided: a value's type, a name built from a variable and a bare word
    after a variable that may be any number of words stay unchecked."""
    script = (
        f"python3 -m sglang.launch_server {QWEN} {GOOD_SPEC} --host 0.0.0.0 --enable-metrics \\\n"
        '  --max-running-requests 64 --tp $TP --$KNOB 8 $EXTRA 5 "--${NAME}-decode=4"\n'
    )
    diags = lint_text(tmp_path, script)
    assert [d.code for d in diags if d.code != "INFO002"] == []
    extra = next(d for d in diags if d.message.startswith("$EXTRA"))
    assert extra.message.endswith("the arguments it supplies are not checked")
