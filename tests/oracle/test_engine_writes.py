"""core/enginefs.py's list of where the engine writes, against the packages as installed in the
SGLang 0.5.23 oracle environment.

1. Each listed source line says what the list says it does: read back from the installed file,
   it names the variable that moves the path (or ``tempfile`` for a temporary directory).
2. The libraries themselves, imported in the oracle environment with the environment the
   operator renders for the engine container (every path moved under a scratch root), put each
   of their directories on a writable volume of the rendered pod: SGLang's cache root and the
   caches ``import sglang`` redirects, Triton's, torch inductor's, the hub's home, xet and hub
   caches, transformers' modules, ``tempfile.gettempdir()``, ``~``.

FlashInfer and outlines are not in the oracle environment (it installs what a resolution
needs); their lines were read from the wheels SGLang 0.5.23 pins (flashinfer-python 0.7.2,
outlines 0.1.11) and the test says so if that changes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from oracle import REQUIRE_ENV, load_oracleenv, missing, required
from specserver_operator.core.enginefs import WRITES
from stack import REPO

#: Packages whose lines were read from SGLang 0.5.23's pinned wheels, not the oracle env.
NOT_IN_ORACLE = {"flashinfer", "outlines"}


def _site_packages() -> Path:
    why = missing()
    if why and required():
        pytest.fail(f"{REQUIRE_ENV} is set and {why}", pytrace=False)
    if why:
        pytest.skip(why)
    env = load_oracleenv()
    (site,) = sorted(Path(env.ENV_DIR).glob("lib/python*/site-packages"))
    return site


def _writable_module() -> ModuleType:
    (path,) = sorted(REPO.glob("tests/operator/**/test_engine_writable.py"))
    spec = importlib.util.spec_from_file_location("engine_writable_for_oracle", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _marker(path: str) -> str:
    name = re.search(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", path)
    assert name, path
    return "tempfile" if name.group(1) in ("TMPDIR", "PROMETHEUS_MULTIPROC_DIR") else name.group(1)


@pytest.mark.parametrize("write", WRITES, ids=lambda w: w.source)
def test_each_listed_source_line_names_what_moves_the_path(write: Any) -> None:
    site = _site_packages()
    relative, line = write.source.rsplit(":", 1)
    package = relative.split("/")[0]
    file = site / relative
    if package in NOT_IN_ORACLE:
        assert not (site / package).exists(), (
            f"{package} is installed now: drop it from NOT_IN_ORACLE"
        )
        return
    assert file.is_file(), file
    text = file.read_text().splitlines()[int(line) - 1]
    assert _marker(write.path) in text, f"{write.source}: {text.strip()}"


PROBE = r"""
import json, os, sys, tempfile
import sglang  # redirects the third-party caches (sglang/__init__.py)
from sglang.srt.environ import envs
import triton
import huggingface_hub.constants as hub
from torch._inductor.runtime.cache_dir_utils import cache_dir
from transformers.utils.hub import HF_MODULES_CACHE
out = {
    "SGLANG_CACHE_DIR": envs.SGLANG_CACHE_DIR.get(),
    "SGLANG_DG_CACHE_DIR": envs.SGLANG_DG_CACHE_DIR.get(),
    "triton": triton.knobs.cache.dir,
    "inductor": cache_dir(),
    "HF_HOME": hub.HF_HOME,
    "HF_XET_CACHE": hub.HF_XET_CACHE,
    "HF_ASSETS_CACHE": hub.HF_ASSETS_CACHE,
    "HF_MODULES_CACHE": HF_MODULES_CACHE,
    "tempdir": tempfile.gettempdir(),
    "home": os.path.expanduser("~"),
}
for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH",
             "TILELANG_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE"):
    out[name] = os.environ[name]
out["HF_HUB_CACHE"] = hub.HF_HUB_CACHE
out["HF_HUB_OFFLINE"] = hub.HF_HUB_OFFLINE
print(json.dumps(out))
"""


def test_the_libraries_put_their_directories_on_the_rendered_writable_volumes(
    tmp_path: Path,
) -> None:
    site = _site_packages()
    python = site.parents[2] / "bin" / "python"
    writable = _writable_module()
    example = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"
    (pod,) = writable._pod_specs(writable.render(example))
    engine = next(c for c in pod["containers"] if c["name"] == "engine")
    env = writable._env(engine)
    # Every mount moved under a scratch root, so that nothing is written outside tmp_path.
    roots = {m["mountPath"]: str(tmp_path / m["name"]) for m in engine["volumeMounts"]}
    for scratch in roots.values():
        Path(scratch).mkdir(parents=True, exist_ok=True)

    def move(value: str) -> str:
        for mount, scratch in sorted(roots.items(), key=lambda kv: -len(kv[0])):
            if value == mount or value.startswith(mount + "/"):
                return scratch + value[len(mount) :]
        return value

    def back(value: str) -> str:
        for mount, scratch in sorted(roots.items(), key=lambda kv: -len(kv[1])):
            if value == scratch or value.startswith(scratch + "/"):
                return mount + value[len(scratch) :]
        return value

    child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    child_env.update({k: move(v) for k, v in env.items()})
    done = subprocess.run(
        [str(python), "-c", PROBE],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got.pop("HF_HUB_OFFLINE") is True  # the read-only hub cache is only read
    hub_cache = back(got.pop("HF_HUB_CACHE"))
    assert hub_cache == "/models/hub"
    for name, value in got.items():
        where = back(value)
        assert writable._writable(where, pod, engine) is None, f"{name}: {where}"
    # Nothing was created in the model volume by imports and path resolution.
    assert not any(Path(roots["/models"]).rglob("*"))
    assert os.listdir(roots[env["HOME"]])  # the caches were created under HOME
