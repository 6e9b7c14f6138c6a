"""MN002 node-rank-not-from-index.

What it does:
    In a LeaderWorkerSet of more than one pod: flags a worker template (or a lone
    ``workerTemplate``, which LWS also runs as the leader) whose ``--node-rank`` does not
    follow ``LWS_WORKER_INDEX`` (a literal, or none: SGLang's default 0), and a leader whose
    rank is not 0. A literal 1 on the worker of a two-pod group is its index and passes.
Why it matters:
    Every pod of a worker template gets the same argv: a literal rank makes every worker
    claim the same node rank, and a missing one makes each a second rank 0. SGLang serves
    its API only on node rank 0 (other ranks answer health checks only), so a leader with
    another rank serves no requests.
Example (fails):
    workerTemplate: ... --node-rank 1 (size: 4)
Use instead:
    --node-rank $(LWS_WORKER_INDEX)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.lwsgroup import flag_int
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "MN002"
NAME = "node-rank-not-from-index"
SEVERITY = "error"
SUMMARY = "A node rank not taken from LWS_WORKER_INDEX: workers claim the same rank."
FIX = "Pass --node-rank $(LWS_WORKER_INDEX) (0 on the leader)."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    group = launch.group
    rank = flag_int(launch, "node_rank", default=0)
    if group is None or rank is None or (group.size or 0) < 2:
        return []
    written = f"--node-rank {rank}" if launch.parsed.is_set("node_rank") else "no --node-rank"
    if group.role == "leader":
        if rank == 0:
            return []
        message = f"the leader has {written}: LWS_WORKER_INDEX is 0 there, and SGLang serves "
        message += "its API only on node rank 0"
    elif group.rank_from_index is not False:
        return []
    elif group.role == "worker" and group.size == 2 and rank == 1:
        return []  # the one worker's index: correct until the group grows
    else:
        pods = "every worker" if group.role == "worker" else "the leader and every worker"
        message = f"the {group.role} template has {written} (rank {rank}), not "
        message += f"$(LWS_WORKER_INDEX): {pods} of the group claims node rank {rank}"
    return [diag(sys.modules[__name__], launch, launch.position_of("node_rank"), message)]
