"""The launch finder (issue 41): each container form is read by its own syntax, every launch is
reported at its line in the file the user opened and names the form it was read from, and a
file with no launch gets one INFO006 saying which form it was (never "invalid YAML" for a file
that is not YAML, never a silent pass)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specserver_advisor.cli.main import main

BAD = "--cuda-graph-max-bs 8"  # SGLang 0.5.23's parser refuses it (ambiguous prefix)
LAUNCH = f"python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B {BAD} --host 0.0.0.0"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))


def lint(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> list[dict[str, object]]:
    main(["lint", "--format", "json", *extra, str(path)])
    found: list[dict[str, object]] = json.loads(capsys.readouterr().out or "[]")
    return found


def codes(found: list[dict[str, object]]) -> list[tuple[str, object]]:
    return [(str(d["code"]), d["line"]) for d in found]


def only(found: list[dict[str, object]], code: str) -> dict[str, object]:
    (hit,) = [d for d in found if d["code"] == code]
    return hit


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def notebook(cells: list[tuple[str, list[str]]]) -> str:
    doc = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": source}
            | ({"outputs": [], "execution_count": None} if kind == "code" else {})
            for kind, source in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(doc, indent=1)


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_notebook_helper_string_and_bang_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = notebook(
        [
            ("markdown", ["# Launch\n"]),
            (
                "code",
                [
                    "from sglang.utils import launch_server_cmd\n",
                    "server_process, port = launch_server_cmd(\n",
                    '    """\n',
                    "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B \\\n",
                    f" {BAD} --host 0.0.0.0\n",
                    '"""\n',
                    ")",
                ],
            ),
            ("code", [f"!{LAUNCH}\n"]),
        ]
    )
    path = write(tmp_path, "serve.ipynb", text)
    found = [d for d in lint(capsys, path) if d["code"] == "SPEC015"]
    assert [d["line"] for d in found] == [line_of(text, f'" {BAD}'), line_of(text, '"!python3')]
    assert "notebook cell 2" in str(found[0]["message"])
    assert "notebook cell 3" in str(found[1]["message"])
    # the column is the flag's in the file: after the JSON string's quote and the space
    row = text.splitlines()[found[0]["line"] - 1]  # type: ignore[operator]
    assert row[int(found[0]["column"]) - 1 :].startswith(BAD)  # type: ignore[call-overload]


def test_notebook_engine_keywords_become_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = notebook(
        [
            (
                "code",
                [
                    "import sglang as sgl\n",
                    'llm = sgl.Engine(model_path="Qwen/Qwen3-8B",\n',
                    '                 speculative_algorithm="EAGLE", max_running_requests=16)',
                ],
            )
        ]
    )
    path = write(tmp_path, "engine.ipynb", text)
    hit = only(lint(capsys, path), "SPEC007")  # EAGLE without a draft on Qwen3-8B
    assert hit["line"] == line_of(text, "speculative_algorithm")
    assert "notebook cell 1, Engine(...) call" in str(hit["message"])


def test_markdown_fence_is_read_not_parsed_as_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = f"# Serve\n\nRun: \n\n```bash\n{LAUNCH}\n```\n\nkey: value\n"
    path = write(tmp_path, "README.md", text)
    found = lint(capsys, path)
    assert codes(found) == [("SPEC015", 6)]
    assert "README.md fence at line 5" in str(found[0]["message"])
    assert "INPUT001" not in json.dumps(found)


def test_markdown_inline_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "notes.md", f"Intro\n\nI ran `{LAUNCH}` and it failed.\n")
    found = lint(capsys, path)
    assert codes(found) == [("SPEC015", 3)]
    assert "notes.md inline code at line 3" in str(found[0]["message"])


def test_markdown_elided_arguments_are_not_unknown_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "doc.md", "Start `python -m sglang.launch_server ...` first.\n")
    assert codes(lint(capsys, path)) == [("INFO004", 1)]


