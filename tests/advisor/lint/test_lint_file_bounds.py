"""Issue 38: every file lint accepts is answered within a CPU budget. Text forms (Markdown,
Python, Dockerfile, Makefile, plain text, a notebook's code cells) are read up to
``finder.MAX_TEXT_CHARS`` and a file past it says so (INFO006); a file is linted for at most
``MAX_FILE_LAUNCHES`` launches and the last one linted says the rest were not (INFO004)."""

from __future__ import annotations

import gc
import json
import time
import weakref
from pathlib import Path

from specserver_advisor.bounded import gc_paused, gc_young_only
from specserver_advisor.lint.engine import Options, Report, run
from specserver_advisor.lint.finder import MAX_TEXT_CHARS
from specserver_advisor.lint.shell.budget import CAPPED, MAX_FILE_LAUNCHES

LAUNCH = "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2"


def lint(path: Path) -> tuple[Report, float]:
    start = time.process_time()
    report = run([path], Options(env={}))
    return report, time.process_time() - start


def test_text_past_the_limit_is_said_not_read(tmp_path: Path) -> None:
    for name, text in (
        ("README.md", "```bash\n" + LAUNCH + "\n```\n" + "x" * MAX_TEXT_CHARS),
        ("serve.py", "import sglang\n" + "sglang.Engine(model_path='m')\n" * 3000),
    ):
        path = tmp_path / name
        path.write_text(text)
        report, spent = lint(path)
        (hit,) = report.diagnostics
        assert hit.code == "INFO006", (name, hit)
        assert f"over the {MAX_TEXT_CHARS:,} lint reads of a" in hit.message
        assert report.launches == 0
        assert spent < 1.0, (name, spent)  # CPU seconds: the text is not evaluated


def test_text_at_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    body = "```bash\n" + LAUNCH + " --bogus-flag\n```\n"
    path.write_text(body.ljust(MAX_TEXT_CHARS - 1, "x") + "\n")
    report, _ = lint(path)
    assert report.launches == 1
    assert "SPEC015" in {d.code for d in report.diagnostics}


def test_launches_past_the_cap_are_said_not_read(tmp_path: Path) -> None:
    pod = (
        "---\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: e\n"
        "    command: [python3, -m, sglang.launch_server]\n    args: [--model-path, m]\n"
    )
    path = tmp_path / "pods.yaml"
    path.write_text(pod * (MAX_FILE_LAUNCHES + 20))
    report, _ = lint(path)
    assert report.launches == MAX_FILE_LAUNCHES
    capped = [d for d in report.diagnostics if d.code == "INFO004"]
    assert [CAPPED in d.message for d in capped] == [True]
    assert capped[0].line == 1 + 8 * (MAX_FILE_LAUNCHES - 1) + 5  # the last Pod linted


def test_notebook_code_past_the_limit_is_said_not_read(tmp_path: Path) -> None:
    source = ["!" + LAUNCH + " --bogus-flag\n", "# " + "x" * 400 + "\n"]
    cell = {"cell_type": "code", "source": source}
    many = MAX_TEXT_CHARS // len("".join(source)) + 10
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [cell] * many}))
    report, _ = lint(path)
    assert 0 < report.launches < many
    said = [d.message for d in report.diagnostics if d.code == "INFO004"]
    assert any("were not read (over the" in m for m in said), said


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    try:
        with gc_paused():
            raise ValueError("x")
    except ValueError:
        pass
    assert gc.isenabled()


def test_a_word_of_a_million_expansions_is_cut(tmp_path: Path) -> None:
    """1.9 MB of ``$`` on a launch line is one shell word: its expansions are counted too."""
    from specserver_advisor.lint.shell.budget import MAX_WORDS

    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH + " " + "$" * (20 * MAX_WORDS))
    report, spent = lint(path)
    said = [d.message for d in report.diagnostics if d.code == "INFO004"]
    assert any(f"more than {MAX_WORDS:,} expansions" in m for m in said), said
    assert spent < 2.0, spent  # CPU seconds (about 7 s before the expansions were counted)


POD = (
    "---\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: e\n"
    "    image: lmsysorg/sglang:v0.5.23-cu129\n    command: [python3, -m, sglang.launch_server]\n"
    "    args: [--model-path, Qwen/Qwen3-8B, --tp, '1', --port, '30000']\n"
    "    resources: {limits: {nvidia.com/gpu: 1}}\n"
)


