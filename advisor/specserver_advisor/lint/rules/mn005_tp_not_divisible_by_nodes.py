"""MN005 tp-not-divisible-by-nodes.

What it does:
    For ``--nnodes`` > 1: flags ``--tp-size`` x ``--pp-size`` not a multiple of the node
    count (SGLang 0.5.23's own check), and a split SGLang cannot lay out: it gives each node
    ``max(pp / nnodes, 1)`` pipeline ranks and ``tp / max(nnodes / pp, 1)`` tensor ranks
    (``engine._calculate_rank_ranges``), which must cover every (pp, tp) rank once.
Why it matters:
    SGLang refuses the first at startup (``AssertionError: tp_size must be divisible by
    number of nodes``) on every node, after the image pull and scheduling; with the second
    a node gets a pipeline rank that does not exist or a rank no node takes, and the group
    never starts.
Example (fails):
    --tp-size 12 --nnodes 8
Use instead:
    --tp-size 16 --nnodes 2 (8 GPUs a node), or --tp-size 8 --pp-size 2 --nnodes 2
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.lwsgroup import flag_int, multinode
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "MN005"
NAME = "tp-not-divisible-by-nodes"
SEVERITY = "error"
SUMMARY = "tp x pp not split evenly over --nnodes: SGLang refuses it or mislays ranks."
FIX = "Make --tp-size x --pp-size a multiple of --nnodes that SGLang splits evenly."
APPLIES_TO = ("server",)
#: The most ranks whose layout is computed (far above any real deployment).
MAX_RANKS = 65536


def placed_ranks(tp: int, pp: int, nnodes: int) -> list[tuple[int, int]]:
    """The (pp rank, tp rank) pairs SGLang 0.5.23 starts over all nodes, in node order."""
    pp_per_node = max(pp // nnodes, 1)
    nodes_per_pp = max(nnodes // pp, 1)
    tp_per_node = tp // nodes_per_pp
    out = []
    for rank in range(nnodes):
        first_pp = pp_per_node * (rank // nodes_per_pp)
        first_tp = tp_per_node * (rank % nodes_per_pp)
        for p in range(first_pp, first_pp + pp_per_node):
            out += [(p, t) for t in range(first_tp, first_tp + tp_per_node)]
    return out


def _sizes(launch: Launch) -> tuple[int | None, int | None, int | None]:
    return multinode(launch), flag_int(launch, "tp_size"), flag_int(launch, "pp_size")


def _leader_says_it(launch: Launch, ctx: Context) -> bool:
    """A LeaderWorkerSet worker with the leader's sizes: the leader's finding covers it."""
    if launch.group is None or launch.group.role != "worker" or launch.workload is None:
        return False
    return any(
        la.group is not None
        and la.group.role == "leader"
        and la.workload is not None
        and la.workload.obj is launch.workload.obj
        and _sizes(la) == _sizes(launch)
        for la in ctx.launches
    )


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    nnodes, tp, pp = _sizes(launch)
    if nnodes is None or tp is None or pp is None or tp < 1 or pp < 1:
        return []
    if _leader_says_it(launch, ctx):
        return []
    sizes = f"--tp-size {tp}" + (f" x --pp-size {pp}" if pp > 1 else "")
    if (tp * pp) % nnodes:
        message = f"{sizes} over --nnodes {nnodes}: SGLang 0.5.23 refuses it (tp_size must be "
        message += "divisible by number of nodes)"
    elif tp * pp > MAX_RANKS:  # hostile sizes: no layout of 2**40 ranks is computed
        return []
    else:
        placed = placed_ranks(tp, pp, nnodes)
        wanted = {(p, t) for p in range(pp) for t in range(tp)}
        if len(placed) == len(wanted) and set(placed) == wanted:
            return []
        message = f"{sizes} over --nnodes {nnodes}: SGLang gives each node "
        message += f"{max(pp // nnodes, 1)} pipeline rank(s) and {tp // max(nnodes // pp, 1)} "
        message += "tensor rank(s), which does not place every rank once"
    where = launch.position_of("tp_size" if launch.parsed.is_set("tp_size") else "nnodes")
    return [diag(sys.modules[__name__], launch, where, message)]
