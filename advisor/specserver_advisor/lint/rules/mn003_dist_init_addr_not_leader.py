"""MN003 dist-init-addr-not-leader.

What it does:
    Flags a launch with ``--nnodes`` > 1 without ``--dist-init-addr``, and, in a Kubernetes
    pod, one whose address is a loopback or unspecified host; in a LeaderWorkerSet, any
    address but ``$(LWS_LEADER_ADDRESS)``. Not when ``SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE``
    is set (SGLang 0.5.23 then takes the init method from it).
Why it matters:
    Without it SGLang 0.5.23 initialises torch.distributed at its own host and a random
    port on every node, so the nodes never meet; a loopback address in a pod is the pod
    itself; a fixed address in a LeaderWorkerSet sends every group's workers to one leader.
Example (fails):
    --nnodes 2 --node-rank $(LWS_WORKER_INDEX)
Use instead:
    --nnodes 2 --node-rank $(LWS_WORKER_INDEX) --dist-init-addr $(LWS_LEADER_ADDRESS):20000
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.lwsgroup import LEADER_ADDRESS, multinode
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules._base import diag

CODE = "MN003"
NAME = "dist-init-addr-not-leader"
SEVERITY = "error"
SUMMARY = "A multi-node launch without --dist-init-addr at the leader: nodes never meet."
FIX = "Pass --dist-init-addr $(LWS_LEADER_ADDRESS):PORT (the leader's address) on every node."
APPLIES_TO = ("server",)
LOOPBACK = ("localhost", "0.0.0.0", "::", "::1")
OVERRIDE = "SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE"


def host_of(addr: str) -> str:
    """The host of ``HOST:PORT`` / ``[V6]:PORT`` (the whole value without a port)."""
    if addr.startswith("["):
        return addr[1:].split("]", 1)[0]
    return addr.rsplit(":", 1)[0] if addr.count(":") == 1 else addr


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    nnodes = multinode(launch)
    if nnodes is None or launch.env.get(OVERRIDE) or "dist_init_addr" in launch.unresolved_fields:
        return []
    addr = launch.parsed.values.get("dist_init_addr")
    in_pod = launch.workload is not None and launch.workload.kind != "compose"
    if not addr:
        message = f"--nnodes {nnodes} without --dist-init-addr: each node initialises at its "
        message += "own address and the nodes never meet"
    else:
        host = host_of(str(addr))
        if launch.group is not None and host != LEADER_ADDRESS:
            message = f"--dist-init-addr {addr} in a LeaderWorkerSet: not the group's leader "
            message += "($(LWS_LEADER_ADDRESS))"
        elif in_pod and (host in LOOPBACK or host.startswith("127.")):
            message = f"--dist-init-addr {addr} is the pod itself: the other nodes cannot "
            message += "reach it"
        else:
            return []
    where = launch.position_of("dist_init_addr" if addr else "nnodes")
    return [diag(sys.modules[__name__], launch, where, message)]