def test_documents_past_the_cap_are_not_parsed(tmp_path: Path) -> None:
    """Documents are composed one at a time: past the launch cap the rest of the file is not
    read, so even invalid YAML there is not reached (the whole file was parsed first before)."""
    path = tmp_path / "pods.yaml"
    path.write_text(POD * (MAX_FILE_LAUNCHES + 20) + "---\nkind: [unclosed\n")
    report, _ = lint(path)
    assert report.launches == MAX_FILE_LAUNCHES
    capped = [d for d in report.diagnostics if d.code == "INFO004"]
    assert [CAPPED in d.message for d in capped] == [True]
    assert capped[0].line == 1 + 10 * (MAX_FILE_LAUNCHES - 1) + 5  # the last Pod linted
    # Before the cap, invalid YAML is still an error naming its line.
    path.write_text(POD * 3 + "---\nkind: [unclosed\n")
    report, _ = lint(path)
    assert report.launches == 0
    assert [d.line for d in report.diagnostics] == [33], report.diagnostics  # where libyaml stops


def test_two_megabytes_of_pods_as_documents_within_a_second(tmp_path: Path) -> None:
    from specserver_advisor.lint.engine import MAX_BYTES

    path = tmp_path / "pods.yaml"
    path.write_text(POD * ((MAX_BYTES - 64) // len(POD)))
    report, spent = lint(path)
    assert report.launches == MAX_FILE_LAUNCHES
    assert spent < 1.0, spent  # CPU seconds (1.8 s when the whole file was composed first)


def test_a_word_of_a_million_quoted_strings_is_cut(tmp_path: Path) -> None:
    """2 MB of alternating ``"'`` quotes is one word of 666,000 quoted strings: each counts
    against the expansion budget like a ``$`` (4.4 s of CPU before)."""
    from specserver_advisor.lint.engine import MAX_BYTES
    from specserver_advisor.lint.shell.budget import MAX_WORDS

    path = tmp_path / "quotes.sh"
    path.write_text((LAUNCH + " " + "\"'" * MAX_BYTES)[: MAX_BYTES - 64])
    report, spent = lint(path)
    said = [d.message for d in report.diagnostics if d.code == "INFO004"]
    assert any(f"more than {MAX_WORDS:,} expansions and quoted strings" in m for m in said), said
    assert spent < 1.0, spent  # CPU seconds


def test_two_megabytes_of_unclosed_substitutions_within_a_second(tmp_path: Path) -> None:
    """``$($($(...`` is scanned for its closing parenthesis in one pass (2 s of CPU before),
    and the script that never closes it is refused naming where it opens."""
    from specserver_advisor.lint.engine import MAX_BYTES

    path = tmp_path / "subst.sh"
    path.write_text((LAUNCH + " " + "$(" * MAX_BYTES)[: MAX_BYTES - 64])
    report, spent = lint(path)
    (hit,) = report.diagnostics
    assert hit.code == "INPUT001" and "unterminated (" in hit.message, hit
    assert (hit.line, hit.column) == (1, len(LAUNCH) + 2)
    assert spent < 1.0, spent  # CPU seconds


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_gc_young_only_collects_young_cycles_and_restores_the_collector() -> None:
    """Inside ``gc_young_only`` (lint's run) automatic collection is off, ``settle()`` frees
    the cyclic garbage an input left behind once the young generation is over the threshold,
    and the collector is on again after, even when the body raised."""
    assert gc.isenabled()
    gc.collect()
    with gc_young_only() as settle:
        assert not gc.isenabled()
        probe = _Cycle()
        gone = weakref.ref(probe)
        del probe
        for _ in range(gc.get_threshold()[0]):
            _Cycle()  # more cyclic garbage, past the young generation's threshold
        assert gone() is not None  # nothing collects on its own inside
        settle()
        assert gone() is None
    assert gc.isenabled()
    try:
        with gc_young_only():
            raise ValueError("x")
    except ValueError:
        pass
    assert gc.isenabled()
    gc.disable()
    try:  # a caller that turned the collector off keeps it off, and settle() does not collect
        with gc_young_only() as settle:
            settle()
        assert not gc.isenabled()
    finally:
        gc.enable()
