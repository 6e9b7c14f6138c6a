"""Find and read a model's ``config.json`` (and safetensors index size) for the advisor.

Sources, in order: a local model directory; the Hugging Face cache (``HF_HUB_CACHE``,
``HF_HOME/hub`` or ``~/.cache/huggingface/hub``); an HF-compatible endpoint, only when one is
given (``HF_ENDPOINT`` or ``--hf-endpoint``: offline by default); the configs of well-known
models bundled with the advisor. Called by the CLI, the engine preflight and the operator.
"""

from __future__ import annotations

import json
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from specserver_advisor.bounded import MAX_BYTES, InputLimitError, json_object
from specserver_advisor.loaders import outbound
from specserver_advisor.loaders.reading import read_bytes, read_text
from specserver_advisor.sglang.configcheck import LoadedConfig, check_model_config
from specserver_advisor.sglang.configvalues import ConfigShapeError

INDEX_FILE = "model.safetensors.index.json"


class ConfigNotFoundError(LookupError):
    """No config could be found for a model reference; the message lists where we looked."""


class ConfigUnreadableError(ConfigShapeError):
    """A config exists but cannot be used: unreadable, not a JSON object, too large or deep, or
    a value the advisor reads of the wrong type (``configcheck``); the message names the file
    and key. A ``ConfigShapeError``, so one ``except`` catches every bad config."""


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file, through ``reading`` (size first) and ``bounded`` (depth)."""
    try:
        return json_object(read_bytes(path, max_bytes=MAX_BYTES), str(path))
    except InputLimitError as exc:
        raise ConfigUnreadableError(str(exc)) from exc


#: Weight bytes above this are no checkpoint's (a hostile ``1e300`` or ``Infinity`` is ignored).
MAX_WEIGHT_BYTES = 2**60


def index_size(index: dict[str, Any] | None) -> int | None:
    """``metadata.total_size`` of a safetensors index: a positive finite size, else None (an
    index of another shape is ignored, as one that is absent)."""
    meta = index.get("metadata") if isinstance(index, dict) else None
    size = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(size, bool) or not isinstance(size, int | float):
        return None
    return int(size) if 0 < size <= MAX_WEIGHT_BYTES else None


def _checked(config: dict[str, Any], where: str) -> dict[str, Any]:
    try:
        return check_model_config(config, where)
    except ConfigShapeError as exc:
        raise ConfigUnreadableError(str(exc)) from exc


def from_directory(
    path: Path, ref: str | None = None, config_file: str | None = None
) -> LoadedConfig:
    """Read ``config.json`` (+ index) from a model directory (``configcheck``ed).

    ``config_file``: the file SGLang reads instead (``--decrypted-config-file`` /
    ``--decrypted-draft-config-file``), joined to the directory as transformers joins it (an
    absolute path stands for itself).

    Raises:
        ConfigNotFoundError: ``config_file`` is given and not there (SGLang fails to start).
    """
    name = config_file or "config.json"
    file = Path(os.path.join(path, name))
    if config_file and not file.is_file():
        raise ConfigNotFoundError(
            f"{path} has no {config_file!r}, the config file the launch names: SGLang fails "
            "to start (transformers: does not appear to have a file named it)"
        )
    config = _checked(_read_json(file), str(file))
    index = _read_json(path / INDEX_FILE) if (path / INDEX_FILE).exists() else None
    source = f"directory {path}" + (f" ({config_file})" if config_file else "")
    return LoadedConfig(ref or str(path), config, index_size(index), source)


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
            candidate = snapshots / read_text(ref_file, max_bytes=4096).strip()
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


#: One path segment of a repo id (HF: letters, digits, ``-``, ``_``, ``.``; not ``.``/``..``).
_REPO_SEGMENT = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def repo_problem(repo: str) -> str | None:
    """Why ``repo`` is not a repo id an endpoint may be asked for (None when it is)."""
    parts = repo.split("/")
    if len(parts) > 2 or not all(_REPO_SEGMENT.match(p) for p in parts):
        return f"{repo!r} is not a repo id (org/name of letters, digits, '-', '_', '.')"
    return None


def endpoint_url(endpoint: str, repo: str, revision: str | None, filename: str) -> str:
    """``{endpoint}/{repo}/resolve/{revision}/{filename}``, each part path-encoded.

    Raises:
        ConfigNotFoundError: ``repo`` is not a repo id (no traversal reaches the endpoint).
    """
    problem = repo_problem(repo)
    if problem:
        raise ConfigNotFoundError(problem)
    rev = quote(revision or "main", safe="")
    return f"{endpoint.rstrip('/')}/{repo}/resolve/{rev}/{quote(filename, safe='')}"


def fetch_from_endpoint(
    endpoint: str,
    repo: str,
    revision: str | None,
    filename: str,
    token: str | None,
    timeout: float = 10.0,
) -> dict[str, Any] | None:
    """GET ``{endpoint}/{repo}/resolve/{revision}/{filename}``; None on 404.

    Goes through ``outbound.get``: http(s) only, the token never crosses a redirect to another
    origin, and no byte of an answer's body reaches an error message.
    """
    url = endpoint_url(endpoint, repo, revision, filename)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = outbound.get(url, headers, timeout=timeout)
    except outbound.OutboundError as exc:
        if exc.status == 404:
            return None
        raise ConfigNotFoundError(str(exc)) from exc
    where = outbound.redact(url)
    try:
        return json_object(answer.body, where)
    except InputLimitError as exc:
        raise ConfigUnreadableError(str(exc)) from exc


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
    config_file: str | None = None,
) -> LoadedConfig:
    """Resolve a model reference (directory or repo id) to its config.

    ``config_file`` names the file read instead of ``config.json`` (SGLang's
    ``--decrypted-config-file`` / ``--decrypted-draft-config-file``; ``sglang.overrides
    .config_file_names``); the bundled configs are only ``config.json``.

    Raises:
        ConfigNotFoundError: nowhere had it; the message says where we looked.
        ConfigUnreadableError: a config was found but is broken.
    """
    env = dict(os.environ) if env is None else env
    try:
        return _load_config(
            ref, revision, env, hf_endpoint, use_bundled and not config_file, config_file
        )
    except (OSError, ValueError) as exc:  # a name the filesystem refuses (too long, NUL byte)
        if isinstance(exc, ConfigNotFoundError | ConfigUnreadableError):
            raise
        raise ConfigNotFoundError(
            f"no config.json for {ref[:80]!r}: {exc.__class__.__name__}"
        ) from exc


def _load_config(
    ref: str,
    revision: str | None,
    env: dict[str, str],
    hf_endpoint: str | None,
    use_bundled: bool,
    config_file: str | None = None,
) -> LoadedConfig:
    looked: list[str] = []
    path = Path(ref).expanduser()
    if path.is_dir():
        if (path / "config.json").exists():
            return from_directory(path, ref, config_file)
        snapshot = find_in_hf_cache(ref, revision, [path])  # an HF cache dir given directly
        if snapshot or config_file:
            return from_directory(snapshot or path, ref, config_file)
        raise ConfigNotFoundError(f"{ref}: directory has no config.json")
    looked.append("no such directory")
    caches = hf_cache_dirs(env)
    snapshot = find_in_hf_cache(ref, revision, caches)
    if snapshot:
        return from_directory(snapshot, ref, config_file)
    looked.append("not in the HF cache (" + ", ".join(str(c) for c in caches) + ")")
    endpoint = hf_endpoint or env.get("HF_ENDPOINT")
    if endpoint and repo_problem(ref):
        looked.append(f"not asked of {outbound.redact(endpoint)}: {repo_problem(ref)}")
    elif endpoint:
        token = env.get("HF_TOKEN") or env.get("HUGGING_FACE_HUB_TOKEN")
        name = config_file or "config.json"
        config = fetch_from_endpoint(endpoint, ref, revision, name, token)
        if config is not None:
            config = _checked(config, f"{outbound.redact(endpoint)} {ref}/{name}")
            index = fetch_from_endpoint(endpoint, ref, revision, INDEX_FILE, token)
            return LoadedConfig(ref, config, index_size(index), f"endpoint {endpoint}")
        looked.append(f"{outbound.redact(endpoint)} has no {ref}/{name}")
    else:
        looked.append("no HF endpoint given (offline; set HF_ENDPOINT or --hf-endpoint)")
    if use_bundled:
        found = bundled(ref)
        if found:
            return found
    raise ConfigNotFoundError(f"no config.json for {ref!r}: " + "; ".join(looked))


def local_candidates(ref: str, dirs: list[Path], maps: list[tuple[str, Path]]) -> list[str]:
    """Local folders to look ``ref`` up in before itself (``--model-dir``, as ``lint`` and
    ``plan`` take it): under each ``PATH=DIR`` pair whose absolute PATH holds ``ref``, then
    ``DIR/ref`` for each plain folder."""
    out: list[str] = []
    for prefix, local in maps:
        root = prefix.rstrip("/") or "/"
        if ref == root:
            out.append(str(local))
        elif ref.startswith(root.rstrip("/") + "/"):
            out.append(str(local / ref[len(root) :].lstrip("/")))
    return out + [str(d / ref) for d in dirs]


def load_config_in(
    ref: str,
    revision: str | None,
    env: dict[str, str] | None,
    hf_endpoint: str | None,
    dirs: list[Path],
    maps: list[tuple[str, Path]],
    config_file: str | None = None,
) -> LoadedConfig:
    """``load_config`` of ``ref``, first from the local folders ``local_candidates`` names
    (offline: a repo id found there needs no hub), then as given.

    Raises:
        ConfigNotFoundError, ConfigUnreadableError: as ``load_config`` (for ``ref`` itself).
    """
    for candidate in local_candidates(ref, dirs, maps):
        if Path(candidate).is_dir():
            return load_config(candidate, None, env, hf_endpoint, config_file=config_file)
    return load_config(ref, revision, env, hf_endpoint, config_file=config_file)
