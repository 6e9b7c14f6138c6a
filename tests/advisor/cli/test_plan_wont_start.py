"""``plan`` on a launch that will not start: the verdict, the fix, the plan at the fix, no ``inf``.

One case per way the advisor knows a launch fails to start: a draft whose context is shorter
than the target's, no KV cache under the given fraction (a plain launch and a SpecServer), a KV
pool too small for one request, weights that do not fit the card, the tokenizer's TypeError,
a resolution error SGLang raises (a speculative one, deterministic inference on ROCm without
its custom all-reduce, and deterministic inference on an attention backend it refuses), and
EAGLE3 without a draft on a target with no MTP layers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from specserver_advisor.cli.main import main
from stack import load_config

QWEN = ["--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3", "--gpu", "L4"]
NOT_FINITE = re.compile(r"\b(inf|nan|infinity)\b", re.IGNORECASE)

SPECSERVER = """\
apiVersion: specserver.io/v1alpha1
kind: SpecServer
metadata: {name: small-fraction}
spec:
  model: {path: Qwen/Qwen3-8B}
  draft: {path: Tengyunw/qwen3_8b_eagle3}
  speculative: {algorithm: EAGLE3, numSteps: 3, eagleTopk: 1, numDraftTokens: 4}
  mode: Auto
  engine: {memFractionStatic: 0.5}
  resources: {gpus: 1, gpuType: L4}
