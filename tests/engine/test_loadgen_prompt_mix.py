"""The load generator draws prompt lengths from a mix given as ``plan --prompt-len`` takes it.

The mix is parsed by the advisor's own ``prompt_mix``; the lengths reach the engine (the
simulator's ``sglang:prompt_tokens_total`` counts them), draws follow the shares and a seed
repeats them, and bad values are usage errors naming the flag.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest
from test_simulator_behaviour import metric

from specserver_advisor.cli.plan import prompt_mix
from specserver_engine import loadgen
from stack import QWEN_EAGLE3


def test_draws_follow_the_shares_and_the_seed_repeats_them() -> None:
    mix = prompt_mix("p50=256,p90=1024,p99=6144")
    draws = loadgen.PromptLengths(512, mix, seed=3)
    counts = collections.Counter(draws.draw() for _ in range(20_000))
    assert set(counts) == {256, 1024, 6144}
    for tokens, share in mix:
        # 20,000 draws: a share's standard error is under 0.0036; 5 of them.
        assert abs(counts[tokens] / 20_000 - share) < 0.018
    again = loadgen.PromptLengths(512, mix, seed=3)
    first = loadgen.PromptLengths(512, mix, seed=3)
    assert [again.draw() for _ in range(50)] == [first.draw() for _ in range(50)]
    assert {loadgen.PromptLengths(700).draw() for _ in range(10)} == {700}


def test_the_engine_receives_the_drawn_lengths(start_simulator: Any) -> None:
    sim = start_simulator(
        *QWEN_EAGLE3, "--time-scale", "50", "--sim-startup-seconds", "0", "--enable-metrics"
    )
    args = ["--url", sim.url, "--concurrency", "2", "--num-prompts", "8"]
    args += ["--prompt-len", "100,300", "--seed", "5", "--output-len", "4"]
    assert loadgen.main(args) == 0
    expected = loadgen.PromptLengths(512, prompt_mix("100,300"), seed=5)
    assert metric(sim.url, "sglang:prompt_tokens_total") == sum(expected.draw() for _ in range(8))


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--prompt-len", "p50=4096,p90=512"], "argument --prompt-len: "),
        (["--prompt-len", "abc"], "argument --prompt-len: 'abc' is not a whole number"),
        (["--prompt-len", "0"], "argument --prompt-len: prompt length 0 is outside"),
        (["--prompt-len", "512", "--input-len", "256"], "--prompt-len replaces --input-len"),
    ],
)
def test_bad_prompt_lengths_are_usage_errors(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        loadgen.main(["--url", "http://127.0.0.1:9", *argv])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err
