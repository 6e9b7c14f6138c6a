"""SGLang 0.5.23 itself on the adaptive tiers the operator reasons on (``zerosteps``).

In the oracle env (skipped with the reason when it is missing): SGLang resolves an
``--speculative-adaptive`` launch's decode CUDA-graph batch sizes, and its own
``AdaptiveSpeculativeParams`` routes every batch up to the cap to a tier. The advisor's capture
sizes (``cudagraphs.graph_batch_sizes``, speculative), default tiers and routing
(``adaptivetiers.tier_index``)
must give the same candidates at every batch, so the batch from which the operator expects
zero draft steps is SGLang's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oracle import WORKER, load_oracleenv, missing
from specserver_advisor.sglang import adaptivetiers
from specserver_advisor.sglang.adaptivetiers import DEFAULT_TIERS, tier_index
from specserver_advisor.sglang.cudagraphs import graph_batch_sizes
from stack import load_config

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import sglang_worker as w
from sglang.srt import runtime_context as rc
from sglang.srt.arg_groups.overrides import resolution_result
from sglang.srt.speculative import adaptive_spec_params as a

out = {"tiers": a.DEFAULT_ADAPTIVE_CONFIG, "caps": {}}
for argv in json.loads(sys.stdin.read()):
    facts = w._install_gpu(81559.0, (9, 0))
    with rc.override_platform(**facts):
        args = w.prepare_server_args(argv)
        args.resolve_once()
        cap = resolution_result(args, "max_running_requests")
        graphs = list(resolution_result(args, "cuda_graph_config").decode.bs)
    params = a.AdaptiveSpeculativeParams(initial_steps=3)
    params.set_cuda_graph_bs(graphs)
    out["caps"][str(cap)] = {
        "graphs": graphs,
        "candidates": [params._route(b).candidate_steps for b in range(1, cap + 1)],
    }
print("RESULT " + json.dumps(out))
"""

CAPS = (48, 64, 96, 160)


@pytest.fixture(scope="module")
def sglang_tiers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    why = missing()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("models")
    for name in ("qwen3-8b", "qwen3-8b-eagle3"):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(load_config(name)))
    done = subprocess.run(
        [str(load_oracleenv().PYTHON), "-c", PROBE, str(WORKER.parent)],
        input=json.dumps([argv(root, cap) for cap in CAPS]),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    found: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return found


def argv(root: Path, cap: int) -> list[str]:
    return [
        "--model-path",
        str(root / "qwen3-8b"),
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(root / "qwen3-8b-eagle3"),
        "--speculative-eagle-topk",
        "1",
        "--speculative-adaptive",
        "--max-running-requests",
        str(cap),
    ]


def test_the_default_tiers_are_sglangs(sglang_tiers: dict[str, Any]) -> None:
    theirs = {
        int(k): (tuple(v["candidate_steps"]), v["up_hysteresis"], v["down_hysteresis"])
        for k, v in sglang_tiers["tiers"].items()
        if k.isdigit()
    }
    ours = {
        t.min_batch: (t.candidate_steps, t.up_hysteresis, t.down_hysteresis) for t in DEFAULT_TIERS
    }
    assert ours == theirs


@pytest.mark.parametrize("cap", CAPS)
def test_every_batch_routes_to_sglangs_tier(sglang_tiers: dict[str, Any], cap: int) -> None:
    theirs = sglang_tiers["caps"][str(cap)]
    assert graph_batch_sizes(cap, speculative=True) == theirs["graphs"]
    graphs = graph_batch_sizes(cap, speculative=True)
    ours = [
        list(DEFAULT_TIERS[tier_index(b, DEFAULT_TIERS, graphs)].candidate_steps)
        for b in range(1, cap + 1)
    ]
    assert ours == theirs["candidates"]
    zero = [b for b, c in enumerate(theirs["candidates"], 1) if 0 in c]
    only = [b for b, c in enumerate(theirs["candidates"], 1) if c == [0]]
    assert adaptivetiers.zero_step_batch(cap, cap) == (zero[0] if zero else None)
    assert adaptivetiers.always_zero_batch(cap, cap) == (only[0] if only else None)
