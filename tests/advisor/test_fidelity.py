"""Fidelity: the advisor's SGLang facts match the pinned 0.5.23 wheel, read with ``ast``.

The wheel is fetched once with ``pip download --no-deps`` into the cache directory
(``$SPECSERVER_CACHE/wheels``, default ``~/.cache/specserver/wheels``); it is never imported or
run. Skipped, with the reason, only when the package index cannot be reached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from specserver_advisor.sglang import context, flags, resolve, wheelsource

pytestmark = pytest.mark.network

CACHE = Path(os.environ.get("SPECSERVER_CACHE") or Path.home() / ".cache" / "specserver")
HOOK = "sglang/srt/arg_groups/speculative_hook.py"


@pytest.fixture(scope="module")
def wheel() -> Path:
    target = CACHE / "wheels"
    found = sorted(target.glob(f"sglang-{flags.SGLANG_VERSION}-*.whl"))
    if found:
        return found[0]
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(target),
            f"sglang=={flags.SGLANG_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = sorted(target.glob(f"sglang-{flags.SGLANG_VERSION}-*.whl"))
    if done.returncode != 0 or not found:
        pytest.skip(
            f"cannot download sglang=={flags.SGLANG_VERSION} from the package index: "
            f"{done.stderr.strip().splitlines()[-1:] or 'no wheel'}"
        )
    return found[0]


def test_flag_table_matches_the_wheel(wheel: Path) -> None:
    committed = json.loads(
        resources.files("specserver_advisor.sglang").joinpath("data/flags-0.5.23.json").read_text()
    )
    assert committed["sglang"] == flags.SGLANG_VERSION
    assert committed["fields"] == wheelsource.read_fields(wheel), (
        "regenerate with: python -m specserver_advisor.sglang.wheelsource WHEEL "
        "--output advisor/specserver_advisor/sglang/data/flags-0.5.23.json"
    )


def test_speculative_defaults_the_resolver_relies_on(wheel: Path) -> None:
    fields = wheelsource.read_fields(wheel)
    assert fields["speculative_accept_threshold_single"]["default"] == 1.0
    assert fields["speculative_ngram_max_bfs_breadth"]["default"] == 10
    assert fields["host"]["default"] == "127.0.0.1"
    assert "cuda_graph_max_bs" not in fields
    assert "speculative_skip_dp_mlp_sync" not in fields
    assert fields["speculative_draft_model_path"]["aliases"] == ["--speculative-draft-model"]


def test_auto_choose_table_matches(wheel: Path) -> None:
    rows = wheelsource.read_auto_choose_table(wheel)
    expected = [(["<STANDALONE>"], resolve.AUTO_CHOOSE_STANDALONE)]
    expected += [(list(archs), shape) for archs, shape in resolve.AUTO_CHOOSE_TABLE]
    expected += [(["<default>"], resolve.AUTO_CHOOSE_DEFAULT)]
    assert rows == expected


def test_messages_and_mtp_targets_match(wheel: Path) -> None:
    tree = wheelsource.read_tree(wheel, HOOK)
    strings = wheelsource.string_constants(tree)
    assert resolve.RESET_MESSAGE in strings
    assert "trtllm_mha backend only supports topk = 1 for speculative decoding." in strings
    assert "DeepSeek MTP does not require setting speculative_draft_model_path." in strings
    lists = wheelsource.string_lists_in_function(tree, "_handle_eagle_family")
    mtp = next(lst for lst in lists if "HYV3ForCausalLM" in lst)
    assert tuple(mtp) == resolve.MTP_TARGETS
    assert tuple(next(lst for lst in lists if "fa3" in lst)) == resolve.PAGE_TREE_BACKENDS


def test_context_keys_and_dspark_gamma_match(wheel: Path) -> None:
    common = wheelsource.read_tree(wheel, "sglang/srt/utils/hf_transformers/common.py")
    assert (
        tuple(wheelsource.module_assignment(common, "CONTEXT_LENGTH_KEYS"))
        == context.CONTEXT_LENGTH_KEYS
    )
    dspark = wheelsource.read_tree(
        wheel, "sglang/srt/speculative/dspark_components/dspark_config.py"
    )
    assert (
        wheelsource.module_assignment(dspark, "DEFAULT_DSPARK_GAMMA")
        == resolve.DEFAULT_DSPARK_GAMMA
    )
