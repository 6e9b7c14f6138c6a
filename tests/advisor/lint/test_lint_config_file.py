"""``--config FILE`` as SGLang 0.5.23 merges it (``ConfigArgumentMerger``): the file's keys
become flags as written, before the command line (which wins), wherever the file is: beside
the launch, relative to it, or a ConfigMap in the same multi-document file (issue 30)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specserver_advisor.lint.configfile import _key_kinds, config_argv
from specserver_advisor.lint.engine import Options, run
from specserver_advisor.lint.model import Diagnostic
from stack import REPO

SPEC = (
    "speculative-algorithm: EAGLE3\nspeculative-draft-model-path: Tengyunw/qwen3_8b_eagle3\n"
    "speculative-num-steps: 3\nspeculative-eagle-topk: 1\nspeculative-num-draft-tokens: 4\n"
    "enable-metrics: true\nhost: 0.0.0.0\n"
)


def lint(*paths: Path) -> list[Diagnostic]:
    return run(list(paths), Options(env={})).diagnostics


def found(diags: list[Diagnostic]) -> list[tuple[str, int, str]]:
    return [(Path(d.path).name, d.line, d.code) for d in diags]


def test_keys_become_flags_the_way_sglang_writes_them() -> None:
    argv = config_argv(
        {
            "enable-metrics": True,  # store_true: the bare flag
            "disable-radix-cache": False,  # store_true and false: nothing
            "trust_remote_code": True,  # any long spelling, dashes or underscores
            "skip-server-warmup": True,
            "json-model-override-args": {"max_position_embeddings": 65536},
            "tp": 2,
            "speculative-algorithm": "EAGLE3",
        }
    )
    assert argv.args == [
        "--enable-metrics",
        "--trust_remote_code",
        "--skip-server-warmup",
        "--json-model-override-args",
        '{"max_position_embeddings": 65536}',
        "--tp",
        "2",
        "--speculative-algorithm",
        "EAGLE3",
    ]
    # A key whose action SGLang cannot write raises before parsing (a deprecated switch).
    refused = config_argv({"disable-cuda-graph": True}).refused
    assert refused == [
        (
            "disable-cuda-graph",
            "Unsupported config option 'disable_cuda_graph' with action "
            "'DeprecatedStoreTrueAction'",
        )
    ]


def test_the_model_on_the_command_line_and_the_rest_in_the_file(tmp_path: Path) -> None:
    """The file is merged into the launch: the speculative shape it sets makes SPEC001 (the
    silent 48 reset), its bad keys SPEC015 at --config naming the key and its line."""
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "spec.yaml").write_text(SPEC + "cuda-graph-max-bs: 32\n")
    launch = tmp_path / "serve.sh"
    launch.write_text("sglang serve Qwen/Qwen3-8B --config cfg/spec.yaml --port 30000\n")
    diags = lint(launch)
    assert found(diags) == [("serve.sh", 1, "SPEC001"), ("serve.sh", 1, "SPEC015")]
    assert diags[1].message.endswith(
        f"(key 'cuda-graph-max-bs' of {tmp_path}/cfg/spec.yaml, line 8)"
    )
    assert diags[1].column == len("sglang serve Qwen/Qwen3-8B ") + 1


def test_the_command_line_wins_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC + "max-running-requests: 48\nhost: 127.0.0.1\n")
    launch = tmp_path / "serve.sh"
    launch.write_text(
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --config spec.yaml "
        "--host 0.0.0.0\n"
    )
    assert found(lint(launch)) == []  # host 0.0.0.0 from the command line: no SPEC012
    launch.write_text(
        "python3 -m sglang.launch_server --host 0.0.0.0 --model-path Qwen/Qwen3-8B "
        "--config spec.yaml\n"
    )
    assert found(lint(launch)) == []  # the command line wins wherever --config is in it


def test_a_refused_key_and_a_file_that_is_not_yaml(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(
        SPEC + "max-running-requests: 8\ndisable-cuda-graph: true\n"
    )
    launch = tmp_path / "serve.sh"
    launch.write_text("sglang serve Qwen/Qwen3-8B --config spec.yaml\n")
    (diag,) = lint(launch)
    assert diag.code == "SPEC015"
    assert diag.message.startswith("Unsupported config option 'disable_cuda_graph'")
    launch.write_text("sglang serve Qwen/Qwen3-8B --config spec.json --max-running-requests 8\n")
    (diag,) = lint(launch)
    assert (diag.code, diag.message) == ("SPEC015", "Config file must be YAML format, got: .json")


def test_a_config_file_not_found_is_said(tmp_path: Path) -> None:
    launch = tmp_path / "serve.sh"
    launch.write_text(
        "sglang serve Qwen/Qwen3-8B --config /etc/sglang/missing.yaml --max-running-requests 8"
        " --host 0.0.0.0 --enable-metrics\n"
    )
    (diag,) = lint(launch)
    assert diag.code == "INFO004"
    assert "its --config file /etc/sglang/missing.yaml was not found" in diag.message
    # What the unread file may set is unknown: no rule that reads values or absent flags runs
    # (here SPEC001 would otherwise claim the cap is unset), names still are checked.
    launch.write_text(
        "sglang serve Qwen/Qwen3-8B --speculative-algorithm EAGLE3 --config /etc/sglang/x.yaml"
        " --cuda-graph-max-bs 4\n"
    )
    assert [d.code for d in lint(launch)] == ["INFO004", "SPEC015"]


def test_a_config_in_a_configmap_of_the_same_file(tmp_path: Path) -> None:
    """A ConfigMap mounted where --config points: its key of that base name is the file."""
    body = "".join(f"    {line}\n" for line in (SPEC + "cuda-graph-max-bs: 16\n").splitlines())
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sglang-config}\ndata:\n"
        "  config.yaml: |\n" + body + "---\n"
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: s\n"
        "          image: lmsysorg/sglang:v0.5.23-cu129\n"
        "          command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-8B,\n"
        "                    --config, /etc/sglang/config.yaml, --max-running-requests, '32']\n"
        "          resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    diags = lint(manifest)
    assert found(diags) == [("deploy.yaml", 25, "SPEC015")]
    assert "(key 'cuda-graph-max-bs' of ConfigMap sglang-config key config.yaml, line 13)" in (
        diags[0].message
    )


def test_a_config_file_sglang_never_reads_or_refuses(tmp_path: Path) -> None:
    """Only the exact item ``--config`` is merged (``"--config" in argv``): ``--config=FILE``
    and ``--conf FILE`` are parsed and the file ignored; two ``--config`` are refused."""
    (tmp_path / "spec.yaml").write_text(SPEC)
    launch = tmp_path / "serve.sh"
    launch.write_text(
        "sglang serve Qwen/Qwen3-8B --config=spec.yaml --max-running-requests 8\n"
        "sglang serve Qwen/Qwen3-8B --conf spec.yaml --max-running-requests 8\n"
        "sglang serve Qwen/Qwen3-8B --config spec.yaml --config spec.yaml\n"
    )
    diags = lint(launch)
    assert found(diags) == [("serve.sh", n, "SPEC015") for n in (1, 2, 3)]
    assert diags[0].message.startswith("--config=spec.yaml: SGLang 0.5.23 merges a config file")
    assert diags[1].message.startswith("--conf: SGLang 0.5.23 merges a config file")
    assert diags[2].message == "Multiple config files specified! Only one allowed."


ORACLE_KEYS = """
import argparse, json
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)
merger = ConfigArgumentMerger(parser)
print(json.dumps({"store_true": sorted(set(merger.store_true_actions)),
                  "refused": {k: type(a).__name__ for k, a in merger.unsupported_actions.items()}}))
"""


def test_the_key_kinds_are_sglangs_own() -> None:
    """Which keys are bare switches and which SGLang refuses, from its ConfigArgumentMerger
    over its real parser (the cached 0.5.23 environment; skipped where it is not built)."""
    spec = importlib.util.spec_from_file_location("oracleenv", REPO / "scripts" / "oracleenv.py")
    assert spec is not None and spec.loader is not None
    env = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("oracleenv", env)
    spec.loader.exec_module(env)
    if not env.ready():
        pytest.skip(f"the SGLang oracle environment {env.ENV_DIR} is not built")
    out = subprocess.run(
        [str(env.ENV_DIR / "bin" / "python"), "-c", ORACLE_KEYS],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    sglang = json.loads(out.strip().splitlines()[-1])
    store_true, refused = _key_kinds()
    assert set(sglang["store_true"]) == set(store_true)
    assert sglang["refused"] == refused
