"""The advisor against SGLang 0.5.23 itself: a thousand launches a run, field by field.

SGLang runs in its own cached environment (``scripts/oracle-env install``) behind a worker
process; this module never imports it. Every launch is resolved by both sides on the named GPU
and compared on acceptance (with the error text), the resolved fields of
``harness.COMPARED_FIELDS`` and the context lengths. Skipped, with a message naming what is
missing, only when the oracle environment could not be built (no package index), and never
under scripts/test, which fails instead (``oracle.required``).

The generated launches are a rotating sample: each run draws ``SPECSERVER_ORACLE_SEED`` (printed
in pytest's header, settable to reproduce a failure) and runs ``SPECSERVER_ORACLE_CASES``
launches (1,000 by default); ``scripts/bench-fidelity`` runs the full 5,000+ as a benchmark.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import harness
import launches
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle

GENERATED = int(os.environ.get("SPECSERVER_ORACLE_CASES", "1000"))
#: This run's seed (tests/conftest.py draws one per run and prints it; 17 outside pytest).
SEED = int(os.environ.get("SPECSERVER_ORACLE_SEED", "17"))


@pytest.fixture(scope="module")
def run(sglang: oracle.Oracle, tmp_path_factory: pytest.TempPathFactory) -> harness.Harness:
    return harness.Harness(sglang, harness.materialize(tmp_path_factory.mktemp("models")))


def _report(diffs: list[harness.Difference]) -> str:
    return "\n".join(json.dumps(d.as_dict()) for d in diffs[:20])


def test_flag_table_is_sglangs_own_parser(sglang: oracle.Oracle) -> None:
    env = oracle.load_oracleenv()
    committed = json.loads(
        resources.files("specserver_advisor.sglang").joinpath("data/flags-0.5.23.json").read_text()
    )
    assert committed == json.loads(env.dump_flags()), (
        "the committed flag table differs from SGLang's parser; regenerate: "
        "scripts/oracle-env flags"
    )


def test_curated_launches_agree(run: harness.Harness) -> None:
    diffs = [d for case in launches.curated_cases() for d in run.run(case)]
    assert not diffs, _report(diffs)


def test_generated_launches_cover_overrides_and_the_default_cap() -> None:
    """Issue 29's dimensions are drawn: overrides on speculative launches (MTP, EAGLE-3 and
    STANDALONE drafts) and without, config files read instead, and speculative launches with
    the cap unset."""
    generated = launches.generated_cases(GENERATED, SEED)
    dims = [d for case in generated for d in harness.dimensions(case)]
    share = len(generated) // 100
    assert dims.count("override+draft") >= 10 * share and dims.count("override") >= share
    assert dims.count("default-cap") >= 20 * share and dims.count("config-file") >= 5 * share
    drafted = {
        _drafted_as(case)
        for case in generated
        if "override+draft" in harness.dimensions(case)
        and (case.draft or case.target == "deepseek-v3")
    }
    assert {"EAGLE3", "STANDALONE", "MTP"} <= drafted, (drafted, f"SPECSERVER_ORACLE_SEED={SEED}")


def _drafted_as(case: harness.Case) -> str:
    """MTP for DeepSeek's own next-token layers (no draft path, or NEXTN/EAGLE on its own
    checkpoint: SGLang reads the draft from the target either way), else the algorithm."""
    algorithm = harness._algorithm(case)
    if case.target == "deepseek-v3" and (not case.draft or algorithm in ("NEXTN", "EAGLE")):
        return "MTP"
    return algorithm


def test_generated_launches_agree(run: harness.Harness) -> None:
    before = run.cases
    diffs = [d for case in launches.generated_cases(GENERATED, SEED) for d in run.run(case)]
    assert run.cases - before >= GENERATED
    assert not diffs, (
        f"{len(diffs)} differences (SPECSERVER_ORACLE_SEED={SEED} "
        f"SPECSERVER_ORACLE_CASES={GENERATED} reproduces); first:\n{_report(diffs)}"
    )


@st.composite
def cases(draw: st.DrawFn) -> harness.Case:
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    import random

    return launches.random_case(random.Random(seed))


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=cases())
def test_hypothesis_launches_agree(run: harness.Harness, case: harness.Case) -> None:
    diffs = run.run(case)
    assert not diffs, _report(diffs)


def test_repository_corpus_agrees(run: harness.Harness) -> None:
    corpus = list(launches.corpus_cases(Path(harness.REPO)))
    assert len(corpus) >= 20
    diffs = [d for case in corpus for d in run.run(case)]
    assert not diffs, _report(diffs)


def test_reserved_tokens_follow_sglang_and_the_named_exception(run: harness.Harness) -> None:
    """Adaptive mode reserves its largest candidate (8), as SGLang's tokenizer does; with
    topk > 1 and no draft-token count SGLang's own arithmetic fails: the named exception."""
    eagle3 = ("--speculative-algorithm", "EAGLE3")
    adaptive = harness.Case(
        (*eagle3, "--speculative-adaptive"), "qwen3-8b", "L4", "qwen3-8b-eagle3"
    )
    assert not run.run(adaptive)
    theirs = run.oracle.resolve(adaptive.argv(run.paths), harness.GPUS["L4"], {})
    assert theirs["fields"]["reserved_tokens"] == 8
    wide = harness.Case(
        (*eagle3, "--speculative-num-steps", "3", "--speculative-eagle-topk", "2"),
        "qwen3-8b",
        "L4",
        "qwen3-8b-eagle3",
    )
    before = run.excepted
    assert not run.run(wide) and run.excepted == before + 1
