"""One replica across nodes: the flags a multi-node SpecServer renders, the topology it needs.

A SpecServer with ``resources.nodes`` N > 1 is one LeaderWorkerSet group of N pods that run the
same launch; LeaderWorkerSet's environment gives each pod its place: ``--nnodes`` is the group
size, ``--node-rank`` the pod's ``LWS_WORKER_INDEX`` (0 on the leader, the only pod that serves
HTTP) and ``--dist-init-addr`` the leader's address (``LWS_LEADER_ADDRESS``) at
``DIST_INIT_PORT``. Kubernetes expands ``$(VAR)`` in container args from the container's
environment, which LeaderWorkerSet fills in each pod it creates. SGLang 0.5.23 opens its
internal ports from the dist-init port upwards (``PortArgs``: the port after it and a few more
per data-parallel rank), so the HTTP port may not sit in ``RESERVED_PORTS``.

``multinode_args`` is called by the one rendering (``args.render_spec``); ``topology_problems``
by the operator's validation and the webhook (``speccheck``), each naming the field. Pure.
"""

from __future__ import annotations

from specserver_advisor.models import AutoSpeculation, SpecServerSpec
from specserver_advisor.sglang.flags import parse_server_argv

#: The leader's port for torch.distributed's rendezvous (the LeaderWorkerSet SGLang example's).
DIST_INIT_PORT = 20000
#: Ports SGLang opens from the dist-init port on (``PortArgs``: its ZMQ ports follow it, one
#: more per data-parallel rank; a replica has at most 64 x 16 GPUs, so at most 1,024 ranks).
RESERVED_PORTS = range(DIST_INIT_PORT, DIST_INIT_PORT + 1100)
#: LeaderWorkerSet's environment in every pod of a group (the controller injects it).
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
#: What ``as_leader`` puts for the leader's address (a name, never resolved by the advisor).
LEADER_STAND_IN = "lws-leader"
#: GPUs one node of a replica may hold (the largest GPU servers carry 16).
MAX_GPUS_PER_NODE = 16


def multinode_args(nodes: int) -> list[tuple[str, str]]:
    """The flags a replica across ``nodes`` nodes adds (none on one node), in order."""
    if nodes <= 1:
        return []
    return [
        ("--nnodes", str(nodes)),
        ("--node-rank", f"$({WORKER_INDEX_ENV})"),
        ("--dist-init-addr", f"$({LEADER_ADDRESS_ENV}):{DIST_INIT_PORT}"),
    ]


def as_leader(argv: list[str], nodes: int) -> list[str]:
    """``argv`` as the group's leader runs it: LeaderWorkerSet's ``$(VAR)`` references expanded
    (rank 0, the group size, a stand-in for the leader's address), so SGLang's parser can judge
    the launch the way the leader's process will see it. Other text is left as it is."""
    values = {
        WORKER_INDEX_ENV: "0",
        GROUP_SIZE_ENV: str(nodes),
        LEADER_ADDRESS_ENV: LEADER_STAND_IN,
    }
    out = []
    for item in argv:
        for name, value in values.items():
            item = item.replace(f"$({name})", value)
        out.append(item)
    return out


def gpus_per_node(spec: SpecServerSpec) -> int:
    """GPUs each pod of a replica requests (all of them on one node)."""
    res = spec.resources
    return max(1, res.gpus // max(1, res.nodes))


def rolling_surge(spec: SpecServerSpec) -> int:
    """Replicas (pods on one node, LeaderWorkerSet groups across nodes) a RollingUpdate switch
    starts next to the old ones: ``autoSpeculation.maxSurge`` when set, else 1 on one node (a
    spare GPU set) and 0 across nodes (a spare group is a whole set of nodes). With 0 the old
    engine goes first: that switch does not keep the old mode serving."""
    auto = spec.auto_speculation
    if auto is not None and auto.max_surge is not None:
        return auto.max_surge
    return 0 if spec.resources.nodes > 1 else 1


def effective_policy(spec: SpecServerSpec) -> AutoSpeculation:
    """The spec's Auto policy with its RollingUpdate surge settled (``rolling_surge``), so the
    switch budget knows whether a RollingUpdate switch keeps the old mode serving."""
    policy = spec.auto_speculation or AutoSpeculation()
    return policy.model_copy(update={"max_surge": rolling_surge(spec)})


def topology_problems(spec: SpecServerSpec) -> list[str]:
    """Why the GPUs, nodes and parallel sizes do not make one launch, each naming its field.

    ``--tp-size`` is ``resources.gpus`` (owned); SGLang 0.5.23 runs tp x pp GPUs per
    data-parallel rank, and data parallelism without DP attention multiplies them again, so
    extraArgs' ``--pp-size`` and ``--dp-size`` must leave the product at ``resources.gpus``.
    """
    res, out = spec.resources, list[str]()
    if res.gpus % res.nodes:
        out.append(
            f"spec.resources.gpus: {res.gpus} GPUs do not divide over spec.resources.nodes = "
            f"{res.nodes} (each node runs the same share of the tensor-parallel group)"
        )
    elif res.gpus // res.nodes > MAX_GPUS_PER_NODE:
        out.append(
            f"spec.resources.gpus: {res.gpus // res.nodes} GPUs per node is above the maximum "
            f"{MAX_GPUS_PER_NODE}; set spec.resources.nodes to spread them"
        )
    if res.nodes > 1 and spec.engine.port in RESERVED_PORTS:
        out.append(
            f"spec.engine.port: {spec.engine.port} clashes with the ports SGLang opens from the "
            f"multi-node rendezvous port {DIST_INIT_PORT} ({RESERVED_PORTS.start}-"
            f"{RESERVED_PORTS.stop - 1})"
        )
    values = parse_server_argv(list(spec.engine.extra_args)).values
    for dest, value in sorted(values.items()):
        if res.nodes > 1 and dest.endswith("_port") and value in RESERVED_PORTS:
            flag = "--" + dest.replace("_", "-")
            out.append(
                f"spec.engine.extraArgs: {flag} {value} clashes with the ports SGLang opens "
                f"from the multi-node rendezvous port ({RESERVED_PORTS.start}-"
                f"{RESERVED_PORTS.stop - 1})"
            )
    pp = _size(values.get("pp_size"))
    dp = _size(values.get("dp_size"))
    if pp > 1:
        out.append(
            f"spec.engine.extraArgs: --pp-size {pp} would run tp x pp = {res.gpus * pp} GPUs "
            f"(--tp-size is spec.resources.gpus = {res.gpus}); pipeline parallelism is not "
            "rendered, spread the GPUs with spec.resources.nodes instead"
        )
    if dp > 1 and not values.get("enable_dp_attention"):
        out.append(
            f"spec.engine.extraArgs: --dp-size {dp} without --enable-dp-attention runs {dp} "
            f"copies of the {res.gpus}-GPU tensor-parallel group ({res.gpus * dp} GPUs); use "
            "spec.replicas for more copies"
        )
    elif dp > 1 and res.gpus % dp:
        out.append(
            f"spec.engine.extraArgs: --dp-size {dp} with --enable-dp-attention must divide "
            f"--tp-size = spec.resources.gpus = {res.gpus}"
        )
    return out


def _size(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 1
