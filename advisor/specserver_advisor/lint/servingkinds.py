"""Where the serving resources people deploy SGLang with keep their containers: for the
source readers, each as (pod-level fields, containers, whether they serve SGLang's HTTP API).

- OME ``ServingRuntime`` / ``ClusterServingRuntime`` (``ome.io``): ``spec.engineConfig`` and
  ``spec.decoderConfig``, each with a ``runner`` container, or ``leader.runner`` and
  ``worker.runner`` for a multi-node engine (the worker serves no API); pod-level fields
  (``volumes``...) beside the runner; also the KServe-style ``spec.containers``.
- NVIDIA Dynamo ``DynamoGraphDeployment``: ``spec.services.NAME.extraPodSpec.mainContainer``,
  the service's ``resources`` (``gpu: N``) being the container's GPUs; a Dynamo worker serves
  no SGLang HTTP (the frontend does).
- ``LeaderWorkerSet``: read by ``lwsgroup`` (the leader serves HTTP, a worker does not).

Pure; every accessor tolerates any shape (hostile YAML) and yields nothing for a bad one.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.loaders import yamlnodes

OME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
DYNAMO_KINDS = ("DynamoGraphDeployment",)
KINDS = (*OME_KINDS, *DYNAMO_KINDS)

Pod = tuple[dict[str, Any], list[Any], bool]


def _dict(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def serving_pods(doc: dict[str, Any]) -> list[Pod]:
    """The containers of an OME runtime or a Dynamo graph, with their pod-level fields."""
    spec = _dict(doc.get("spec"))
    if doc.get("kind") in OME_KINDS:
        return _ome(spec)
    if doc.get("kind") in DYNAMO_KINDS:
        return _dynamo(spec)
    return []


def _ome(spec: dict[Any, Any]) -> list[Pod]:
    out: list[Pod] = []
    if _list(spec.get("containers")):
        out.append((spec, _list(spec.get("containers")), True))
    for key in ("engineConfig", "decoderConfig"):
        cfg = _dict(spec.get(key))
        if isinstance(cfg.get("runner"), dict):
            out.append((cfg, [cfg["runner"]], True))
        for role, serves in (("leader", True), ("worker", False)):
            part = _dict(cfg.get(role))
            if isinstance(part.get("runner"), dict):
                pod = {"volumes": [*_list(cfg.get("volumes")), *_list(part.get("volumes"))]}
                out.append((pod, [part["runner"]], serves))
    return out


def _dynamo(spec: dict[Any, Any]) -> list[Pod]:
    out: list[Pod] = []
    for service in _dict(spec.get("services")).values():
        service = _dict(service)
        extra = _dict(service.get("extraPodSpec"))
        main = extra.get("mainContainer")
        if not isinstance(main, dict):
            continue
        out.append((extra, [_with_service_gpus(main, service)], False))
    return out


def _with_service_gpus(main: dict[Any, Any], service: dict[Any, Any]) -> dict[Any, Any]:
    """The main container with the service's ``resources`` (``gpu: N``) as its GPU resource,
    keeping its positions; unchanged when it has its own ``resources``."""
    if "resources" in main:
        return main
    resources = _dict(service.get("resources"))
    given = {
        section: {"nvidia.com/gpu": _dict(resources.get(section))["gpu"]}
        for section in ("limits", "requests")
        if "gpu" in _dict(resources.get(section))
    }
    if not given:
        return main
    out = yamlnodes.PMap(main)
    lc = getattr(main, "lc", None)
    if lc is not None:
        out.lc = lc
    out["resources"] = given
    return out
