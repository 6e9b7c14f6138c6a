"""Whether SGLang 0.5.23 runs its custom all-reduce for a TP group, held to its own
``can_use_custom_all_reduce_with_nvlink`` (``distributed/device_communicators/
custom_all_reduce_utils.py``), read out of the installed source and run on each card's facts.

The card's facts are the GPU table's (``full_nvlink``: SGLang's ``is_full_nvlink``; ``p2p``:
its ``can_p2p``; ``rocm``: ``_is_hip``); whether the group spans nodes is the launch's
``--nnodes``. What is checked is that the advisor's ``custom_allreduce_off`` decides as SGLang's
function does, in its order, for every card, group size and node count.
"""

from __future__ import annotations

import ast
import itertools
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from oracle import sglang_file
from specserver_advisor.gpus import GPUS, Gpu
from specserver_advisor.perf.parallelism import custom_allreduce_off

UTILS = "srt/distributed/device_communicators/custom_all_reduce_utils.py"
CUSTOM = "srt/distributed/device_communicators/custom_all_reduce.py"


def _function(path: Path, name: str, namespace: dict[str, Any]) -> Any:
    """``name`` from SGLang's source file, defined in ``namespace`` (its globals stubbed)."""
    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


def _supported_sizes() -> list[int]:
    """``CustomAllreduce._SUPPORTED_WORLD_SIZES`` as SGLang's source states it."""
    tree = ast.parse(sglang_file(CUSTOM).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_SUPPORTED_WORLD_SIZES" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError("_SUPPORTED_WORLD_SIZES not found in SGLang's custom_all_reduce.py")


def _sglang_decides(gpu: Gpu, tp: int, nnodes: int) -> bool:
    """SGLang's own function on ``gpu``'s facts: True where the custom all-reduce runs."""
    dist = SimpleNamespace(
        get_backend=lambda group: "gloo",
        get_rank=lambda group: 0,
        get_world_size=lambda group: tp,
        all_gather=lambda out, tensor, group: None,
        Backend=SimpleNamespace(NCCL="nccl"),
    )
    torch = SimpleNamespace(
        tensor=lambda data, **kwargs: data[0],
        int=int,
        cuda=SimpleNamespace(device_count=lambda: 8),
    )
    namespace = {
        "dist": dist,
        "torch": torch,
        "os": SimpleNamespace(environ={}),
        "logger": logging.getLogger("sglang-oracle"),
        "List": list,
        "Optional": Any,
        "_is_hip": gpu.rocm,
        "in_the_same_node_as": lambda group, source_rank: [nnodes == 1] * tp,
        "is_full_nvlink": lambda ids, world_size: gpu.full_nvlink,
        "can_p2p": lambda rank, world_size: gpu.p2p,
    }
    decide = _function(sglang_file(UTILS), "can_use_custom_all_reduce_with_nvlink", namespace)
    found = decide(object(), SimpleNamespace(index=0), _supported_sizes(), "CustomAllreduce")
    return found is not None


def test_the_advisor_runs_the_custom_all_reduce_where_sglang_does() -> None:
    decided = 0
    for (name, gpu), tp, nnodes in itertools.product(GPUS.items(), range(2, 9), (1, 2)):
        ours = custom_allreduce_off(gpu, tp, nnodes, disabled=False) is None
        assert ours == _sglang_decides(gpu, tp, nnodes), (name, tp, nnodes)
        decided += 1
    # The grid reached both answers on cards with and without NVLink (not a vacuous pass).
    assert decided == len(GPUS) * 7 * 2
    pcie = next(g for g in GPUS.values() if not g.full_nvlink and g.p2p)
    assert _sglang_decides(pcie, 2, 1) and not _sglang_decides(pcie, 4, 1)
    nvlink = next(g for g in GPUS.values() if g.full_nvlink and not g.rocm)
    assert _sglang_decides(nvlink, 8, 1) and not _sglang_decides(nvlink, 3, 1)
