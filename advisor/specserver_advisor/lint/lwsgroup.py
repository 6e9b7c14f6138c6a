"""A LeaderWorkerSet group as the linter reads it (LWS ``leaderworkerset.x-k8s.io/v1``).

``sources`` calls it for each LeaderWorkerSet document: the leader and worker templates (no
``leaderTemplate``: LWS runs the worker template as the leader too, a "shared" template), the
environment LWS injects into every container (``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE``,
``LWS_WORKER_INDEX``: 0 on the leader, 1..size-1 on the workers), and the Services and
PodMonitors of the same file. The multi-node rules (MN*) ask it which pods such an object
selects, from the template's labels and the ``leaderworkerset.sigs.k8s.io/*`` labels LWS adds.
Pure; every accessor tolerates any shape (hostile YAML).
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.launch.multinode import LEADER_STAND_IN
from specserver_advisor.lint.model import Group, Launch, Position, Selecting

#: The value the linter gives ``$(LWS_LEADER_ADDRESS)`` (the leader pod's DNS name in LWS): the
#: launch model's stand-in, so both read a group's launch alike.
LEADER_ADDRESS = LEADER_STAND_IN
LABELS = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = LABELS + "name"
INDEX_LABEL = LABELS + "worker-index"
GROUP_INDEX_LABEL = LABELS + "group-index"
#: SGLang 0.5.23's default ``--port`` and ``--host``.
DEFAULT_PORT = 30000
DEFAULT_HOST = "127.0.0.1"


def _dict(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def templates(doc: dict[str, Any]) -> list[tuple[str, dict[Any, Any], bool]]:
    """(role, pod template, whether it serves SGLang's HTTP API) of each template given."""
    tmpl = _dict(_dict(doc.get("spec")).get("leaderWorkerTemplate"))
    leader, worker = tmpl.get("leaderTemplate"), tmpl.get("workerTemplate")
    out: list[tuple[str, dict[Any, Any], bool]] = []
    if isinstance(leader, dict) and isinstance(leader.get("spec"), dict):
        out.append(("leader", leader, True))
    if isinstance(worker, dict) and isinstance(worker.get("spec"), dict):
        shared = not isinstance(leader, dict)
        out.append(("shared", worker, True) if shared else ("worker", worker, False))
    return out


def group_size(doc: dict[str, Any]) -> int | None:
    """``leaderWorkerTemplate.size`` (LWS's default 1 when absent; None when not a number)."""
    tmpl = _dict(_dict(doc.get("spec")).get("leaderWorkerTemplate"))
    size = tmpl.get("size", 1)
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def injected_env(size: int | None, role: str, probe: bool = False) -> dict[str, str]:
    """The env LWS injects into a container of ``role``; ``probe``: another worker's index
    (a launch whose ``--node-rank`` changes with it takes the rank from the index)."""
    index = {"leader": 0, "worker": 1, "shared": 0}.get(role, 1) + (1 if probe else 0)
    out = {"LWS_LEADER_ADDRESS": LEADER_ADDRESS, "LWS_WORKER_INDEX": str(index)}
    if size is not None:
        out["LWS_GROUP_SIZE"] = str(size)
    return out


def group_of(doc: dict[str, Any], role: str, template: dict[Any, Any]) -> Group:
    meta = _dict(doc.get("metadata"))
    labels = _dict(_dict(template.get("metadata")).get("labels"))
    return Group(
        role,
        group_size(doc),
        _str(meta.get("name")),
        _str(meta.get("namespace")),
        {str(k): str(v) for k, v in labels.items()},
    )


def rank_follows_index(launch: Launch, probe: Launch) -> bool | None:
    """Whether ``--node-rank`` changed when only ``LWS_WORKER_INDEX`` did (None: unknown)."""
    if "node_rank" in launch.unresolved_fields | probe.unresolved_fields:
        return None
    return bool(launch.parsed.values.get("node_rank") != probe.parsed.values.get("node_rank"))


def selecting(doc: dict[str, Any], at: Position) -> Selecting | None:
    """A Service's ``spec.selector`` or a PodMonitor's ``spec.selector.matchLabels`` (None:
    another kind, no selector, or ``matchExpressions`` the rules do not evaluate)."""
    kind, spec = doc.get("kind"), _dict(doc.get("spec"))
    meta = _dict(doc.get("metadata"))
    if kind == "Service":
        labels = spec.get("selector")
        if not isinstance(labels, dict) or not labels:  # no selector: no endpoints managed
            return None
    elif kind == "PodMonitor":
        selector = spec.get("selector")
        if not isinstance(selector, dict) or selector.get("matchExpressions"):
            return None
        labels = _dict(selector.get("matchLabels"))  # {}: every pod in the namespace
    else:
        return None
    return Selecting(
        str(kind),
        _str(meta.get("name")) or "?",
        _str(meta.get("namespace")),
        {str(k): str(v) for k, v in labels.items()},
        at,
    )


def selects_workers(sel: Selecting, group: Group) -> bool | None:
    """Whether ``sel`` selects the group's worker pods (None: a label LWS sets whose value
    the file does not show, such as the group key)."""
    if sel.namespace and group.namespace and sel.namespace != group.namespace:
        return False
    for key, value in sel.labels.items():
        if key == INDEX_LABEL:
            index = _index(value)
            if not index or (group.size is not None and index >= group.size):
                return False
        elif key == NAME_LABEL:
            if value != group.name:
                return False
        elif key == GROUP_INDEX_LABEL:
            if _index(value) is None:
                return False
        elif key.startswith(LABELS):
            return None
        elif group.labels.get(key) != value:
            return False
    return True


def _index(value: str) -> int | None:
    """A label's value as LWS writes an index (a short decimal), else None."""
    ok = value.isascii() and value.isdigit() and len(value) <= 18
    return int(value) if ok else None


def listen_port(launch: Launch) -> int | None:
    """The port this node's SGLang listens on: its own ``--port`` (SGLang's default when
    unset; None when a variable the file does not set supplies it). Rank 0 serves the API
    there, a rank >= 1 its health server (``MN006``)."""
    value = launch.parsed.values.get("port", DEFAULT_PORT)
    ok = isinstance(value, int) and not isinstance(value, bool)
    return value if ok and "port" not in launch.unresolved_fields else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def flag_int(launch: Launch, field_name: str, default: int = 1) -> int | None:
    """An integer flag's value (SGLang's default when absent; None when a variable the file
    does not set supplies it)."""
    if field_name in launch.unresolved_fields:
        return None
    value = launch.parsed.values.get(field_name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def multinode(launch: Launch) -> int | None:
    """The launch's ``--nnodes`` when it is more than one node (else None)."""
    nnodes = flag_int(launch, "nnodes")
    return nnodes if nnodes is not None and nnodes > 1 else None
