"""``plan --search-shape`` against SGLang 0.5.23: every shape it names, SGLang accepts as given.

For the Qwen3-8B EAGLE-3 launch on an L4 as given, and on an H100 under
``--attention-backend trtllm_mha`` (SGLang refuses every tree there; it refuses trtllm_mha itself
below SM90, which the advisor's resolution does not model yet), each band's best shape and the
choice are launched through SGLang's own resolution: it must accept the launch and resolve the
shape to itself (steps, topk, draft tokens, adaptive), with a reserved-token count (no
TypeError at tokenizer start).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest

import oracle
from specserver_advisor.cli.main import main
from specserver_advisor.gpus import lookup_gpu


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    yield harness.materialize(tmp_path_factory.mktemp("models"))


def shape_argv(models: dict[str, Path], shape: dict[str, Any], extra: list[str]) -> list[str]:
    out = ["--model-path", str(models["qwen3-8b"])]
    out += ["--speculative-draft-model-path", str(models["qwen3-8b-eagle3"])]
    out += ["--speculative-algorithm", "EAGLE3", "--mem-fraction-static", "0.85"]
    out += ["--speculative-num-steps", str(shape["steps"])]
    out += ["--speculative-eagle-topk", str(shape["topk"])]
    out += ["--speculative-num-draft-tokens", str(shape["draft_tokens"])]
    return out + (["--speculative-adaptive"] if shape["adaptive"] else []) + extra


@pytest.mark.parametrize(
    ("gpu", "extra"),
    [("L4", []), ("H100", ["--attention-backend", "trtllm_mha"])],
    ids=["l4", "h100-trtllm"],
)
def test_every_shape_the_search_names_is_one_sglang_accepts(
    gpu: str,
    extra: list[str],
    sglang: oracle.Oracle,
    models: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    given = ["--model", str(models["qwen3-8b"]), "--draft", str(models["qwen3-8b-eagle3"])]
    given += ["--gpu", gpu, "--steps", "3", "--topk", "1", "--draft-tokens", "4"]
    given += ["--accept-length", "2.73", "--mem-fraction-static", "0.85", *extra]
    main(["plan", *given, "--search-shape", "--format", "json"])
    data = json.loads(capsys.readouterr().out)["search"]
    named = [b["shape"] for b in data["bands"] if b["shape"]] + [data["choice"]]
    assert named and all(s is not None for s in named)
    for shape in named:
        theirs = sglang.resolve(shape_argv(models, shape, extra), lookup_gpu(gpu))
        assert theirs["outcome"] == "accepted", (shape, theirs["message"])
        fields = theirs["fields"]
        assert fields["speculative_num_steps"] == shape["steps"], (shape, fields)
        assert fields["speculative_eagle_topk"] == shape["topk"], (shape, fields)
        assert fields["speculative_num_draft_tokens"] == shape["draft_tokens"], (shape, fields)
        assert bool(fields["speculative_adaptive"]) == shape["adaptive"], (shape, fields)
        assert isinstance(fields["reserved_tokens"], int), (shape, fields)
