"""Every path the engine writes (core/enginefs.py, found by reading SGLang 0.5.23 and its
libraries) lands on a writable volume in every rendered engine pod, HOME is set and the model
stays read-only.

Each example in manifests/examples/ is rendered as the operator renders it (the golden test's
``render``); for every pod spec (a Deployment's, a LeaderWorkerSet's leader and worker) and every
container that runs the engine's code (the engine, the preflight), each path is resolved the way
the library resolves it, from that container's environment, and must lie under a mount of an
emptyDir that is not read-only. Paths that fall on the image's own file system fail: UID 10001
has no home there and the stock image gives it nothing writable but /tmp.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from specserver_advisor.launch import validation
from specserver_advisor.models import SpecServer
from specserver_operator.core import enginefs
from specserver_operator.core.enginefs import WRITES, resolve
from stack import REPO


def _golden_module() -> ModuleType:
    """tests/operator/**/test_render_golden.py (its ``render`` is the operator's rendering of an
    example), found wherever the test tree keeps it."""
    (path,) = sorted(REPO.glob("tests/operator/**/test_render_golden.py"))
    spec = importlib.util.spec_from_file_location("render_golden_for_writable", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_GOLDEN = _golden_module()
EXAMPLES: list[Path] = _GOLDEN.EXAMPLES
render = _GOLDEN.render


def _pod_specs(children: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for obj in children:
        if obj["kind"] == "Deployment":
            out.append(obj["spec"]["template"]["spec"])
        elif obj["kind"] == "LeaderWorkerSet":
            group = obj["spec"]["leaderWorkerTemplate"]
            out += [group["leaderTemplate"]["spec"], group["workerTemplate"]["spec"]]
    return out


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod.get("initContainers") or []) + list(pod["containers"])


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}


def _mount_of(path: str, container: dict[str, Any]) -> dict[str, Any] | None:
    """The mount ``path`` lies on (the deepest one), or None for the image's own file system."""
    best = None
    for mount in container.get("volumeMounts") or []:
        root = mount["mountPath"].rstrip("/") or "/"
        inside = path == root or path.startswith(root + "/")
        if inside and (best is None or len(root) > len(best["mountPath"].rstrip("/"))):
            best = mount
    return best


def _writable(path: str, pod: dict[str, Any], container: dict[str, Any]) -> str | None:
    """Why ``path`` is not writable in ``container``, or None."""
    if not path.startswith("/"):
        return f"{path!r} is relative (HOME unset and no passwd entry)"
    path = posixpath.normpath(path)
    mount = _mount_of(path, container)
    if mount is None:
        return f"{path} is on the image's file system"
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    if mount.get("readOnly") or "emptyDir" not in volume:
        return f"{path} is on {mount['name']} ({'read-only' if mount.get('readOnly') else volume})"
    return None


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_path_the_engine_writes_is_on_a_writable_volume(path: Path) -> None:
    pods = _pod_specs(render(path))
    assert pods
    checked = 0
    for pod in pods:
        for container in _containers(pod):
            env = _env(container)
            assert env.get("HOME", "/") != "/", container["name"]
            for write in WRITES:
                if write.unless and env.get(write.unless) == "1":
                    continue
                where = resolve(write.path, env)
                problem = _writable(where, pod, container)
                assert problem is None, (
                    f"{container['name']}: {write.what} ({write.source}): {problem}"
                )
                checked += 1
            # tempfile.gettempdir() and os.path.expanduser("~") as Python computes them
            for variable in ("TMPDIR", "HOME"):
                assert _writable(env[variable], pod, container) is None, variable
    assert checked >= len(WRITES)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_model_is_read_only_and_the_hub_home_is_not_on_it(path: Path) -> None:
    server = SpecServer.model_validate(yaml.safe_load(path.read_text()))
    volume = server.spec.model_source.volume if server.spec.model_source else None
    for pod in _pod_specs(render(path)):
        for container in _containers(pod):
            env = _env(container)
            models = [m for m in container.get("volumeMounts") or [] if m["name"] == "models"]
            assert bool(models) == (volume is not None)
            for mount in models:
                assert mount["readOnly"] is True
                # The hub writes its token, locks and xet cache under HF_HOME.
                assert _writable(env["HF_HOME"], pod, container) is None
                if volume is not None and volume.hf_cache:
                    assert env["HF_HUB_CACHE"] == f"{mount['mountPath']}/hub"
                    assert env["HF_HUB_OFFLINE"] == "1"  # a read-only cache can only be read
            if volume is None or not volume.hf_cache:
                assert "HF_HUB_CACHE" not in env  # the hub caches under the writable HF_HOME


def test_the_resolver_expands_as_the_libraries_do() -> None:
    assert resolve("${TRITON_CACHE_DIR:-${TRITON_HOME:-$HOME}/.triton/cache}", {}) == (
        "//.triton/cache"
    )
    assert resolve("${TRITON_CACHE_DIR:-${TRITON_HOME:-$HOME}/.triton/cache}", {"HOME": "/h"}) == (
        "/h/.triton/cache"
    )
    assert resolve("${A:-${B:-x}/y}/z", {"B": "/b"}) == "/b/y/z"
    assert resolve("${A:-${B:-x}/y}/z", {"A": "/a", "B": "/b"}) == "/a/z"
    assert resolve("${A:-$HOME/.c}", {"A": ""}) == "//.c"  # empty counts as unset


def test_a_spec_may_not_move_or_cover_the_writable_paths() -> None:
    doc = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())
    doc["spec"]["engine"]["env"] = [{"name": "TRITON_CACHE_DIR", "value": "/models/triton"}]
    doc["spec"]["modelSource"]["volume"]["mountPath"] = "/home/specserver/models"
    problems = validation.spec_problems(SpecServer.model_validate(doc))
    assert any(
        "spec.engine.env[0].name: TRITON_CACHE_DIR is set by the operator" in p for p in problems
    ), problems
    assert any("spec.modelSource.volume.mountPath" in p and "reserved" in p for p in problems)


def test_docs_list_every_write_with_its_source() -> None:
    text = (REPO / "docs" / "engine.md").read_text()
    section = text.split("## Where the engine writes", 1)[1].split("\n## ", 1)[0]
    for write in WRITES:
        assert f"`{write.source}`" in section, write.source
    for name, value in enginefs.ENGINE_ENV:
        assert re.search(rf"`{name}={re.escape(value)}`", section), name
