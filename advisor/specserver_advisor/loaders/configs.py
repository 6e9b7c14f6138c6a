"""Find and read a model's ``config.json`` (and safetensors index size) for the advisor.

Sources, in order: a local model directory; the Hugging Face cache (``HF_HUB_CACHE``,
``HF_HOME/hub`` or ``~/.cache/huggingface/hub``); an HF-compatible endpoint, only when one is
given (``HF_ENDPOINT`` or ``--hf-endpoint``: offline by default); the configs of well-known
models bundled with the advisor. Called by the CLI, the engine preflight and the operator.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specserver_advisor.loaders.deadline import get_within

INDEX_FILE = "model.safetensors.index.json"


class ConfigNotFoundError(LookupError):
    """No config could be found for a model reference; the message lists where we looked."""


class ConfigUnreadableError(ValueError):
    """A config exists but is not valid JSON (or not an object)."""


@dataclass(frozen=True)
class LoadedConfig:
    """A model config and where it came from."""

    ref: str
    config: dict[str, Any]
    weight_bytes: int | None
    source: str


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigUnreadableError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigUnreadableError(
            f"{path}: not valid JSON: {exc.msg} (line {exc.lineno})"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigUnreadableError(f"{path}: expected a JSON object")
    return data


def _index_size(index: dict[str, Any] | None) -> int | None:
    if not index:
        return None
    size = (index.get("metadata") or {}).get("total_size")
    return int(size) if isinstance(size, int | float) and size > 0 else None


def from_directory(path: Path, ref: str | None = None) -> LoadedConfig:
    """Read ``config.json`` (+ index) from a model directory."""
    config = _read_json(path / "config.json")
    index = _read_json(path / INDEX_FILE) if (path / INDEX_FILE).exists() else None
    return LoadedConfig(ref or str(path), config, _index_size(index), f"directory {path}")


def hf_cache_dirs(env: dict[str, str]) -> list[Path]:
    """Where the HF hub cache may be, most specific first."""
    dirs = []
    if env.get("HF_HUB_CACHE"):
        dirs.append(Path(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        dirs.append(Path(env["HF_HOME"]) / "hub")
    dirs.append(Path(env.get("HOME", str(Path.home()))) / ".cache" / "huggingface" / "hub")
    return dirs


def find_in_hf_cache(repo: str, revision: str | None, cache_dirs: list[Path]) -> Path | None:
    """The snapshot directory of ``repo`` in an HF cache, if present."""
    folder = "models--" + repo.replace("/", "--")
    for cache in cache_dirs:
        root = cache / folder
        snapshots = root / "snapshots"
        if not snapshots.is_dir():
            continue
        ref_file = root / "refs" / (revision or "main")
        if ref_file.exists():
            candidate = snapshots / ref_file.read_text().strip()
            if (candidate / "config.json").exists():
                return candidate
        if revision and (snapshots / revision / "config.json").exists():
            return snapshots / revision
        found = sorted(
            (p for p in snapshots.iterdir() if (p / "config.json").exists()),
            key=lambda p: p.stat().st_mtime,
        )
        if found:
            return found[-1]
    return None


def fetch_from_endpoint(
    endpoint: str,
    repo: str,
    revision: str | None,
    filename: str,
    token: str | None,
    timeout: float = 10.0,
) -> dict[str, Any] | None:
    """GET ``{endpoint}/{repo}/resolve/{revision}/{filename}``; None on 404."""
    url = f"{endpoint.rstrip('/')}/{repo}/resolve/{revision or 'main'}/{filename}"
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        body = get_within(req, timeout)  # one deadline for the whole request, not per read
        data = json.loads(body.decode())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise ConfigNotFoundError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise ConfigNotFoundError(f"{url}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigUnreadableError(f"{url}: not valid JSON: {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigUnreadableError(f"{url}: not UTF-8 text") from exc
    if not isinstance(data, dict):
        raise ConfigUnreadableError(f"{url}: expected a JSON object")
    return data


def bundled(repo: str) -> LoadedConfig | None:
    """A config bundled with the advisor for a well-known repo id."""
    catalog = json.loads(
        resources.files("specserver_advisor").joinpath("data/catalog.json").read_text()
    )
    name = catalog.get(repo)
    if name is None:
        return None
    text = resources.files("specserver_advisor").joinpath(f"data/configs/{name}.json").read_text()
    return LoadedConfig(repo, json.loads(text), None, f"bundled config {name}")


def load_config(
    ref: str,
    revision: str | None = None,
    env: dict[str, str] | None = None,
    hf_endpoint: str | None = None,
    use_bundled: bool = True,
) -> LoadedConfig:
    """Resolve a model reference (directory or repo id) to its config.

    Raises:
        ConfigNotFoundError: nowhere had it; the message says where we looked.
        ConfigUnreadableError: a config was found but is broken.
    """
    env = dict(os.environ) if env is None else env
    looked: list[str] = []
    path = Path(ref).expanduser()
    if path.is_dir():
        if (path / "config.json").exists():
            return from_directory(path, ref)
        snapshot = find_in_hf_cache(ref, revision, [path])  # an HF cache dir given directly
        if snapshot:
            return from_directory(snapshot, ref)
        raise ConfigNotFoundError(f"{ref}: directory has no config.json")
    looked.append("no such directory")
    caches = hf_cache_dirs(env)
    snapshot = find_in_hf_cache(ref, revision, caches)
    if snapshot:
        return from_directory(snapshot, ref)
    looked.append("not in the HF cache (" + ", ".join(str(c) for c in caches) + ")")
    endpoint = hf_endpoint or env.get("HF_ENDPOINT")
    if endpoint:
        token = env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN")
        config = fetch_from_endpoint(endpoint, ref, revision, "config.json", token)
        if config is not None:
            index = fetch_from_endpoint(endpoint, ref, revision, INDEX_FILE, token)
            return LoadedConfig(ref, config, _index_size(index), f"endpoint {endpoint}")
        looked.append(f"{endpoint} has no {ref}/config.json")
    else:
        looked.append("no HF endpoint given (offline; set HF_ENDPOINT or --hf-endpoint)")
    if use_bundled:
        found = bundled(ref)
        if found:
            return found
    raise ConfigNotFoundError(f"no config.json for {ref!r}: " + "; ".join(looked))
