"""Render a SpecServer's children from the jinja2 templates in ``templates/`` (pure).

``build_children`` returns parsed dicts (the engine workload and the Service) with owner
references and labels; callers never see YAML strings. The workload is a Deployment on one node
(``resources.nodes`` 1) and a LeaderWorkerSet across nodes: one group of ``nodes`` pods per
replica, leader and workers on the same launch (``pod.yaml.j2`` renders both pod specs; only
the leader serves the API on the named port ``http``, a worker is probed on SGLang's
health-only server, every pod runs the preflight), and the Service on the serving group's
leader. Called by children.py; no API access, no clock.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jinja2
import yaml

from specserver_advisor.launch.expansion import (
    container_argv,
    container_env,
    escape,
    expand,
    mapping_for,
    operator_positions,
    render_args,
    render_env,
)
from specserver_advisor.launch.model import EngineConfig
from specserver_advisor.launch.multinode import (
    GROUP_SIZE_ENV,
    LEADER_ADDRESS_ENV,
    LEADER_STAND_IN,
    WORKER_INDEX_ENV,
    gpus_per_node,
)
from specserver_advisor.models import API_VERSION, KIND, SpecServer
from specserver_advisor.policy.model import SpecMode
from specserver_operator.core import kinds
from specserver_operator.core.enginefs import (
    engine_env,
    writable_mounts,
    writable_volumes,
)
from specserver_operator.core.names import child_name
from specserver_operator.core.podpolicy import pod_resources, shm_gib

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("specserver_operator.core", "templates"),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,
)
MANAGED_BY = "specserver"
# The workload kinds that run engine pods are the table's (kinds.py); named here for callers.
DEPLOYMENT = kinds.DEPLOYMENT
LEADER_WORKER_SET = kinds.LEADER_WORKER_SET
WORKLOAD_KINDS = kinds.WORKLOAD_KINDS
WORKER_INDEX_LABEL = kinds.WORKER_INDEX_LABEL


def labels(server: SpecServer, mode: str) -> dict[str, str]:
    """Labels on every child and pod."""
    name = child_name(server.metadata.name or "")
    return {
        "app.kubernetes.io/name": "sglang",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": "engine",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "specserver.io/name": name,
        "specserver.io/mode": mode,
    }


def queue_labels(server: SpecServer) -> dict[str, str]:
    """Kueue's labels from ``spec.scheduling`` (none when unset: not queued by Kueue)."""
    sched = server.spec.scheduling
    out = {}
    if sched is not None and sched.queue_name:
        out[kinds.QUEUE_LABEL] = sched.queue_name
    if sched is not None and sched.priority_class_name:
        out[kinds.PRIORITY_LABEL] = sched.priority_class_name
    return out


