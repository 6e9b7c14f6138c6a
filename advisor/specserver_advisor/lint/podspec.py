"""What the pod-spec rules read from a workload: GPUs, volumes, probes, env, image, for
Kubernetes pod specs and docker-compose services alike. Pure; every accessor tolerates any
shape (the input is hostile YAML) and answers None when the field is absent or malformed.
"""

from __future__ import annotations

import re
from typing import Any

from specserver_advisor.lint.model import Launch, Position, Workload

HF_CACHE_DEFAULT = "/root/.cache/huggingface"
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN", "HF_API_TOKEN")


def _dict(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


SIZES = ("tp_size", "pp_size", "dp_size", "nnodes", "enable_dp_attention")


def gpus_needed(launch: Launch) -> int | None:
    """GPUs one pod (node) of this launch uses: tp x pp (x dp without DP attention) / nnodes.

    None when one of those comes from a variable the linter could not resolve.
    """
    v = launch.parsed.values
    if launch.unresolved_fields & set(SIZES):
        return None

    def size(name: str) -> int:
        n = _int(v.get(name, 1))
        return n if n and n > 0 else 1

    total = size("tp_size") * size("pp_size")
    if not v.get("enable_dp_attention"):
        total *= size("dp_size")
    return max(1, total // size("nnodes"))


#: A compose / envsubst ``${VAR:-default}`` (or ``${VAR-default}``, ``:=``, ``=``) reference.
DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-=])([^}]*)\}")


def with_defaults(value: Any) -> tuple[str, list[str]]:
    """A value with each ``${VAR:-default}`` replaced by its default (what compose and envsubst
    give when VAR is unset), and the names of the variables whose default decided it."""
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        names.append(m.group(1))
        return m.group(3)

    return DEFAULTED.sub(sub, str(value)), names


def _count(value: Any, names: list[str]) -> int | None:
    text, used = with_defaults(value)
    names += used
    return _int(text)


def gpu_limit(w: Workload) -> int | None:
    """GPUs the container is given (None: no GPU resource at all; compose "all": -1); a count
    written as ``${VAR:-default}`` is read as its default (``gpu_count_defaults`` names VAR)."""
    return gpu_count(w)[0]


def gpu_count_defaults(w: Workload) -> list[str]:
    """The variables whose ``${VAR:-default}`` default decided the container's GPU count."""
    return gpu_count(w)[1]


def gpu_count(w: Workload) -> tuple[int | None, list[str]]:
    names: list[str] = []
    if w.kind == "compose":
        return _compose_gpus(w.container, names), names
    resources = _dict(_dict(w.container).get("resources"))
    found: int | None = None
    for section in ("limits", "requests"):
        for key, value in _dict(resources.get(section)).items():
            if str(key).endswith("/gpu") or str(key).endswith(".com/gpu"):
                n = _count(value, names)
                if n is not None:
                    found = n if found is None else max(found, n)
    return found, names


def _compose_gpus(service: Any, names: list[str]) -> int | None:
    service = _dict(service)
    if "gpus" in service:
        text, used = with_defaults(service["gpus"])
        names += used
        return -1 if text.strip() == "all" else _int(text)
    if service.get("runtime") == "nvidia":
        return -1
    reservations = _dict(_dict(_dict(service.get("deploy")).get("resources")).get("reservations"))
    for device in _list(reservations.get("devices")):
        device = _dict(device)
        if (
            "gpu" in [str(c) for c in _list(device.get("capabilities"))]
            or device.get("driver") == "nvidia"
        ):
            if "device_ids" in device:
                ids = device["device_ids"]
                items = ids if isinstance(ids, list) else [ids]
                total = 0
                for item in items:  # "${GPUS:-0,1}" is two devices when GPUS is unset
                    text, used = with_defaults(item)
                    names += used
                    total += len([d for d in text.split(",") if d.strip()])
                return total
            count = device.get("count", "all")
            text, used = with_defaults(count)
            names += used
            return -1 if text.strip() == "all" else _int(text)
    return None


def volume_at(w: Workload, path: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(volume, mount) of the container's mount covering ``path`` (the deepest one)."""
    container = _dict(w.container)
    best: tuple[dict[str, Any], dict[str, Any]] | None = None
    depth = -1
    volumes = {str(_dict(v).get("name")): _dict(v) for v in _list(_dict(w.pod).get("volumes"))}
    for mount in _list(container.get("volumeMounts")):
        mount = _dict(mount)
        mount_path = str(mount.get("mountPath", "")).rstrip("/") or "/"
        covers = path == mount_path or path.startswith(mount_path.rstrip("/") + "/")
        if covers and len(mount_path) > depth and str(mount.get("name")) in volumes:
            best, depth = (volumes[str(mount.get("name"))], mount), len(mount_path)
    return best


def env_value(w: Workload, name: str) -> tuple[str | None, bool]:
    """(literal value, is_literal) of an env var in the container (not a secret reference)."""
    raw = _dict(w.container).get("env") or _dict(w.container).get("environment")
    if isinstance(raw, dict):
        if name in raw:
            value = raw[name]
            return (None if value is None else str(value)), value is not None
        return None, False
    for item in _list(raw):
        if isinstance(item, dict) and item.get("name") == name:
            if "value" in item and item.get("value") is not None:
                return str(item["value"]), True
            return None, False
        if isinstance(item, str) and item.split("=", 1)[0] == name:
            return (item.split("=", 1)[1] if "=" in item else None), "=" in item
    return None, False


def interpolated(value: str) -> bool:
    """A compose ``${VAR}`` / Kubernetes ``$(VAR)`` reference rather than a literal."""
    return (
        re.fullmatch(r"\$\{[^}]+\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\([A-Za-z_][A-Za-z0-9_]*\)", value)
        is not None
    )


def hf_cache_dir(w: Workload) -> str:
    """Where the engine caches Hugging Face downloads in this container."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        value, literal = env_value(w, name)
        if literal and value and value.startswith("/"):
            return value.rstrip("/")
    return HF_CACHE_DEFAULT


def container_position(launch: Launch, key: str | None = None) -> Position:
    """Where a container field is (the container itself when absent)."""
    container = launch.workload.container if launch.workload else None
    lc = getattr(container, "lc", None)
    if lc is None or not isinstance(container, dict):
        return launch.start
    try:
        if key is not None and key in container:
            line, col = lc.key(key)
            return Position(line + 1, col + 1)
        return Position(lc.line + 1, lc.col + 1)
    except (KeyError, AttributeError, TypeError):
        return launch.start


def server_workload(launch: Launch) -> Workload | None:
    """The workload of a server launch in a main container (not an init container, not CPU)."""
    w = launch.workload
    if w is None or launch.kind != "server":
        return None
    if str(launch.parsed.values.get("device") or "cuda").lower() == "cpu":
        return None
    if w.kind != "compose":
        init = [id(c) for c in _list(_dict(w.pod).get("initContainers"))]
        if id(w.container) in init:
            return None
    return w
