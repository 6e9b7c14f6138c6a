"""``--json-model-override-args`` on target and draft, and the cap SGLang sets when
``--max-running-requests`` is unset, per algorithm and architecture (issue 29).

The oracle holds the same launches against SGLang 0.5.23 itself (tests/oracle/launches.py,
``override_cases`` and ``default_cap_cases``); these tests hold the advisor's answers where it is
used (plan, lint, resolution) without the oracle environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.launch.model import Configs, launch_from_argv
from specserver_advisor.lint.engine import Options, lint
from specserver_advisor.perf.plan import PlanInputs, make_plan
from specserver_advisor.sglang.context import ContextVerdict
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.overrides import apply_model_overrides
from specserver_advisor.sglang.resolve import Resolution, resolve_launch
from stack import REPO, load_config

ORACLE_CONFIGS = REPO / "tests" / "oracle" / "configs"
LLAMA = load_config("llama-3.1-8b")
SHORT_DRAFT = load_config("eagle3-2048-positions")
#: The Llama target's own rope scaling and positions, as JSON.
LLAMA_OWN = json.dumps({"rope_scaling": LLAMA["rope_scaling"], "max_position_embeddings": 131072})
EAGLE3 = ("--speculative-algorithm", "EAGLE3")


def values(*argv: str) -> dict[str, Any]:
    parsed = parse_server_argv(["--model-path", "m", *argv])
    assert not parsed.issues, parsed.issues
    return parsed.values


def plan(*argv: str, target: dict[str, Any] = LLAMA, draft: dict[str, Any] | None = SHORT_DRAFT):
    return make_plan(PlanInputs(values(*argv), target, draft, lookup_gpu("H100"), concurrency=[1]))


def resolve(*argv: str, target: dict[str, Any], draft: dict[str, Any] | None = None) -> Resolution:
    return resolve_launch(values(*argv), target, draft)


def hook_config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ORACLE_CONFIGS / f"{name}.json").read_text())
    return data


# ----------------------------------------------------------------------------- overrides


@pytest.mark.parametrize("override", ['{"max_position_embeddings": 131072}', LLAMA_OWN])
def test_an_override_reaches_the_draft_so_a_short_draft_starts(override: str) -> None:
    without = plan(*EAGLE3)
    assert without.context.verdict == ContextVerdict.STARTUP_FAILS
    assert without.context.failing_model == "draft"
    fixed = plan(*EAGLE3, "--json-model-override-args", override)
    assert fixed.context.verdict == ContextVerdict.COMPATIBLE, fixed.context.message
    assert (fixed.context.target, fixed.context.draft) == (131072, 131072)


def test_the_targets_own_rope_and_positions_are_a_no_op_for_the_target() -> None:
    assert apply_model_overrides(LLAMA, json.loads(LLAMA_OWN)) == {
        **LLAMA,
        "rope_parameters": LLAMA["rope_scaling"],
    }
    assert plan(*EAGLE3, "--json-model-override-args", LLAMA_OWN).context.target == (
        plan(*EAGLE3).context.target
    )


def test_a_rope_override_merges_into_the_configs_own_rope() -> None:
    # linear x2 on Llama keeps its original_max_position_embeddings: no factor on the target
    # (131,072), while the draft, with no rope of its own, doubles to 4,096: still refused.
    linear = '{"rope_scaling": {"rope_type": "linear", "factor": 2.0}}'
    p = plan(*EAGLE3, "--json-model-override-args", linear)
    assert (p.context.target, p.context.draft) == (131072, 4096)
    assert p.context.verdict == ContextVerdict.STARTUP_FAILS


def test_an_override_reaches_an_mtp_draft_and_the_memory_shape() -> None:
    dsv3 = load_config("deepseek-v3")
    short = plan(
        "--speculative-algorithm",
        "NEXTN",
        "--json-model-override-args",
        '{"max_position_embeddings": 4096}',
        target=dsv3,
        draft=None,
    )
    assert short.context.effective == 4096
    qwen = load_config("qwen3-8b")
    full = plan(target=qwen, draft=None)
    fewer = plan("--json-model-override-args", '{"num_hidden_layers": 8}', target=qwen, draft=None)
    assert fewer.mem.kv_pool_tokens_without_draft > full.mem.kv_pool_tokens_without_draft


@pytest.mark.parametrize(
    ("value", "exception"),
    [("{bad", "JSONDecodeError"), ("[1]", "AttributeError"), ('"x"', "AttributeError")],
)
def test_an_override_sglang_cannot_apply_is_its_startup_error(value: str, exception: str) -> None:
    r = resolve(*EAGLE3, "--json-model-override-args", value, target=LLAMA, draft=SHORT_DRAFT)
    assert [e.exception for e in r.errors] == [exception]
    assert r.errors[0].fields == ("json_model_override_args",)
    planned = plan(*EAGLE3, "--json-model-override-args", value)
    assert [e.exception for e in planned.resolution.errors] == [exception]
    launch = launch_from_argv(
        ["--model-path", "m", *EAGLE3, "--json-model-override-args", value],
        {},
        Configs(LLAMA, SHORT_DRAFT),
        lookup_gpu("H100"),
    )
    assert launch.failure() == ("resolution", f"{exception}: {r.errors[0].message}")


def test_the_launch_model_sees_the_override_on_the_draft() -> None:
    """The operator, the webhook and the engine preflight plan argv through the launch model."""
    argv = ["--model-path", "m", *EAGLE3, "--max-running-requests", "8"]
    configs, h100 = Configs(LLAMA, SHORT_DRAFT), lookup_gpu("H100")
    refused = launch_from_argv(argv, {}, configs, h100).failure()
    assert refused is not None and refused[0] == "context"
    fixed = launch_from_argv([*argv, "--json-model-override-args", LLAMA_OWN], {}, configs, h100)
    assert fixed.failure() is None
    assert fixed.plan is not None and fixed.plan.context.draft == 131072


def test_falsy_json_overrides_nothing() -> None:
    for value in ("null", "[]", "{}"):
        assert plan(*EAGLE3, "--json-model-override-args", value).context.draft == 2048


def _models(tmp_path: Path, **configs: dict[str, Any]) -> Path:
    for name, config in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    return tmp_path


def _lint(tmp_path: Path, models: Path, line: str, gpu: str | None = None) -> list[str]:
    script = tmp_path / "launch.sh"
    script.write_text(f"#!/bin/bash\npython -m sglang.launch_server {line}\n")
    found, _ = lint([script], Options(model_dirs=[models], gpu=gpu))
    return [f"{d.code}: {d.message}" for d in found]


def test_lint_sees_the_override_on_the_draft(tmp_path: Path) -> None:
    models = _models(tmp_path, llama=LLAMA, short=SHORT_DRAFT)
    base = (
        "--model-path llama --speculative-draft-model-path short --enable-metrics "
        "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4 --max-running-requests 16"
    )
    before = _lint(tmp_path, models, base)
    assert any(d.startswith("SPEC002") for d in before) and any(
        d.startswith("SPEC014") for d in before
    )
    after = _lint(tmp_path, models, f"{base} --json-model-override-args '{LLAMA_OWN}'")
    assert not any(d.startswith(("SPEC002", "SPEC014")) for d in after), after


# ----------------------------------------------------------------------------- default cap

SHAPE = (
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
)


def test_deepseek_v4s_model_hook_sets_256_so_the_speculative_reset_never_fires() -> None:
    dsv4 = hook_config("deepseek-v4")
    off = resolve(target=dsv4)
    assert off.get("max_running_requests") == 256 and not off.errors
    on = resolve("--speculative-algorithm", "EAGLE", *SHAPE, target=dsv4)
    cap = on.values["max_running_requests"]
    assert (cap.value, cap.source) == (256, "forced") and "DeepseekV4ForCausalLM" in cap.reason
    assert (
        resolve(
            "--speculative-algorithm", "EAGLE", *SHAPE, "--max-running-requests", "16", target=dsv4
        ).get("max_running_requests")
        == 16
    )
    # The hook checks the flag as given, before the alias and the auto-chosen topk.
    for argv in (("NEXTN", *SHAPE), ("eagle", *SHAPE), ("EAGLE3", *SHAPE), ("EAGLE",)):
        refused = resolve("--speculative-algorithm", *argv, target=dsv4)
        assert [e.exception for e in refused.errors] == ["AssertionError"], argv


def test_uno_never_resets_and_frozen_kv_mtp_does() -> None:
    qwen = load_config("qwen3-8b")
    uno = resolve(
        "--speculative-algorithm",
        "UNO",
        "--uno-lora-path",
        "/l",
        "--speculative-num-draft-tokens",
        "4",
        "--attention-backend",
        "fa3",
        target=qwen,
    )
    assert not uno.errors and uno.get("max_running_requests") is None
    assert (uno.get("speculative_num_steps"), uno.get("speculative_eagle_topk")) == (1, 1)
    frozen = resolve(
        "--speculative-algorithm",
        "NEXTN",
        target=hook_config("gemma-4"),
        draft=hook_config("gemma-4-assistant"),
    )
    assert frozen.algorithm == "FROZEN_KV_MTP" and frozen.get("max_running_requests") == 48


def test_spec001_and_plan_say_the_real_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsv4 = hook_config("deepseek-v4")
    models = _models(tmp_path, dsv4=dsv4, qwen=load_config("qwen3-8b"))
    found = _lint(
        tmp_path,
        models,
        "--model-path dsv4 --enable-metrics --speculative-algorithm EAGLE " + " ".join(SHAPE),
    )
    spec001 = [d for d in found if d.startswith("SPEC001")]
    assert spec001 == [
        "SPEC001: EAGLE with --max-running-requests unset: SGLang sets it to 256 "
        "(Setting max_running_requests to 256 for DeepseekV4ForCausalLM.)"
    ]
    qwen = _lint(
        tmp_path,
        models,
        "--model-path qwen --enable-metrics --speculative-algorithm "
        "EAGLE3 --speculative-draft-model-path qwen",
    )
    assert "SPEC001: EAGLE3 with --max-running-requests unset: SGLang resets it to 48" in qwen
    p = make_plan(
        PlanInputs(
            values("--speculative-algorithm", "EAGLE", *SHAPE),
            dsv4,
            None,
            lookup_gpu("B200"),
            concurrency=[1],
        )
    )
    assert any("SGLang sets it to 256" in note for note in p.notes), p.notes
    assert p.sglang_default_mrr <= 256 and p.resolution.get("max_running_requests") == 256
    code = main(
        [
            "plan",
            "--model",
            str(models / "dsv4"),
            "--gpu",
            "B200",
            "--gpus",
            "8",
            "--algorithm",
            "EAGLE",
            "--steps",
            "3",
            "--topk",
            "1",
            "--draft-tokens",
            "4",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "SGLang sets it to 256" in out, out


def test_plan_cli_applies_the_override_to_the_draft(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = _models(tmp_path, llama=LLAMA, short=SHORT_DRAFT)
    argv = [
        "plan",
        "--model",
        str(models / "llama"),
        "--draft",
        str(models / "short"),
        "--gpu",
        "H100",
        "--format",
        "json",
    ]
    main(argv)
    refused = json.loads(capsys.readouterr().out)
    main([*argv, "--json-model-override-args", '{"max_position_embeddings": 131072}'])
    starts = json.loads(capsys.readouterr().out)
    assert refused["context"]["verdict"] == "startup_fails", refused["context"]
    assert starts["context"]["verdict"] == "compatible", starts["context"]


# ----------------------------------------------------------------------------- config files


def test_lint_and_plan_read_the_draft_config_file_the_launch_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = _models(tmp_path, llama=LLAMA, short=SHORT_DRAFT)
    (models / "short" / "decrypted.json").write_text(
        json.dumps({**SHORT_DRAFT, "max_position_embeddings": 131072})
    )
    base = (
        "--model-path llama --speculative-draft-model-path short --enable-metrics "
        "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4 --max-running-requests 16"
    )
    assert any(d.startswith("SPEC002") for d in _lint(tmp_path, models, base))
    named = _lint(tmp_path, models, f"{base} --decrypted-draft-config-file decrypted.json")
    assert not any(d.startswith("SPEC002") for d in named), named
    # The target's file is looked for in the target's directory only (llama has none).
    target_only = _lint(tmp_path, models, f"{base} --decrypted-config-file decrypted.json")
    info = [d for d in target_only if d.startswith("INFO001")]
    assert len(info) == 1 and "'decrypted.json'" in info[0] and "llama" in info[0], target_only
    argv = [
        "plan",
        "--model",
        str(models / "llama"),
        "--draft",
        str(models / "short"),
        "--gpu",
        "H100",
        "--format",
        "json",
    ]
    main([*argv, "--decrypted-draft-config-file", "decrypted.json"])
    starts = json.loads(capsys.readouterr().out)
    assert starts["context"]["verdict"] == "compatible", starts["context"]
    # An absolute path stands for itself, as transformers joins it.
    main([*argv, "--decrypted-draft-config-file", str(models / "short" / "decrypted.json")])
    assert json.loads(capsys.readouterr().out)["context"]["verdict"] == "compatible"


def test_a_config_file_that_is_not_there_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = _models(tmp_path, llama=LLAMA, short=SHORT_DRAFT)
    code = main(
        [
            "plan",
            "--model",
            str(models / "llama"),
            "--draft",
            str(models / "short"),
            "--gpu",
            "H100",
            "--decrypted-draft-config-file",
            "missing.json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 2 and "'missing.json'" in captured.err and "Traceback" not in captured.err