def owner_reference(server: SpecServer, uid: str) -> dict[str, Any]:
    """The SpecServer as controller owner (deleting it deletes the children)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": server.metadata.name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _volume(server: SpecServer) -> dict[str, Any] | None:
    src = server.spec.model_source
    vol = src.volume if src else None
    if vol is None:
        return None
    if vol.persistent_volume_claim_name:
        return {
            "persistentVolumeClaim": {
                "claimName": vol.persistent_volume_claim_name,
                "readOnly": True,
            }
        }
    if vol.host_path:
        return {"hostPath": {"path": vol.host_path, "type": "Directory"}}
    return None


def _env(server: SpecServer) -> list[dict[str, Any]]:
    """Every engine and preflight container's environment: the writable caches (enginefs.py),
    the hub's read-only model cache, the endpoint and token, then the spec's own variables."""
    src = server.spec.model_source
    env: list[dict[str, Any]] = list(engine_env())
    if src and src.volume and src.volume.hf_cache:
        # The volume is an HF cache (the layout of HF_HOME): the hub reads models from its hub/
        # and writes nothing there (read-only: offline, the snapshot as it is); HF_HOME itself
        # (token, xet and asset caches, locks) stays writable (enginefs.ENGINE_ENV).
        env.append({"name": "HF_HUB_CACHE", "value": f"{src.volume.mount_path.rstrip('/')}/hub"})
        env.append({"name": "HF_HUB_OFFLINE", "value": "1"})
    if src and src.hf_endpoint:
        env.append({"name": "HF_ENDPOINT", "value": src.hf_endpoint})
    if src and src.hf_token_secret_ref:
        ref = src.hf_token_secret_ref
        env.append(
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}
        )
    env += [{"name": e.name, "value": e.value} for e in server.spec.engine.env]
    return env


def workload_kind(server: SpecServer) -> str:
    """The kind that runs the engine: a Deployment on one node, a LeaderWorkerSet across nodes."""
    return kinds.for_nodes(server.spec.resources.nodes).kind


def workload_name(server: SpecServer) -> str:
    """The Recreate/RollingUpdate workload's name: ``<name>`` for a Deployment, ``<name>-lws``
    for a LeaderWorkerSet (its controller creates a headless Service named after it, which
    would clash with the SpecServer's own Service ``<name>``)."""
    return kinds.of(workload_kind(server)).single_name(child_name(server.metadata.name or ""))


def max_surge(server: SpecServer, strategy: str) -> int:
    """Surge pods (Deployment) or groups (LeaderWorkerSet) a template change may start: only
    under RollingUpdate; ``autoSpeculation.maxSurge`` when set, else 1 for a Deployment (one
    spare GPU set) and 0 for a LeaderWorkerSet (a spare group is a whole set of nodes): the
    kind's ``default_max_surge`` (kinds.py; the advisor's ``rolling_surge`` prices the same)."""
    if strategy != "RollingUpdate":
        return 0
    auto = server.spec.auto_speculation
    if auto is not None and auto.max_surge is not None:
        return auto.max_surge
    return kinds.of(workload_kind(server)).default_max_surge


def _hashed_resources(server: SpecServer) -> dict[str, Any]:
    """The resources as hashed: a field added later with its default left out, so that an
    upgraded operator gives an unchanged SpecServer the hash it had (no rollout on upgrade)."""
    out = server.spec.resources.model_dump(mode="json")
    if out.get("nodes") == 1:
        del out["nodes"]
    return out


def engine_args(server: SpecServer, cfg: EngineConfig) -> list[str]:
    """The engine container's ``args``: the judged argv with the spec's text escaped, so the
    kubelet's ``$(VAR)`` expansion gives back exactly what was judged (expansion.py)."""
    return render_args(cfg.args, server.spec.resources.nodes)


def preflight_args(server: SpecServer, cfg: EngineConfig) -> list[str]:
    """The preflight init container's ``args`` (the same launch after ``--``), escaped alike."""
    head = ["preflight", "--gpu-type", escape(server.spec.resources.gpu_type), "--"]
    return [*head, *engine_args(server, cfg)]


def rendered_env(server: SpecServer) -> list[dict[str, Any]]:
    """The engine's ``env`` as written into both containers (every spec value escaped)."""
    return render_env(_env(server))


#: The containers' commands (pod.yaml.j2 writes these).
ENGINE_COMMAND = ["sglang", "serve"]
PREFLIGHT_COMMAND = ["specserver-engine"]


def group_env(server: SpecServer) -> dict[str, str]:
    """What LeaderWorkerSet puts in a group's leader (its address a stand-in), for judging."""
    nodes = server.spec.resources.nodes
    if nodes <= 1:
        return {}
    return {WORKER_INDEX_ENV: "0", GROUP_SIZE_ENV: str(nodes), LEADER_ADDRESS_ENV: LEADER_STAND_IN}


def unexpanded_problem(server: SpecServer, cfg: EngineConfig) -> str | None:
    """Why the containers this config renders would not run what the checks judged (None:
    they run it). The checks judge ``cfg.args`` and the spec's env as written (the operator's
    LeaderWorkerSet references standing for the leader's values); the kubelet expands the
    rendered ``command``, ``args`` and ``env`` (expansion.py); the two must be equal, or the
    webhook and ConfigValid judged something else than what the engine and the preflight run."""
    injected = group_env(server)
    keep = operator_positions(cfg.args, server.spec.resources.nodes)
    judged = [expand(a, mapping_for(injected)) if i in keep else a for i, a in enumerate(cfg.args)]
    env = rendered_env(server)
    head = ["preflight", "--gpu-type", server.spec.resources.gpu_type, "--"]
    for name, command, args, expected in (
        ("engine", ENGINE_COMMAND, engine_args(server, cfg), [*ENGINE_COMMAND, *judged]),
        (
            "preflight",
            PREFLIGHT_COMMAND,
            preflight_args(server, cfg),
            [*PREFLIGHT_COMMAND, *head, *judged],
        ),
    ):
        ran = container_argv({"command": command, "args": args, "env": env}, injected)
        if ran != expected:
            n = max(len(ran), len(expected))
            got, want = [*ran, *[""] * (n - len(ran))], [*expected, *[""] * (n - len(expected))]
            at = next(i for i in range(n) if got[i] != want[i])
            return (
                f"the {name} container would run {got[at]!r} where {want[at]!r} was "
                "checked (Kubernetes expands $(VAR) in args)"
            )
    environment = container_env(env, injected)
    written = {item["name"]: item.get("value") for item in _env(server)}  # the last one wins
    for key, value in written.items():
        if value is not None and environment.get(key) != value:
            return f"env {key} would be {environment.get(key)!r} where {value!r} was checked"
    return None


def config_hash(cfg: EngineConfig, server: SpecServer) -> str:
    """Changes exactly when the pod template would."""
    material: dict[str, Any] = {
        "args": cfg.args,
        "image": server.spec.engine.image,
        "env": _env(server),
        "resources": _hashed_resources(server),
        "requests": pod_resources(server.spec, cfg.weight_gib),
        "volume": _volume(server),
    }
    if engine_args(server, cfg) != cfg.args or rendered_env(server) != _env(server):
        material["escaped"] = True  # text with a "$" is now rendered escaped (expansion.py)
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


DEFAULT_PREFLIGHT_IMAGE = "ghcr.io/specserver/specserver-engine:0.1.0-sglang0.5.23"


def _context(
    server: SpecServer, cfg: EngineConfig, preflight_image: str, strategy: str
) -> dict[str, Any]:
    spec = server.spec
    mode = SpecMode.of(cfg.speculative).value
    res = spec.resources
    limits, requests = pod_resources(spec, cfg.weight_gib)
    return {
        "name": workload_name(server),
        "namespace": server.metadata.namespace,
        "labels": labels(server, mode),
        "selector": {"specserver.io/name": child_name(server.metadata.name or "")},
        "config_hash": config_hash(cfg, server),
        "replicas": spec.replicas,
        "mode": mode,
        "image": spec.engine.image,
        "port": spec.engine.port,
        "serve_args": engine_args(server, cfg),
        "strategy": strategy,
        "max_surge": max_surge(server, strategy),
        "nodes": res.nodes,
        "preflight_image": preflight_image,
        "preflight_args": preflight_args(server, cfg),
        "engine_command": ENGINE_COMMAND,
        "preflight_command": PREFLIGHT_COMMAND,
        "env": rendered_env(server),
        "limits": limits,
        "requests": requests,
        "shm_size": f"{shm_gib(gpus_per_node(spec))}Gi",
        "startup_failures": max(3, spec.engine.startup_timeout_seconds // 10),
        "node_selector": res.node_selector,
        "tolerations": [t.model_dump(by_alias=True, exclude_none=True) for t in res.tolerations],
        "volume": _volume(server),
        "writable_mounts": writable_mounts(),
        "writable_volumes": writable_volumes(),
        "mount_path": spec.model_source.volume.mount_path
        if spec.model_source and spec.model_source.volume
        else "/models",
    }


def _pod_spec(context: dict[str, Any], leader: bool) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.load(
        ENV.get_template("pod.yaml.j2").render(**context, leader=leader), Loader=_LOADER
    )
    return spec


def _render(template: str, context: dict[str, Any], server: SpecServer, uid: str) -> dict[str, Any]:
    kind = kinds.by_template(template)  # None: the Service, which renders no pod spec
    pods = {key: _pod_spec(context, leader) for key, leader in kind.pod_specs} if kind else {}
    text = ENV.get_template(template).render(**context, **pods)
    obj: dict[str, Any] = yaml.load(text, Loader=_LOADER)
    obj["metadata"]["ownerReferences"] = [owner_reference(server, uid)]
    if kind is not None:
        kinds.set_queue_labels(obj, queue_labels(server))
    return obj


WORKLOAD_TEMPLATES = {k.kind: k.template for k in kinds.KINDS.values()}


def service_selector(server: SpecServer, mode: str | None = None) -> dict[str, str]:
    """What the Service selects: the SpecServer's pods (BlueGreen: of the serving ``mode``);
    across nodes, only each group's leader (the only pod with the HTTP port)."""
    selector = {"specserver.io/name": child_name(server.metadata.name or "")}
    if mode is not None:
        selector["specserver.io/mode"] = mode
    leader = kinds.of(workload_kind(server)).leader_selector
    if leader is not None:
        selector[leader[0]] = leader[1]
    return selector


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def build_children(
    server: SpecServer,
    uid: str,
    cfg: EngineConfig,
    preflight_image: str = DEFAULT_PREFLIGHT_IMAGE,
    strategy: str = "Recreate",
    leader_service: bool = True,
    surge: int | None = None,
) -> list[dict[str, Any]]:
    """The engine workload (Deployment or LeaderWorkerSet) and the Service for a validated
    engine config.

    The engine container runs ``sglang serve`` in ``spec.engine.image`` (a stock SGLang image
    works); the init container runs ``specserver-engine preflight`` from ``preflight_image``
    (engine-image/Dockerfile) on the same arguments and files. ``leader_service`` False keeps a
    multi-node SpecServer's Service on every engine pod of its name (the Deployment it is
    leaving still serves until the LeaderWorkerSet is Ready: children.py). ``surge`` overrides
    RollingUpdate's surge (0: a blocked switch's Recreate fallback frees a pod's GPUs first).
    """
    context = _context(server, cfg, preflight_image, strategy)
    if surge is not None:
        context["max_surge"] = surge
    workload = _render(WORKLOAD_TEMPLATES[workload_kind(server)], context, server, uid)
    context["name"] = child_name(server.metadata.name or "")
    if leader_service:
        context["selector"] = service_selector(server)
    return [workload, _render("service.yaml.j2", context, server, uid)]


def build_blue_green(
    server: SpecServer,
    uid: str,
    configs: dict[str, EngineConfig],
    replicas: dict[str, int],
    serve: str,
    preflight_image: str = DEFAULT_PREFLIGHT_IMAGE,
    leader_service: bool = True,
) -> list[dict[str, Any]]:
    """BlueGreen children: one workload per mode in ``configs`` and the Service on ``serve``.

    Each workload (Deployment, or LeaderWorkerSet across nodes) is ``<name>-<mode>`` with its
    own selector (the mode label), so the two never adopt each other's pods; the Service
    selects the serving mode only (across nodes: its groups' leaders, unless
    ``leader_service`` is False: a Deployment of that mode still serves, children.py).
    """
    name = child_name(server.metadata.name or "")
    template = WORKLOAD_TEMPLATES[workload_kind(server)]
    children = []
    for mode, cfg in sorted(configs.items()):
        context = _context(server, cfg, preflight_image, "Recreate")
        context["name"] = f"{name}-{mode}"
        context["replicas"] = replicas.get(mode, 0)
        context["selector"] = {"specserver.io/name": name, "specserver.io/mode": mode}
        children.append(_render(template, context, server, uid))
    context = _context(server, configs[serve], preflight_image, "Recreate")
    context["name"] = name
    context["selector"] = (
        service_selector(server, serve)
        if leader_service
        else {"specserver.io/name": name, "specserver.io/mode": serve}
    )
    children.append(_render("service.yaml.j2", context, server, uid))
    return children
