"""Whether SGLang 0.5.23 runs a custom all-reduce for a TP group, held to its own decision
(``distributed/device_communicators``), read out of the installed source and run on each
card's facts: ``dispatch_custom_allreduce`` tries CUDA's JIT kernel first
(``can_use_custom_all_reduce_v2``, its group sizes from ``configs/custom_all_reduce_v2.py`` for
the card's compute capability), then the legacy kernel (``can_use_custom_all_reduce_with_nvlink``
with ``CustomAllreduce._SUPPORTED_WORLD_SIZES``).

The card's facts are the GPU table's (``full_nvlink``: SGLang's ``is_full_nvlink``; ``p2p``:
its ``can_p2p``; ``rocm``: ``_is_hip``); whether the group spans nodes is the launch's
``--nnodes``. What is checked is that the advisor's ``custom_allreduce_off`` decides as SGLang's
function does, in its order, for every card, group size and node count.
"""

from __future__ import annotations

import ast
import functools
import itertools
import logging
from types import SimpleNamespace
from typing import Any

from oracle import sglang_file, sglang_function
from specserver_advisor.gpus import GPUS, Gpu
from specserver_advisor.perf.parallelism import custom_allreduce_off

UTILS = "srt/distributed/device_communicators/custom_all_reduce_utils.py"
CUSTOM = "srt/distributed/device_communicators/custom_all_reduce.py"
V2 = "srt/distributed/device_communicators/custom_all_reduce_v2.py"
V2_CONFIGS = "srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"


def _supported_sizes() -> list[int]:
    """``CustomAllreduce._SUPPORTED_WORLD_SIZES`` as SGLang's source states it."""
    tree = ast.parse(sglang_file(CUSTOM).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_SUPPORTED_WORLD_SIZES" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError("_SUPPORTED_WORLD_SIZES not found in SGLang's custom_all_reduce.py")


@functools.cache
def _v2_sizes(capability: tuple[int, int]) -> tuple[int, ...]:
    """``get_supported_world_sizes`` of SGLang's JIT kernel on a card of ``capability`` (its
    configs module run with it)."""
    tree = ast.parse(sglang_file(V2_CONFIGS).read_text())
    tree.body = [n for n in tree.body if not isinstance(n, ast.Import)]  # import torch
    torch = SimpleNamespace(
        cuda=SimpleNamespace(
            get_device_capability=lambda: capability,
            get_device_properties=lambda: SimpleNamespace(multi_processor_count=132),
        )
    )
    namespace: dict[str, Any] = {"torch": torch, "__name__": "custom_all_reduce_v2_configs"}
    exec(compile(tree, V2_CONFIGS, "exec"), namespace)  # SGLang's own configs, stubbed torch
    return tuple(namespace["get_supported_world_sizes"]())


def _sglang_decides(gpu: Gpu, tp: int, nnodes: int) -> bool:
    """SGLang's own dispatch on ``gpu``'s facts: True where a custom all-reduce runs."""
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
    namespace: dict[str, Any] = {
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
        # Across nodes v2 needs one NVLink clique on a VMM-backed allocator (not the default).
        "is_one_nvlink_clique": lambda group, device: False,
        "_is_vmm_backed_allocator": lambda device: False,
        "get_supported_world_sizes": lambda: _v2_sizes(gpu.capability),
    }
    legacy = sglang_function(UTILS, "can_use_custom_all_reduce_with_nvlink", namespace)
    namespace["can_use_custom_all_reduce_with_nvlink"] = legacy
    v2 = sglang_function(V2, "can_use_custom_all_reduce_v2", namespace)
    device = SimpleNamespace(index=0)
    if not gpu.rocm and v2(group=object(), device=device):
        return True
    return legacy(object(), device, _supported_sizes(), "CustomAllreduce") is not None


def test_the_advisor_runs_the_custom_all_reduce_where_sglang_does() -> None:
    answers = set()
    for (name, gpu), tp, nnodes in itertools.product(GPUS.items(), range(2, 9), (1, 2)):
        ours = custom_allreduce_off(gpu, tp, nnodes, disabled=False) is None
        theirs = _sglang_decides(gpu, tp, nnodes)
        assert ours == theirs, (name, tp, nnodes)
        answers.add((gpu.rocm, gpu.full_nvlink, gpu.p2p, tp % 2 == 1, theirs))
    # Both answers on NVLink and PCIe cards, odd and even groups (not a vacuous pass).
    pcie = next(g for g in GPUS.values() if not g.full_nvlink and g.p2p)
    assert _sglang_decides(pcie, 2, 1) and not _sglang_decides(pcie, 4, 1)
    h100, mi300x = GPUS["H100"], GPUS["MI300X"]
    assert _sglang_decides(h100, 3, 1) and not _sglang_decides(mi300x, 3, 1)
    assert _sglang_decides(h100, 8, 1) and not _sglang_decides(h100, 8, 2)
    geforce = next(g for g in GPUS.values() if not g.p2p)
    assert not _sglang_decides(geforce, 2, 1)
    assert {a[-1] for a in answers} == {True, False}
