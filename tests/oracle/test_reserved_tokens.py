"""SPEC017 against SGLang 0.5.23: a launch whose reserved-token arithmetic raises is flagged.

SGLang's tokenizer manager computes the tokens reserved per request when it starts
(``compute_num_reserved_tokens``: ``max(topk * steps, num_draft_tokens)``); with topk > 1 and no
draft-token count SGLang's resolution leaves the count None and that raises TypeError (the named
difference ``reserved-tokens-unset-draft-tokens``). The lint rule must fire on exactly those
launches, naming the flag, and stay silent where SGLang computes a number.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import harness
import pytest

import oracle
from specserver_advisor.cli.main import main
from specserver_advisor.gpus import lookup_gpu

#: (algorithm, num_steps, eagle_topk, num_draft_tokens); None: the flag is not given.
SHAPES = [
    ("EAGLE3", 5, 4, None),
    ("EAGLE3", 3, 2, None),
    ("EAGLE", 3, 8, None),
    ("EAGLE3", 5, 4, 8),
    ("EAGLE3", 3, 1, None),
    ("EAGLE3", None, None, None),
    ("EAGLE3", 3, None, None),  # SGLang's resolution itself raises here
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    yield harness.materialize(tmp_path_factory.mktemp("models"))


def argv(
    models: dict[str, Path], shape: tuple[str, int | None, int | None, int | None]
) -> list[str]:
    algorithm, steps, topk, ndt = shape
    out = ["--model-path", str(models["qwen3-8b"])]
    out += ["--speculative-draft-model-path", str(models["qwen3-8b-eagle3"])]
    out += ["--speculative-algorithm", algorithm, "--max-running-requests", "16"]
    for flag, value in (
        ("--speculative-num-steps", steps),
        ("--speculative-eagle-topk", topk),
        ("--speculative-num-draft-tokens", ndt),
    ):
        if value is not None:
            out += [flag, str(value)]
    return [*out, "--enable-metrics"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(map(str, s)))
def test_spec017_fires_exactly_where_sglangs_reserved_tokens_raise(
    shape: tuple[str, int | None, int | None, int | None],
    sglang: oracle.Oracle,
    models: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = argv(models, shape)
    theirs = sglang.resolve(args, lookup_gpu("L4"))
    # Not accepted: SGLang fails earlier, in resolution (reported as that startup error).
    reserved = theirs["fields"].get("reserved_tokens")
    raises = isinstance(reserved, str) and reserved.startswith("<TypeError")
    script = tmp_path / "launch.sh"
    script.write_text("python -m sglang.launch_server " + shlex.join(args) + "\n")
    rc = main(["lint", "--select", "SPEC017", "--format", "json", str(script)])
    found = json.loads(capsys.readouterr().out or "[]")
    assert bool(found) == raises, (shape, reserved, found)
    assert rc == (1 if raises else 0)
    if raises:
        assert "--speculative-num-draft-tokens" in found[0]["message"]
        assert "TypeError" in found[0]["message"]
