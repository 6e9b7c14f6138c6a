"""``plan --from FILE`` for every input kind, the verdict-first text, ``--plot`` and ``| head``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import SpecServer, SpecServerSpec
from stack import REPO

FLAGS = [
    "--model-path",
    "Qwen/Qwen3-8B",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "Tengyunw/qwen3_8b_eagle3",
    "--mem-fraction-static",
    "0.88",
    "--max-running-requests",
    "12",
    "--page-size",
    "1",
    "--chunked-prefill-size",
    "2048",
]
ARGS_YAML = "[" + ", ".join(json.dumps(f) for f in FLAGS) + "]"
CONTAINER = f"""
      - name: sglang
        image: lmsysorg/sglang:v0.5.23
        command: ["python3", "-m", "sglang.launch_server"]
        args: {ARGS_YAML}
"""
INPUTS = {
    "deployment.yaml": f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: qwen}}
spec:
  template:
    spec:
      containers:{CONTAINER}""",
    "statefulset.yaml": f"""apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: qwen}}
spec:
  template:
    spec:
      containers:{CONTAINER}""",
    "pod.yaml": f"""apiVersion: v1
kind: Pod
metadata: {{name: qwen}}
spec:
  containers:
  - name: sglang
    command: ["python3", "-m", "sglang.launch_server"]
    args: {ARGS_YAML}
""",
    "lws.yaml": f"""apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: qwen}}
spec:
  leaderWorkerTemplate:
    leaderTemplate:
      spec:
        containers:{CONTAINER.replace(chr(10), chr(10) + "  ")}""",
    "compose.yaml": f"""services:
  sglang:
    image: lmsysorg/sglang:v0.5.23
    command: {json.dumps("python3 -m sglang.launch_server " + " ".join(FLAGS))}
""",
    "serve.sh": "#!/bin/sh\nexec python3 -m sglang.launch_server \\\n  "
    + " \\\n  ".join(f"{FLAGS[k]} {FLAGS[k + 1]}" for k in range(0, len(FLAGS), 2))
    + "\n",
    "sglang-config.yaml": "\n".join(
        f"{FLAGS[k].lstrip('-')}: {FLAGS[k + 1]}" for k in range(0, len(FLAGS), 2)
    )
    + "\n",
}


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    rc = main(["plan", *argv, "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_plan_from_each_input_kind_plans_the_exact_launch(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_text(INPUTS[name])
    rc, out = plan_json(capsys, "--from", str(path), "--gpu", "L4")
    assert rc == 0, out
    resolved = out["resolved"]
    assert isinstance(resolved, dict)
    assert resolved["mem_fraction_static"] == 0.88
    assert resolved["max_running_requests"] == 12
    assert resolved["algorithm"] == "EAGLE3"
    flags = out["flags"]
    assert isinstance(flags, dict)
    assert (flags["chunked_prefill_size"], flags["page_size"]) == (2048, 1)
    argv = out["argv"]
    assert isinstance(argv, list)
    for k in range(0, len(FLAGS), 2):  # every flag of the file, with its value
        assert argv[argv.index(FLAGS[k]) + 1] == FLAGS[k + 1]
    # SGLang would choose the shape itself: the verdict says to pin it (the operator does).
    assert out["verdict"] == {
        "starts": True,
        "message": "starts; set --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4",
    }


def test_plan_from_a_specserver_plans_what_the_operator_renders(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"
    rc, out = plan_json(capsys, "--from", str(example))
    assert rc == 0
    import yaml

    spec = SpecServer.model_validate(yaml.safe_load(example.read_text())).spec
    target, draft = bundled(spec.model.path), bundled("Tengyunw/qwen3_8b_eagle3")
    assert target is not None and draft is not None
    configs = ModelConfigs(target.config, draft.config, None, None, "bundled")
    assert out["argv"] == build_engine_config(spec, configs, True).args
    assert out["flags"]["kv_cache_dtype"] == "fp8_e4m3"  # type: ignore[index]


def snippet_spec(lines: list[str]) -> SpecServerSpec:
    """The SpecServer snippet of a text plan, validated."""
    import yaml

    start = lines.index("spec:")
    end = lines.index("", start)
    body = yaml.safe_load("\n".join(lines[start:end]))
    return SpecServer.model_validate(
        {"apiVersion": "specserver.io/v1alpha1", "kind": "SpecServer", "metadata": {}, **body}
    ).spec


def test_the_snippet_of_a_launch_without_speculation_is_a_valid_disabled_specserver(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = REPO / "manifests" / "examples" / "qwen3-30b-a3b-off.yaml"
    assert main(["plan", "--from", str(example)]) == 0
    out = capsys.readouterr().out.splitlines()
    spec = snippet_spec(out)
    assert spec.mode.value == "Disabled"
    assert spec.model.path == "Qwen/Qwen3-30B-A3B-Instruct-2507"
    row = next(line for line in out if line.strip().startswith("1 |"))
    assert row.split("|")[1].split()[0] == "-"  # no "on" prediction without speculation


def test_plan_text_leads_with_the_verdict_then_flags_snippet_and_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3"]
    assert main([*argv, "--gpu", "L4", "--mem-fraction-static", "0.85"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("starts; set ")
    assert "--max-running-requests" in lines[0]
    assert "python -m sglang.launch_server \\" in lines
    assert "# SpecServer" in lines and "spec:" in lines
    assert any("TTFT p99 on ms" in line and "out tok/s on" in line for line in lines)
    # The snippet is a SpecServer spec that validates.
    spec = snippet_spec(lines)
    assert spec.engine.mem_fraction_static == 0.85
    # mode Auto: the operator computes a cap per engine; the snippet pins none (issue 40)
    assert spec.mode.value == "Auto" and spec.engine.max_running_requests is None
    assert any(line.startswith("# --max-running-requests") for line in lines)


@pytest.mark.parametrize(
    ("model", "gpu"),
    [
        ("deepseek-ai/DeepSeek-V3", "L4"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "L4"),
        ("Qwen/Qwen3-8B", "L4"),
        ("meta-llama/Llama-3.1-8B-Instruct", "A10G"),
    ],
)
def test_plan_advice_never_asks_for_a_mem_fraction_above_one(
    model: str, gpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["plan", "--model", model, "--gpu", gpu, "--speculative-algorithm", "NGRAM"])
    first = capsys.readouterr().out.splitlines()[0]
    fractions = [float(x) for x in re.findall(r"--mem-fraction-static ([0-9.]+)", first)]
    assert all(0 < f < 1 for f in fractions), first
    if model == "deepseek-ai/DeepSeek-V3":
        assert rc == 1
        assert re.match(r"won't start: does not fit on 1 x L4: needs >= \d+ GPUs", first)


def test_a_draft_model_algorithm_without_a_draft_on_a_non_mtp_target_is_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main(["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4"])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("won't start: NEXTN on a LlamaForCausalLM target needs a draft")
    assert "gain x" not in out  # no prediction


def test_sglang_flags_pass_through_and_unknown_ones_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--speculative-algorithm", "NGRAM"]
    rc, out = plan_json(capsys, *base, "--page-size", "16", "--dtype", "float16", "--tp", "2")
    assert rc == 0
    flags = out["flags"]
    assert isinstance(flags, dict)
    assert (flags["page_size"], flags["dtype"], flags["tp_size"]) == (16, "float16", 2)
    assert out["resolved"]["page_size"] == 16  # type: ignore[index]
    memory = out["memory"]
    assert isinstance(memory, dict)
    assert memory["target_weights_gib"] == pytest.approx(15.26 / 2, abs=0.02)  # split over tp 2
    assert main(["plan", *base, "--no-such-flag", "1"]) == 2
    assert "--no-such-flag" in capsys.readouterr().err


def flagship_with(tmp_path: Path, old: str, new: str) -> Path:
    """The flagship SpecServer example with ``old`` replaced by ``new``, written to a file."""
    text = (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    assert old in text
    path = tmp_path / "sps.yaml"
    path.write_text(text.replace(old, new))
    return path


def test_plan_from_an_invalid_specserver_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = flagship_with(tmp_path, "memFractionStatic: 0.85", "memFractionStatic: 1.5")
    assert main(["plan", "--from", str(bad)]) == 2
    assert "spec.engine.memFractionStatic" in capsys.readouterr().err
    empty = tmp_path / "empty.yaml"
    empty.write_text("kind: ConfigMap\n")
    assert main(["plan", "--from", str(empty), "--gpu", "L4"]) == 2
    assert "no SGLang server launch" in capsys.readouterr().err


def test_plot_draws_both_modes_with_the_crossover_and_kv_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svg = tmp_path / "plan.svg"
    argv = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4"]
    argv += ["--speculative-algorithm", "NGRAM", "--mem-fraction-static", "0.9"]
    assert main([*argv, "--plot", str(svg)]) == 0
    capsys.readouterr()
    root = ET.fromstring(svg.read_text())
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}polyline")
    assert sorted(el.get("class") for el in lines) == ["off", "off", "on", "on"]
    assert root.findall(f"{ns}line[@class='crossover']")
    assert root.findall(f"{ns}line[@class='kv-cap']")
    assert main([*argv, "--plot", str(tmp_path / "plan.gif")]) == 2
    capsys.readouterr()
    # A launch that does not start has nothing to draw: a note, no file, no traceback.
    starved = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--speculative-algorithm"]
    assert main([*starved, "NGRAM", "--plot", str(tmp_path / "none.svg")]) == 1
    assert "no plot: the launch does not start" in capsys.readouterr().err
    assert not (tmp_path / "none.svg").exists()


PLAN = ["plan", "--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3", "--gpu", "L4"]


@pytest.mark.parametrize("command", ["plan", "replay"])
def test_output_piped_into_head_exits_quietly(command: str, tmp_path: Path) -> None:
    # Far more output than a pipe buffers, so the writer sees the reader go away.
    argv = [*PLAN, "--concurrency", ",".join(str(c) for c in range(1, 400))]
    if command == "replay":
        recorded = (REPO / "tests/data/observations-rise-fall.jsonl").read_text()
        long = tmp_path / "long.jsonl"
        long.write_text(recorded * 60)
        example = REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml"
        argv = ["replay", "--policy", str(example), "--observations", str(long)]
        argv += ["--format", "jsonl"]
    cmd = [sys.executable, "-m", "specserver_advisor.cli.main", *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what head does after its lines
    err = proc.stderr.read().decode()
    proc.stderr.close()
    proc.wait(timeout=60)
    assert first.startswith((b"won't start", b"starts", b"{"))
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_plan_of_an_auto_specserver_states_the_floor_and_crossover_replay_uses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"
    assert main(["plan", "--from", str(example)]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.startswith("policy score crossover"))
    # The table's throughput crossover is a different number, labelled apart.
    assert sum(x.startswith("throughput crossover (out tok/s on = off): ") for x in out) == 1
    data = REPO / "tests" / "data" / "observations-rise-fall.jsonl"
    assert (
        main(["replay", "--policy", str(example), "--observations", str(data), "--format", "jsonl"])
        == 0
    )
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line.endswith(f"below {first['thresholds']['accept_floor']:g}")


def test_plan_from_a_specserver_the_operator_refuses_says_why_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sps = flagship_with(
        tmp_path, 'extraArgs: ["--kv-cache-dtype", "fp8_e4m3"]', 'extraArgs: ["--port", "1"]'
    )
    assert main(["plan", "--from", str(sps)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        "won't start: OwnedFlagInExtraArgs: extraArgs may not set --port "
        "(the operator renders it; use engine.port)"
    )


def test_the_snippet_renders_the_flags_plan_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(
        "#!/bin/sh\nSGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 sglang serve Qwen/Qwen3-8B \\\n"
        "  --speculative-algorithm NGRAM --mem-fraction-static 0.9 --context-length 65536 \\\n"
        "  --kv-cache-dtype fp8_e4m3\n"
    )
    assert main(["plan", "--from", str(script), "--gpu", "A10G"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("python -m sglang.launch_server \\") + 1
    end = lines.index("", start)
    block = [line for line in lines[start:end] if not line.startswith("#")]
    printed = [line.strip().rstrip(" \\").split(" ", 1) for line in block]
    assert [p[0] for p in printed] == [
        "--model-path",
        "--speculative-algorithm",
        "--mem-fraction-static",
        "--context-length",
        "--kv-cache-dtype",
        "--max-running-requests",
    ]
    spec = snippet_spec(lines)
    assert spec.engine.env[0].name == "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
    target = bundled("Qwen/Qwen3-8B")
    assert target is not None
    cfg = build_engine_config(spec, ModelConfigs(target.config, None, None, None, "b"), True)
    assert cfg.valid, cfg.message
    rendered = cfg.args
    for flag, value in printed:
        assert rendered[rendered.index(flag) + 1] == value, flag


def test_a_hostile_model_path_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "serve.sh"
    script.write_text(f"python -m sglang.launch_server --model-path {'A' * 5000}\n")
    assert main(["plan", "--from", str(script), "--gpu", "L4"]) == 2
    assert "no config.json for" in capsys.readouterr().err


def test_topk_without_draft_tokens_is_refused_by_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SPEC017: the launch fails in SGLang's tokenizer manager (max(topk * steps, None))."""
    example = (REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text()
    assert "eagleTopk: 1" in example and "numDraftTokens: 4" in example
    sps = tmp_path / "sps.yaml"
    sps.write_text(example.replace("eagleTopk: 1", "eagleTopk: 4").replace("numDraftTokens: 4", ""))
    assert main(["plan", "--from", str(sps)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("won't start: SGLang raises TypeError") and (
        "--speculative-num-draft-tokens" in first
    )


@pytest.mark.parametrize(
    ("words", "option", "variable"),
    [
        ("--model-path $MODEL", "--model-path", "$MODEL"),
        (
            '--model-path Qwen/Qwen3-8B --speculative-draft-model-path "${DRAFT}"',
            "--speculative-draft-model-path",
            "$DRAFT",
        ),
    ],
)
def test_plan_from_names_the_unset_variable_a_model_path_comes_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: str, option: str, variable: str
) -> None:
    """Not "no config.json for '$MODEL'": the file never sets the variable, and plan says so."""
    script = tmp_path / "serve.sh"
    script.write_text(
        f"#!/bin/bash\npython3 -m sglang.launch_server {words} --speculative-algorithm EAGLE3 "
        "--tp $TP\n"
    )
    assert main(["plan", "--from", str(script), "--gpu", "H100"]) == 2
    err = capsys.readouterr().err
    assert f"{option} comes from {variable}, which the file never sets" in err
    assert "no config.json" not in err and "Traceback" not in err


def test_plan_from_a_launch_whose_options_are_in_its_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sglang serve MODEL --config FILE``: the file's keys are the launch's flags (SGLang
    merges them before parsing), so the plan is of the speculative server they describe."""
    (tmp_path / "spec.yaml").write_text(
        "speculative-algorithm: EAGLE3\nspeculative-draft-model-path: Tengyunw/qwen3_8b_eagle3\n"
        "speculative-num-steps: 3\nspeculative-eagle-topk: 1\nspeculative-num-draft-tokens: 4\n"
    )
    script = tmp_path / "serve.sh"
    script.write_text("sglang serve Qwen/Qwen3-8B --config spec.yaml --port 30000\n")
    assert main(["plan", "--from", str(script), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "--speculative-algorithm EAGLE3" in out and "--model-path Qwen/Qwen3-8B" in out
