"""The examples' comments quote what the advisor computes (issue 40: the L4 example said
"~9k tokens, ~15 requests" while plan says otherwise): the KV pool and the requests that fit,
as ``specserver-advisor plan --from`` prints them."""

from __future__ import annotations

import json
import re

import pytest

from specserver_advisor.cli.main import main
from stack import REPO


def test_the_l4_example_quotes_its_kv_pool(capsys: pytest.CaptureFixture[str]) -> None:
    example = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"
    comment = " ".join(
        line.lstrip("# ") for line in example.read_text().splitlines() if line.startswith("#")
    )
    found = re.search(r"pool holds ([\d,]+) tokens .*?i\.e\. (\d+) requests", comment)
    assert found, comment
    assert main(["plan", "--from", str(example), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert int(found.group(1).replace(",", "")) == out["kv_pool_tokens"]["with_draft"]
    assert int(found.group(2)) == out["max_running_requests"]["fits"]
    # the explicit cap stays within what fits
    assert out["flags"]["max_running_requests"] <= out["max_running_requests"]["fits"]
