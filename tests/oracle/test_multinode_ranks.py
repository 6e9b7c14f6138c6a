"""MN005 against SGLang 0.5.23: the node layout the rule checks is SGLang's own.

SGLang places the (pipeline, tensor) ranks over the nodes in
``sglang.srt.entrypoints.engine._calculate_rank_ranges`` and asserts
``(tp_size * pp_size) % nnodes == 0`` in ``arg_groups.validation_hook.check_server_args``. The
function is taken from the oracle environment's installed source (it needs no GPU and no torch:
only its text is run, with the parallel sizes it reads) and compared with the rule's layout for
every tp 1..16, pp 1..8, nnodes 2..16 that passes SGLang's assertion.
"""

from __future__ import annotations

import ast
import types

import oracle
from specserver_advisor.lint.rules.mn005_tp_not_divisible_by_nodes import placed_ranks


def test_the_rule_places_ranks_as_sglang_does() -> None:
    source = oracle.sglang_file("srt/entrypoints/engine.py").read_text()
    (fn,) = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == "_calculate_rank_ranges"
    ]
    fn.returns = None
    for arg in fn.args.args:
        arg.annotation = None
    code = compile(ast.Module([fn], []), "engine.py", "exec")
    compared = 0
    for tp in range(1, 17):
        for pp in range(1, 9):
            for nnodes in range(2, 17):
                if (tp * pp) % nnodes:
                    continue
                sizes = types.SimpleNamespace(nnodes=nnodes, pp_size=pp, tp_size=tp)
                ns: dict[str, object] = {"get_parallel": lambda s=sizes: s}
                exec(code, ns)
                theirs = []
                for rank in range(nnodes):
                    pp_ranks, tp_ranks, _, _ = ns["_calculate_rank_ranges"](rank)  # type: ignore[operator]
                    theirs += [(p, t) for p in pp_ranks for t in tp_ranks]
                assert placed_ranks(tp, pp, nnodes) == theirs, (tp, pp, nnodes)
                compared += 1
    assert compared > 300


def test_sglang_asserts_tp_times_pp_divisible_by_nodes() -> None:
    text = oracle.sglang_file("srt/arg_groups/validation_hook.py").read_text()
    assert "(cfg.tp_size * cfg.pp_size) % cfg.nnodes == 0" in text
    assert "tp_size must be divisible by number of nodes" in text
