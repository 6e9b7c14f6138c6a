"""``plan`` across nodes: the nodes a launch spans, and how many a model that does not fit needs.

A tensor-parallel group of ``--tp-size`` GPUs over ``--nnodes`` nodes runs ``tp / nnodes`` GPUs
per node (SGLang 0.5.23 splits the ranks evenly over the nodes); a SpecServer says it as
``resources.gpus`` (the whole group) and ``resources.nodes``. When the weights do not fit,
``plantext`` names the node count from the card's usual server (``USUAL_GPUS_PER_NODE``).
Pure; called by ``plan`` (``nnodes_problem``) and ``plantext``.
"""

from __future__ import annotations

import math
from typing import Any

from specserver_advisor.gpus import Gpu
from specserver_advisor.launch.multinode import MAX_GPUS_PER_NODE

#: GPUs in the usual server of each card (vendor reference systems: DGX/HGX A100, H100, H800,
#: H200, B200, B300 and H20 boards carry 8, as AMD's MI300X-MI355X platforms do; the largest
#: cloud shapes of L4, L40S, A10G carry 8 (AWS g6.48xlarge, g6e.48xlarge, g5.48xlarge); a
#: GB200/GB300 NVL72 compute tray holds 4 (two Grace CPUs, two GPUs each); a GH200 superchip
#: and a DGX Spark (GB10) are one GPU per node). A card not listed is taken as 8.
USUAL_GPUS_PER_NODE = {"GH200": 1, "GB10": 1, "GB200": 4, "GB300": 4}
DEFAULT_GPUS_PER_NODE = 8
#: The most nodes one replica may span (``spec.resources.nodes``' bound).
MAX_NODES = 64


def usual_gpus_per_node(gpu: Gpu) -> int:
    return USUAL_GPUS_PER_NODE.get(gpu.name, DEFAULT_GPUS_PER_NODE)


def nnodes_of(values: dict[str, Any]) -> int:
    """``--nnodes`` as SGLang parsed it (1 when unset or not a number)."""
    value = values.get("nnodes")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def nnodes_problem(values: dict[str, Any]) -> str | None:
    """Why ``--nnodes`` cannot be planned with ``--tp-size``, naming the flag; None when it can.

    SGLang 0.5.23 places ``tp / nnodes`` ranks on each node, so tp must be a multiple of the
    node count; the count is bounded as ``spec.resources.nodes`` is.
    """
    raw = values.get("nnodes")
    if raw is None:
        return None
    if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= MAX_NODES:
        return f"--nnodes {raw!r}: expected a node count in 1..{MAX_NODES}"
    tp = values.get("tp_size") or 1
    if not isinstance(tp, int) or isinstance(tp, bool):
        return None  # the plan's own flag check names --tp-size
    if tp % raw:
        return (
            f"--nnodes {raw}: --tp-size {tp} does not divide over {raw} nodes (each node runs "
            f"tp / nnodes ranks); give --tp-size a multiple of {raw}"
        )
    if tp // raw > MAX_GPUS_PER_NODE:
        return (
            f"--tp-size {tp} on {raw} node(s) is {tp // raw} GPUs per node, above the maximum "
            f"{MAX_GPUS_PER_NODE}; spread it with --nnodes"
        )
    return None


def layout(tp: int, nnodes: int, gpu: Gpu) -> str:
    """``16 x H100`` on one node, ``16 x H100 (2 nodes x 8)`` across nodes."""
    if nnodes <= 1:
        return f"{tp} x {gpu.name}"
    return f"{tp} x {gpu.name} ({nnodes} nodes x {tp // nnodes})"


def nodes_for(gpus_needed: int, gpu: Gpu) -> tuple[int, int]:
    """(resources.gpus, resources.nodes) holding at least ``gpus_needed`` GPUs on the card's
    usual servers: one node while they fit in one, else whole nodes of the usual size."""
    per_node = usual_gpus_per_node(gpu)
    if gpus_needed <= per_node:
        return gpus_needed, 1
    nodes = math.ceil(gpus_needed / per_node)
    return nodes * per_node, nodes


def node_advice(gpus_needed: int, gpu: Gpu) -> str:
    """What to set for ``gpus_needed`` GPUs: the SpecServer fields and the plan flags."""
    gpus, nodes = nodes_for(gpus_needed, gpu)
    if nodes > MAX_NODES:
        return f"more than {MAX_NODES} nodes of {usual_gpus_per_node(gpu)} x {gpu.name}"
    if nodes == 1:
        return f"one node of {gpus} x {gpu.name}: set resources.gpus {gpus} (plan --gpus {gpus})"
    per_node = gpus // nodes
    return (
        f"{nodes} nodes of {per_node} x {gpu.name}: set resources.gpus {gpus} and resources.nodes "
        f"{nodes} (plan --gpus {gpus} --nnodes {nodes})"
    )


def layout_notes(tp: int, nnodes: int, gpu: Gpu) -> list[str]:
    """What the plan's text says about the nodes: how a multi-node launch runs, or that one
    node is asked for more GPUs than the card's usual server holds."""
    per_node = usual_gpus_per_node(gpu)
    if nnodes > 1:
        return [
            f"the tensor-parallel group spans {nnodes} nodes of {tp // nnodes} x {gpu.name}: "
            "each runs this launch with its --node-rank (0 on the leader, the only one serving "
            "HTTP) and --dist-init-addr at the leader; its all-reduces cross the inter-node "
            f"link. A SpecServer with resources.nodes {nnodes} renders them from "
            "LeaderWorkerSet's environment"
        ]
    if tp > per_node:
        return [
            f"{tp} GPUs on one node: the usual {gpu.name} server holds {per_node}; across "
            f"nodes: {node_advice(tp, gpu)}"
        ]
    return []