def test_python_argv_list_and_command_string(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "import subprocess, sys\n"
        "cmd = [\n"
        '    sys.executable, "-m", "sglang.launch_server",\n'
        '    "--model-path", "Qwen/Qwen3-8B",\n'
        '    "--cuda-graph-max-bs", "8",\n'
        "]\n"
        f'os.system("{LAUNCH} &")\n'
    )
    path = write(tmp_path, "run.py", text)
    found = [d for d in lint(capsys, path) if d["code"] == "SPEC015"]
    assert [d["line"] for d in found] == [5, 7]
    assert "Python list at line 2" in str(found[0]["message"])
    assert "Python string at line 7" in str(found[1]["message"])


def test_python_that_does_not_parse_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "broken.py", "import sglang\ndef f(:\n")
    hit = only(lint(capsys, path), "INFO006")
    assert "Python source" in str(hit["message"]) and "does not parse" in str(hit["message"])


def test_dockerfile_exec_entrypoint_and_cmd_make_one_argv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "FROM lmsysorg/sglang:v0.5.23-cu129\n"
        'ENTRYPOINT ["python3", "-m", "sglang.launch_server"]\n'
        'CMD ["--model-path", "Qwen/Qwen3-8B", "--host", "0.0.0.0", \\\n'
        '     "--cuda-graph-max-bs", "8"]\n'
    )
    path = write(tmp_path, "Dockerfile", text)
    hit = only(lint(capsys, path), "SPEC015")
    assert hit["line"] == 4 and "Dockerfile exec form" in str(hit["message"])


def test_dockerfile_shell_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        "FROM x\nENV PORT=30000\nCMD python3 -m sglang.launch_server \\\n"
        f"  --model-path Qwen/Qwen3-8B {BAD} --host 0.0.0.0 --port $PORT\n"
    )
    path = write(tmp_path, "Dockerfile.serve", text)
    hit = only(lint(capsys, path), "SPEC015")
    assert hit["line"] == 4 and "Dockerfile CMD at line 3" in str(hit["message"])


def test_makefile_recipe_with_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        "MODEL ?= Qwen/Qwen3-8B\nBS = 8\n\nserve:\n"
        "\t@python3 -m sglang.launch_server --model-path $(MODEL) \\\n"
        "\t  --cuda-graph-max-bs $(BS) --host 0.0.0.0\n"
    )
    path = write(tmp_path, "Makefile", text)
    hit = only(lint(capsys, path), "SPEC015")
    assert hit["line"] == 6 and "Makefile recipe at line 5" in str(hit["message"])


COOKBOOK_GENERATED = """company: Qwen
families:
- name: Qwen3
  models:
  - name: Qwen3-8B
    model_path: Qwen/Qwen3-8B
    hardware:
      H200:
        configurations:
        - name: latency
          engine:
            env_vars: {}
            tp: 1
            extra_args:
            - --speculative-algorithm EAGLE
            - --max-running-requests 16
        - name: throughput
          engine:
            env_vars: {}
            tp: 1
            extra_args:
            - --speculative-algorithm EAGLE3
            - --speculative-draft-model-path Tengyunw/qwen3_8b_eagle3
            - --max-running-requests 16
            - --enable-metrics
"""


def test_cookbook_generated_eagle_without_draft_fires_and_neighbour_is_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "qwen.yaml", COOKBOOK_GENERATED)
    found = [d for d in lint(capsys, path) if d["severity"] == "error"]
    assert codes(found) == [("SPEC007", 15)]
    assert "cookbook configuration Qwen3-8B H200/latency" in str(found[0]["message"])


