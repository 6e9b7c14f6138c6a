"""MN001 nnodes-not-group-size.

What it does:
    Compares a LeaderWorkerSet launch's ``--nnodes`` (SGLang's default 1 when absent) with
    the group's size, ``leaderWorkerTemplate.size`` (LWS's default 1), on the leader and on
    the workers. ``--nnodes $(LWS_GROUP_SIZE)`` is the size by construction.
Why it matters:
    SGLang splits the tensor/pipeline ranks over ``--nnodes`` nodes and waits for all of
    them. With more nodes than pods the group never forms (the leader waits for ever); with
    fewer, the extra pods start ranks no one waits for, or each pod serves alone.
Example (fails):
    size: 3 with --nnodes 2
Use instead:
    --nnodes $(LWS_GROUP_SIZE)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.lwsgroup import flag_int
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "MN001"
NAME = "nnodes-not-group-size"
SEVERITY = "error"
SUMMARY = "--nnodes differs from the LeaderWorkerSet's size: the group never forms."
FIX = "Pass --nnodes $(LWS_GROUP_SIZE) (or the size itself) on the leader and the workers."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    group = launch.group
    nnodes = flag_int(launch, "nnodes")
    if group is None or group.size is None or nnodes is None or nnodes == group.size:
        return []
    given = f"--nnodes {nnodes}" if launch.parsed.is_set("nnodes") else "no --nnodes (1)"
    return [
        diag(
            sys.modules[__name__],
            launch,
            launch.position_of("nnodes"),
            f"{given} on the {group.role} template, but the LeaderWorkerSet's group has "
            f"{group.size} pod{'s' if group.size != 1 else ''} (leaderWorkerTemplate.size)",
        )
    ]
