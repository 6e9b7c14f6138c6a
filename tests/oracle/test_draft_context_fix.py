"""SGLang 0.5.23 itself on ``spec.speculative.draftContextFromTarget``'s rendered override.

The operator renders the target's own ``rope_scaling`` and ``max_position_embeddings`` as
``--json-model-override-args``. Here SGLang's ``ModelConfig.from_server_args`` (the oracle env;
skipped with the reason when it is missing) reads the launch as rendered: for the target the
override changes nothing SGLang derives (context, positions, rope parameters), and the
2,048-position EAGLE-3 draft SGLang refused without it now loads at the target's context with the
target's rope scaling, which is what the advisor's plan says.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oracle import WORKER, load_oracleenv, missing
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.launch.model import Configs, launch_from_argv
from specserver_advisor.sglang import draftcontext
from stack import load_config

#: Runs in the oracle env: each launch's target and draft ModelConfig as SGLang builds them.
PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import sglang_worker as w
from sglang.srt import runtime_context as rc
from sglang.srt.configs.model_config import ModelConfig

def view(cfg):
    hf = cfg.hf_config
    rope = getattr(hf, "rope_parameters", None) or getattr(hf, "rope_scaling", None)
    return {"context_len": int(cfg.context_len),
            "max_position_embeddings": getattr(hf, "max_position_embeddings", None),
            "rope": {k: v for k, v in dict(rope or {}).items()}}

out = []
for argv in json.loads(sys.stdin.read()):
    facts = w._install_gpu(81559.0, (9, 0))
    with rc.override_platform(**facts):
        args = w.prepare_server_args(argv)
        args.resolve_once()
        target = ModelConfig.from_server_args(args)
        answer = {"target": view(target), "draft": None, "draft_error": None}
        try:
            d = ModelConfig.from_server_args(args, model_path=argv[argv.index(
                "--speculative-draft-model-path") + 1], is_draft_model=True,
                context_length=target.context_len)
            answer["draft"] = view(d)
        except ValueError as exc:
            answer["draft_error"] = str(exc)
        out.append(answer)
print("RESULT " + json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def sglang_views(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    why = missing()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("models")
    for name in ("llama-3.1-8b", "eagle3-2048-positions"):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(load_config(name)))
    done = subprocess.run(
        [str(load_oracleenv().PYTHON), "-c", PROBE, str(WORKER.parent)],
        input=json.dumps([argv(root, None), argv(root, OVERRIDE)]),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    views: list[dict[str, Any]] = json.loads(line.removeprefix("RESULT "))
    return views


OVERRIDE = draftcontext.override_json(load_config("llama-3.1-8b"))


def argv(root: Path, override: str | None) -> list[str]:
    out = [
        "--model-path",
        str(root / "llama-3.1-8b"),
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(root / "eagle3-2048-positions"),
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--max-running-requests",
        "16",
    ]
    return out + (["--json-model-override-args", override] if override else [])


def test_the_override_is_a_no_op_for_the_target(sglang_views: list[dict[str, Any]]) -> None:
    plain, fixed = sglang_views
    assert fixed["target"] == plain["target"]
    assert plain["target"]["context_len"] == 131072
    assert plain["target"]["rope"]["rope_type"] == "llama3"


def test_the_draft_gets_the_targets_context_and_rope(sglang_views: list[dict[str, Any]]) -> None:
    plain, fixed = sglang_views
    assert plain["draft"] is None and "2048" in plain["draft_error"]
    assert fixed["draft_error"] is None
    assert fixed["draft"]["context_len"] == 131072
    assert fixed["draft"]["max_position_embeddings"] == 131072
    target_rope = load_config("llama-3.1-8b")["rope_scaling"]
    assert {k: fixed["draft"]["rope"][k] for k in target_rope} == target_rope


def test_the_advisor_plans_both_launches_as_sglang_reads_them(
    sglang_views: list[dict[str, Any]], tmp_path: Path
) -> None:
    configs = Configs(load_config("llama-3.1-8b"), load_config("eagle3-2048-positions"))
    gpu = lookup_gpu("H100")
    plain = launch_from_argv(argv(tmp_path, None), {}, configs, gpu)
    fixed = launch_from_argv(argv(tmp_path, OVERRIDE), {}, configs, gpu)
    assert plain.failure() is not None and plain.failure()[0] == "context"  # type: ignore[index]
    assert fixed.failure() is None
    assert (
        fixed.plan is not None
        and fixed.plan.context.draft == sglang_views[1]["draft"]["context_len"]
    )
