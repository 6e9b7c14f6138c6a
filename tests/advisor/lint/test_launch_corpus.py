"""The launch corpus (issue 41): 200+ launches in 20+ forms, each judged by SGLang 0.5.23
itself (``verdicts.json``, computed by tests/oracle/launchcorpus_verdicts.py, checked against
the oracle by tests/oracle/test_launchcorpus_verdicts.py). Lint finds every launch, leaves no
file silent, and agrees with SGLang on at least 97% of them."""

from __future__ import annotations

import filecmp
import json
import sys
from pathlib import Path

import pytest

from specserver_advisor.lint import docgen

HERE = Path(__file__).resolve().parent / "launchcorpus"
sys.path.insert(0, str(HERE))

import judge  # noqa: E402
import make  # noqa: E402


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))


def test_the_corpus_is_what_its_script_writes(tmp_path: Path) -> None:
    make.main(tmp_path)
    assert (tmp_path / "launches.json").read_text() == (HERE / "launches.json").read_text()
    cmp = filecmp.dircmp(tmp_path / "files", HERE / "files")
    assert not (cmp.left_only or cmp.right_only or cmp.diff_files), "rerun make.py"
    launches, verdicts = judge.load()
    assert [(v["file"], v["lines"]) for v in verdicts] == [
        (e["file"], e["lines"]) for e in launches
    ], "rerun tests/oracle/launchcorpus_verdicts.py"


def test_the_corpus_covers_enough_forms_and_outcomes() -> None:
    launches, verdicts = judge.load()
    assert len(launches) >= 150 and len({e["form"] for e in launches}) >= 12
    outcomes = {v["verdict"] for v in verdicts}
    assert outcomes == {"accepted", "refused", "fails"}
    assert any(v["capped"] for v in verdicts)


def test_lint_agrees_with_sglang_on_the_corpus() -> None:
    result = judge.judge()
    assert result.missing == [], "every launch is found"
    assert result.silent_files == [], "no file is read without a launch or a finding"
    assert result.agreed >= 0.97 * result.launches, "\n".join(result.disagreements)
    for form, count in result.per_form.items():  # every form is read, none only partly
        assert result.agreed_per_form[form] >= 0.8 * count, (form, result.disagreements)
    assert json.loads((HERE / "verdicts.json").read_text())["sglang"] == "0.5.23"
    # docs/rules.md quotes scripts/bench-lint-corpus's last line: it must be today's
    assert judge.table(result).splitlines()[-1] == docgen.CORPUS_FIGURE