"""


def short_context_draft(root: Path) -> list[str]:
    for name, config in (("llama", "llama-3.1-8b"), ("draft", "eagle3-2048-positions")):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(load_config(config)))
    return ["--model", str(root / "llama"), "--draft", str(root / "draft"), "--gpu", "H100"]


def specserver_file(root: Path) -> list[str]:
    path = root / "specserver.yaml"
    path.write_text(SPECSERVER)
    return ["--from", str(path)]


def specserver_short_context(root: Path) -> list[str]:
    model, _, draft, _, _ = short_context_draft(root)[1:]
    path = root / "short.yaml"
    path.write_text(
        SPECSERVER.replace("Qwen/Qwen3-8B", model)
        .replace("Tengyunw/qwen3_8b_eagle3", draft)
        .replace("memFractionStatic: 0.5", "contextLength: 8192")
        .replace("gpuType: L4", "gpuType: H100")
    )
    return ["--from", str(path)]


def rocm_deterministic_nccl(root: Path) -> list[str]:
    script = root / "run.sh"
    script.write_text(
        "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 4 "
        "--enable-deterministic-inference --disable-custom-all-reduce\n"
    )
    return ["--from", str(script), "--gpu", "MI300X"]


#: Deterministic inference on a backend it refuses (``_deterministic_attention_backend``).
DETERMINISTIC_TRTLLM = ["--enable-deterministic-inference", "--attention-backend", "trtllm_mha"]

#: (case, argv builder, the flags of the fix; None: no flag value is known to fix it)
CASES: list[tuple[str, Any, list[str] | None]] = [
    ("short-context draft", short_context_draft, ["--context-length", "2048"]),
    ("SpecServer, short-context draft", specserver_short_context, ["--context-length", "2048"]),
    ("no KV cache", lambda _: [*QWEN, "--mem-fraction-static", "0.5"], ["--mem-fraction-static"]),
    ("SpecServer, no KV cache", specserver_file, ["--mem-fraction-static"]),
    (
        "KV pool too small for one request",
        lambda _: [*QWEN, "--mem-fraction-static", "0.8", "--input-len", "20000"],
        None,
    ),
    ("weights do not fit", lambda _: ["--model", "deepseek-ai/DeepSeek-V3", "--gpu", "L4"], None),
    ("tokenizer TypeError", lambda _: [*QWEN, "--steps", "3", "--topk", "2"], None),
    (
        "SGLang raises",
        lambda _: [
            *QWEN,
            "--steps",
            "3",
            "--topk",
            "2",
            "--draft-tokens",
            "4",
            "--attention-backend",
            "trtllm_mha",
        ],
        None,
    ),
    ("SGLang raises on ROCm", rocm_deterministic_nccl, None),
    ("deterministic backend", lambda _: [*QWEN, "--gpu", "H100", *DETERMINISTIC_TRTLLM], None),
    (
        "no draft",
        lambda _: ["--model", "Qwen/Qwen3-8B", "--algorithm", "EAGLE3", "--gpu", "L4"],
        None,
    ),
]


def strict_json(text: str) -> dict[str, Any]:
    def refuse(name: str) -> None:
        raise AssertionError(f"JSON holds {name}")

    data: dict[str, Any] = json.loads(text, parse_constant=refuse)
    return data


@pytest.mark.parametrize(("case", "argv", "fix"), CASES, ids=[c[0] for c in CASES])
def test_a_launch_that_will_not_start_shows_no_inf_and_the_plan_at_the_fix(
    case: str,
    argv: Any,
    fix: list[str] | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["plan", *argv(tmp_path), "--concurrency", "1,8,64"]
    assert main(args) == 1
    text = capsys.readouterr().out
    assert text.startswith("won't start: ")
    assert not NOT_FINITE.search(text), text
    assert main([*args, "--format", "json"]) == 1
    data = strict_json(capsys.readouterr().out)
    assert data["verdict"]["starts"] is False
    assert data.get("curves", []) == [] and data.get("crossover_concurrency") is None
    if fix is None:
        assert data.get("at_fix") is None
        assert "concurrency |" not in text  # no table for a launch that does not start
        return
    label = f"# plan at the fix ({' '.join(fix)}"
    assert label in text, text
    before, after = text.split(label)
    assert "concurrency |" not in before and "concurrency |" in after
    assert "at the fix: starts" in after
    at_fix = data["at_fix"]
    assert at_fix["changes"][: len(fix)] == fix
    assert at_fix["verdict"]["starts"] is True
    assert at_fix["curves"] and all(
        pt["on"]["output_tok_s"] > 0 and pt["off"]["output_tok_s"] > 0 for pt in at_fix["curves"]
    )


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_flag_is_echoed_as_text_and_the_json_stays_valid(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", *QWEN, f"--mem-fraction-static={value}", "--format", "json"]) == 1
    data = strict_json(capsys.readouterr().out)
    assert data["resolved"]["mem_fraction_static"] == value
    given, fixed = data["argv"], data["at_fix"]["argv"]
    assert given[given.index("--mem-fraction-static") + 1] == value  # as given
    assert fixed[fixed.index("--mem-fraction-static") + 1] == "0.9"
    assert fixed.count("--mem-fraction-static") == 1
    assert data["at_fix"]["verdict"]["starts"] is True


def test_the_fix_replaces_a_flag_written_with_equals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm "
        "EAGLE3 --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 "
        "--mem-fraction-static=0.5\n"
    )
    assert main(["plan", "--from", str(script), "--gpu", "L4", "--format", "json"]) == 1
    fixed = strict_json(capsys.readouterr().out)["at_fix"]["argv"]
    assert "--mem-fraction-static=0.9" in fixed
    assert not [t for t in fixed if t.startswith("--mem-fraction-static") and t.endswith("0.5")]


@pytest.mark.parametrize(
    ("argv", "backend"),
    [
        ([*QWEN[:4], "--gpu", "H100", "--attention-backend", "trtllm_mha"], "trtllm_mha"),
        (["--model", "deepseek-ai/DeepSeek-V3", "--gpu", "B200", "--tp", "8"], "trtllm_mla"),
    ],
    ids=["a backend it refuses", "DeepSeek-V3's sm100 fill"],
)
def test_deterministic_inference_refuses_the_attention_backend_in_sglangs_words(
    argv: list[str], backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``_deterministic_attention_backend``: a backend outside its list is a ValueError, and
    DeepSeek-V3 on a B200 reaches it with the trtllm_mla a model hook fills in first; with a
    backend on its list the same launch starts."""
    assert main(["plan", *argv, "--enable-deterministic-inference"]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("won't start: SGLang raises ValueError: Currently only [")
    assert f"but you explicitly specified '{backend}'" in first
    fine = [a if a not in (backend,) else "fa3" for a in argv]
    if backend == "trtllm_mla":
        fine += ["--attention-backend", "triton"]
    assert main(["plan", *fine, "--enable-deterministic-inference"]) == 0
    assert capsys.readouterr().out.startswith("starts")
