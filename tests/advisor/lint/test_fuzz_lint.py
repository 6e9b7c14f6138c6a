"""Fuzzing ``specserver-advisor lint`` (issue 31): mutated corpus files, binary bytes, deep
nesting, YAML anchors and tags, pathological shell and broken model configs, each linted
in-process under a time and a memory bound (``fuzzcli``): exit 0, 1 or 2 and never a
traceback. The ``@example`` cases are the measured failures, kept as named regressions.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from fuzzcli import FUZZ, advisor
from fuzzinputs import (
    LAUNCH,
    NESTING_KINDS,
    SUFFIXES,
    Payload,
    broken_model_config,
    laughs,
    mutated_corpus,
    nested,
    pathological_shell,
)
from hypothesis import example, given
from hypothesis import strategies as st


def lint_file(suffix: str, data: bytes, *extra: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"input{suffix}"
        path.write_bytes(data)
        advisor(["lint", "--format", "json", *extra, str(path)]).check()


@FUZZ
@given(mutated_corpus())
def test_mutated_corpus_files(case: Payload) -> None:
    lint_file(case.suffix, case.data)


@FUZZ
@given(st.sampled_from(SUFFIXES), st.binary(max_size=4096))
@example(".sh", b"\xff\xfe" + LAUNCH.encode())
@example(".yaml", b"args: [\x00]")
def test_binary_bytes(suffix: str, data: bytes) -> None:
    lint_file(suffix, data)


@FUZZ
@given(st.sampled_from(["x.yaml", "x.sh", "-"]), st.binary(max_size=4096))
@example("x.yaml", b"kind: Pod\nmetadata: {name: \xff}\n")  # stdin that is not UTF-8
def test_binary_stdin(name: str, data: bytes) -> None:
    advisor(["lint", "--format", "json", "--stdin-filename", name, "-"], stdin=data).check()


@FUZZ
@given(st.binary(max_size=512))
@example(b"select: [\xff]\n")  # a settings file that is not UTF-8
def test_binary_settings_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings, script = Path(tmp) / ".specserver-advisor.yaml", Path(tmp) / "run.sh"
        settings.write_bytes(data)
        script.write_text(LAUNCH + "\n")
        advisor(["lint", "--config", str(settings), str(script)]).check()


@FUZZ
@given(st.sampled_from(NESTING_KINDS), st.integers(1, 100_000), st.sampled_from(SUFFIXES))
def test_deep_nesting(kind: str, depth: int, suffix: str) -> None:
    lint_file(suffix, nested(kind, depth).encode())


@FUZZ
@given(st.integers(1, 12), st.integers(1, 12), st.sampled_from([".yaml", ".yml", ""]))
@example(9, 9, ".yaml")  # "billion laughs": 9**9 items from 400 bytes
def test_yaml_anchors(levels: int, width: int, suffix: str) -> None:
    pod = f"kind: Pod\nspec:\n  containers:\n    - name: e\n      args: *a{levels}\n"
    lint_file(suffix, (laughs(levels, width) + pod).encode())


@FUZZ
@given(
    st.sampled_from(["!!int", "!!str", "!!float", "!!binary", "!!python/name:os.system", "!x"]),
    st.sampled_from(["yes", "[a]", "{a: 1}", "''", "0x1F", ".nan"]),
    st.sampled_from(["kind", "metadata", "spec", "args", "replicas"]),
)
def test_yaml_tags(tag: str, value: str, key: str) -> None:
    lint_file(".yaml", f"apiVersion: v1\nkind: Pod\n{key}: {tag} {value}\n".encode())


@FUZZ
@given(pathological_shell())
def test_pathological_shell(script: Payload) -> None:
    lint_file(script.suffix, script.data)


@FUZZ
@given(broken_model_config())
def test_broken_model_configs(config: Payload) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "llama").mkdir()
        (Path(tmp) / "llama" / "config.json").write_bytes(config.data)
        script = Path(tmp) / "run.sh"
        script.write_text(LAUNCH.replace("Qwen/Qwen3-8B", "llama") + " --tp 1\n")
        advisor(["lint", "--model-dir", tmp, "--gpu", "L4", str(script)]).check()