def test_cookbook_source_form_crosses_configurations_with_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "company: Qwen\n"
        "defaults:\n"
        "  hardware: [H100, H200]\n"
        "  configurations:\n"
        "    - name: default\n"
        "      tp: 1\n"
        "      extra_args: ['--cuda-graph-max-bs 8']\n"
        "families:\n"
        "  - name: Qwen3\n"
        "    models:\n"
        "      - Qwen3-8B\n"
    )
    path = write(tmp_path, "src.yaml", text)
    found = [d for d in lint(capsys, path) if d["code"] == "SPEC015"]
    assert [d["line"] for d in found] == [7, 7]
    assert {str(d["message"]).rsplit("(in ", 1)[1] for d in found} == {
        "cookbook configuration Qwen3-8B H100/default)",
        "cookbook configuration Qwen3-8B H200/default)",
    }


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        (  # SkyPilot task
            "sky.yaml",
            f"resources:\n  accelerators: H100:1\nrun: |\n  {LAUNCH}\n",
            4,
        ),
        (  # GitHub Actions step
            "ci.yml",
            f"jobs:\n  smoke:\n    steps:\n      - name: serve\n        run: {LAUNCH} &\n",
            5,
        ),
        (  # Helm values: a container-like map under any key
            "values.yaml",
            "engine:\n  command: [python3, -m, sglang.launch_server]\n  args:\n"
            "    - --model-path\n    - Qwen/Qwen3-8B\n    - --cuda-graph-max-bs\n    - '8'\n",
            6,
        ),
        (  # a JSON argv list under any key (Ray Serve)
            "ray.json",
            '{"apps": [{"argv": [\n "python3", "-m", "sglang.launch_server",\n'
            ' "--model-path", "Qwen/Qwen3-8B",\n "--cuda-graph-max-bs", "8"]}]}\n',
            4,
        ),
    ],
)
def test_any_yaml_or_json_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, line: int
) -> None:
    found = [d for d in lint(capsys, write(tmp_path, name, text)) if d["code"] == "SPEC015"]
    assert [d["line"] for d in found] == [line]


@pytest.mark.parametrize(
    ("name", "text", "form"),
    [
        ("empty.md", "# Nothing to see\n", "Markdown"),
        ("install.md", "pip install sglang\n", "Markdown: SGLang is named (first at line 1)"),
        ("nb.ipynb", notebook([("code", ["print(1)"])]), "none of its 1 code cells"),
        ("util.py", "import sglang\nprint(sglang.__version__)\n", "Python source"),
        ("Dockerfile", "FROM lmsysorg/sglang:latest\n", "Dockerfile"),
        ("bad.ipynb", "{not json", "not valid JSON"),
    ],
)
def test_a_file_without_a_launch_gets_one_info006(
    tmp_path: Path, capsys, name: str, text: str, form: str
) -> None:  # type: ignore[no-untyped-def]
    found = lint(capsys, write(tmp_path, name, text))
    assert codes(found) == [("INFO006", 1)]
    assert form in str(found[0]["message"])


COMPOSE = """services:
  sglang:
    image: lmsysorg/sglang:v0.5.23-cu129
    command: python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 2 --host 0.0.0.0
    shm_size: 32g
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: [{ids}]
              capabilities: [gpu]
"""


def test_compose_gpu_count_from_a_default_is_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``"${GPU_IDS:-0,1}"`` is two GPUs (was read as one: POD001's false positive); POD008
    says the count rests on the default; a literal neighbour is quiet, a short default is not."""
    found = lint(capsys, write(tmp_path, "a.yaml", COMPOSE.format(ids='"${GPU_IDS:-0,1}"')))
    assert codes(found) == [("POD008", 6)]
    assert "(2)" in str(found[0]["message"]) and "${GPU_IDS}" in str(found[0]["message"])
    assert lint(capsys, write(tmp_path, "b.yaml", COMPOSE.format(ids='"0", "1"'))) == []
    found = lint(capsys, write(tmp_path, "c.yaml", COMPOSE.format(ids='"${GPU_IDS:-0}"')))
    assert sorted(codes(found)) == [("POD001", 4), ("POD008", 6)]


def test_kubernetes_gpu_limit_from_an_envsubst_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: s}\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: s\n"
        "          image: lmsysorg/sglang:v0.5.23\n"
        "          command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-8B,\n"
        "                    --tp-size, '2', --host, 0.0.0.0]\n"
        "          resources: {limits: {nvidia.com/gpu: '${GPUS:-2}'}}\n"
    )
    found = lint(capsys, write(tmp_path, "d.yaml", text))
    assert [c for c, _ in codes(found) if c in ("POD001", "POD008")] == ["POD008"]
