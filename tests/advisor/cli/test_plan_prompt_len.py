"""``plan --prompt-len``: varied prompt lengths feed the chunked-prefill ITL P99 and TTFT P99.

Through the CLI (``--format json`` and text), with the bundled Qwen3-8B + EAGLE-3 configs on an
L4; bad values end with a one-line usage error naming the flag.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from test_plan_cli import L4_ARGS

from specserver_advisor.cli.main import main
from specserver_advisor.cli.plan import prompt_mix

REPO = Path(__file__).resolve().parents[3]
QWEN = [
    "--model",
    "Qwen/Qwen3-8B",
    "--draft",
    "Tengyunw/qwen3_8b_eagle3",
    *L4_ARGS,
    "--concurrency",
    "1,4,8",
]


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["plan", *argv, "--format", "json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def point(out: dict[str, object], concurrency: int, mode: str) -> dict[str, float]:
    curves = out["curves"]
    assert isinstance(curves, list)
    return next(c[mode] for c in curves if c["concurrency"] == concurrency)


def test_every_point_of_the_json_has_the_itl_p99(capsys: pytest.CaptureFixture[str]) -> None:
    out = plan(capsys, *QWEN)
    for mode in ("on", "off"):
        for c in (1, 4, 8):
            p = point(out, c, mode)
            # Fixed lengths arrive in waves and prefill before decoding: no step is slower.
            assert p["itl_p99_ms"] == pytest.approx(p["itl_ms"], rel=0.01)
    assert out["workload"] == {
        "input_len": 512,
        "output_len": 128,
        "prompt_len": [{"tokens": 512, "share": 1.0}],
        "staggered": False,
    }


def test_long_prompts_in_the_mix_set_the_itl_and_ttft_tails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    mixed = plan(capsys, *QWEN, "--prompt-len", "p50=256,p90=1024,p99=6144")
    workload = mixed["workload"]
    assert isinstance(workload, dict)
    assert workload["staggered"] is True
    assert workload["prompt_len"] == [
        {"tokens": 256, "share": 0.5},
        {"tokens": 1024, "share": 0.4},
        {"tokens": 6144, "share": 0.1},
    ]
    mean = workload["input_len"]
    assert mean == round(0.5 * 256 + 0.4 * 1024 + 0.1 * 6144)
    same_mean = plan(capsys, *QWEN, "--prompt-len", f"{mean},{mean}")
    assert same_mean["workload"]["staggered"] is False  # type: ignore[index]
    # Speculating, commits vary and arrivals spread: at 8 users a step carrying a prompt's
    # prefill is more than 1% of a request's steps.
    tail = point(mixed, 8, "on")
    assert tail["itl_p99_ms"] > 3 * tail["itl_ms"]
    # Without, one token a step: the prompts of a wave all prefill ahead of the decodes and the
    # wave finishes together; no decode step waits for a prefill (as the simulated engine runs
    # SGLang's scheduler: tests/engine/test_plan_itl_p99_vs_simulator.py).
    waves = point(mixed, 8, "off")
    assert waves["itl_p99_ms"] == pytest.approx(waves["itl_ms"])
    for mode in ("on", "off"):
        # A 6,144-token prompt's own prefill is the TTFT P99 at one user.
        assert point(mixed, 1, mode)["ttft_p99_ms"] > 3 * point(same_mean, 1, mode)["ttft_p99_ms"]


def test_mixed_chunks_shorten_the_itl_p99_of_a_mix(capsys: pytest.CaptureFixture[str]) -> None:
    mix = ["--prompt-len", "p50=256,p90=2048", "--chunked-prefill-size", "512"]
    whole = plan(capsys, *QWEN, *mix)
    mixed = plan(capsys, *QWEN, *mix, "--enable-mixed-chunk")
    # Speculating (arrivals spread by varied commits), the slow step is one chunk, not a prompt.
    assert point(mixed, 8, "on")["itl_p99_ms"] < point(whole, 8, "on")["itl_p99_ms"] / 2
    assert point(mixed, 8, "on")["itl_p99_ms"] > point(mixed, 8, "on")["itl_ms"]
    # Without speculation only mixed chunks spread a wave (its short prompts decode while the
    # long ones still prefill), so only they make slow steps.
    assert point(whole, 8, "off")["itl_p99_ms"] == pytest.approx(point(whole, 8, "off")["itl_ms"])
    assert point(mixed, 8, "off")["itl_p99_ms"] > 1.5 * point(mixed, 8, "off")["itl_ms"]


def test_the_table_shows_the_itl_p99_and_the_mean_prompt(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", *QWEN, "--prompt-len", "128,512,4096"]) == 0
    text = capsys.readouterr().out
    head = next(line for line in text.splitlines() if line.startswith("concurrency"))
    assert "ITL p99 on ms" in head and "TTFT p99 on ms" in head
    assert "of 1579 (mean prompt)+128 tokens fit" in text


def test_a_specserver_is_planned_at_the_given_prompt_lengths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = str(REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml")
    out = plan(capsys, "--from", example, "--prompt-len", "p90=512,p99=8192")
    assert out["workload"]["prompt_len"] == [  # type: ignore[index]
        {"tokens": 512, "share": 0.9},
        {"tokens": 8192, "share": 0.1},
    ]


def test_prompt_len_forms() -> None:
    assert prompt_mix("2000") == ((2000, 1.0),)
    assert prompt_mix("512, 128,512,4096") == ((128, 0.25), (512, 0.5), (4096, 0.25))
    assert prompt_mix("p99=8192,p50=512") == ((512, 0.5), (8192, 0.5))
    assert prompt_mix("p100=300") == ((300, 1.0),)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("abc", "not a whole number of tokens"),
        ("512,-3", "outside 1..10000000"),
        ("0", "outside 1..10000000"),
        ("1e99", "not a whole number"),
        ("512,,1024", "expected lengths like"),
        ("", "expected lengths like"),
        ("p50=512,1024", "not both"),
        ("p50=4096,p90=512", "must grow with the percentile"),
        ("p0=5", "(0, 100]"),
        ("p101=5", "(0, 100]"),
        ("pnan=5", "(0, 100]"),
        ("px=5", "like p90=2048"),
        ("p50=512,p50=600", "given twice"),
        ("p50=", "not a whole number"),
    ],
)
def test_bad_prompt_lengths_are_usage_errors_naming_the_flag(
    value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *QWEN, "--prompt-len", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --prompt-len:" in err and says in err
    with pytest.raises(argparse.ArgumentTypeError):
        prompt_mix(value)


def test_prompt_len_replaces_input_len(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *QWEN, "--prompt-len", "512", "--input-len", "256"]) == 2
    assert "--prompt-len replaces --input-len" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plan", *QWEN, "--input-len", "0"])
    assert "argument --input-len: expected a positive integer" in capsys.readouterr().err
