"""Where the operator reads model configs from, in order (decisions; Kubernetes I/O in client.py).

1. ``spec.modelSource.inline`` (configs given in the SpecServer);
2. the ConfigMap ``spec.modelSource.configMapName`` in the SpecServer's own namespace (keys
   ``target-config.json``, ``draft-config.json``, optional ``target-index.json`` /
   ``draft-index.json``);
3. an HF-compatible endpoint the cluster admin allowed (``HfSettings``): the operator's
   ``SPECSERVER_HF_ENDPOINT``, or ``spec.modelSource.hfEndpoint`` when it is on the admin's list
   ``SPECSERVER_HF_ALLOWED_ENDPOINTS``; the token is the admin's (``SPECSERVER_HF_TOKEN_FILE``)
   and goes to those endpoints only. The operator never reads ``hfTokenSecretRef``: that Secret
   is for the engine pod, which runs in the SpecServer's namespace (docs/security.md);
4. the advisor's bundled configs of well-known models.

The order itself is the advisor's one chain (``configchain.first_configs``, also used by the CLI,
``lint`` and the admission webhook); this module supplies the operator's sources.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from specserver_advisor.bounded import InputLimitError, json_object
from specserver_advisor.loaders import configchain, outbound
from specserver_advisor.loaders.configchain import ConfigSourceError, Lookup, ModelConfigs
from specserver_advisor.loaders.configs import (
    ConfigNotFoundError,
    ConfigUnreadableError,
    bundled,
    fetch_from_endpoint,
    index_size,
    repo_problem,
)
from specserver_advisor.models import SpecServerSpec

KEYS = {"target": "target-config.json", "draft": "draft-config.json"}
INDEX_KEYS = {"target": "target-index.json", "draft": "draft-index.json"}


def from_inline(spec: SpecServerSpec) -> ModelConfigs | None:
    """Configs given in the spec, when the target's is there."""
    return configchain.inline(spec).configs


def from_configmap(name: str, data: dict[str, str], want_draft: bool) -> ModelConfigs:
    """Parse a ConfigMap's data into configs (raises ConfigSourceError naming the key)."""
    parsed: dict[str, Any] = {}
    wanted = [(f"config:{r}", k) for r, k in KEYS.items()]
    wanted += [(f"index:{r}", k) for r, k in INDEX_KEYS.items()]
    for role, key in wanted:
        if key not in data:
            continue
        try:  # bounded: size and depth (a RecursionError before), the key named
            parsed[role] = json_object(data[key], f"ConfigMap {name} key {key}")
        except InputLimitError as exc:
            raise ConfigSourceError(str(exc)) from exc
    if "config:target" not in parsed:
        raise ConfigSourceError(f"ConfigMap {name} has no key {KEYS['target']}")
    if want_draft and "config:draft" not in parsed:
        raise ConfigSourceError(f"ConfigMap {name} has no key {KEYS['draft']}")

    def size(role: str) -> int | None:
        return index_size(parsed.get(f"index:{role}"))

    return ModelConfigs(
        parsed["config:target"],
        parsed.get("config:draft"),
        size("target"),
        size("draft"),
        f"ConfigMap {name}",
    )


def _normal(endpoint: str) -> str:
    """An endpoint as compared against the allow-list: scheme://host:port/path, no slash."""
    scheme, host, port = outbound.origin(endpoint)
    return f"{scheme}://{host}:{port}{urlsplit(endpoint).path.rstrip('/')}"


@dataclass(frozen=True)
class HfSettings:
    """The cluster admin's HF endpoint settings (operator environment)."""

    endpoint: str | None = None
    allowed: tuple[str, ...] = ()
    token_file: str | None = None
    problems: tuple[str, ...] = field(default=())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HfSettings:
        """``SPECSERVER_HF_ENDPOINT``, ``SPECSERVER_HF_ALLOWED_ENDPOINTS`` (comma-separated;
        the default endpoint is always on it), ``SPECSERVER_HF_TOKEN_FILE``."""
        env = os.environ if env is None else env
        endpoint = env.get("SPECSERVER_HF_ENDPOINT") or None
        listed = [e.strip() for e in env.get("SPECSERVER_HF_ALLOWED_ENDPOINTS", "").split(",")]
        candidates = [e for e in [endpoint, *listed] if e]
        problems = tuple(
            f"{outbound.redact(e)}: {outbound.url_problem(e)}"
            for e in candidates
            if outbound.url_problem(e)
        )
        allowed = tuple(dict.fromkeys(e for e in candidates if not outbound.url_problem(e)))
        if endpoint and outbound.url_problem(endpoint):
            endpoint = None
        return cls(endpoint, allowed, env.get("SPECSERVER_HF_TOKEN_FILE") or None, problems)

    def allows(self, endpoint: str) -> bool:
        """Whether ``endpoint`` is one the admin listed (scheme, host, port and path)."""
        if outbound.url_problem(endpoint):
            return False
        return _normal(endpoint) in {_normal(e) for e in self.allowed}


def choose_endpoint(spec: SpecServerSpec, hf: HfSettings) -> tuple[str | None, str | None]:
    """(the endpoint the operator may fetch configs from, why the spec's was not used)."""
    src = spec.model_source
    asked = src.hf_endpoint if src else None
    if asked is None:
        return hf.endpoint, None
    if hf.allows(asked):
        return asked, None
    return hf.endpoint, (
        f"spec.modelSource.hfEndpoint {outbound.redact(asked)} is not on the operator's "
        "allow-list (SPECSERVER_HF_ALLOWED_ENDPOINTS), so the operator does not fetch from it"
    )


Fetch = Callable[[str, str, str | None, str, str | None], dict[str, Any] | None]


def from_endpoint(
    spec: SpecServerSpec, hf: HfSettings, fetch: Fetch = fetch_from_endpoint
) -> tuple[ModelConfigs | None, str | None]:
    """Configs from the admin-allowed endpoint (with the admin's token), and a note on why a
    spec endpoint was passed over. Raises ConfigSourceError when the endpoint fails."""
    endpoint, note = choose_endpoint(spec, hf)
    if hf.problems:  # the admin's own settings: say why an endpoint was dropped
        ignored = "operator settings ignored: " + "; ".join(hf.problems)
        note = f"{note}; {ignored}" if note else ignored
    refs = [spec.model.path] + ([spec.draft.path] if spec.draft else [])
    if endpoint is None or any(repo_problem(r) for r in refs):
        return None, note  # a local path is not asked of an endpoint
    token = None
    if hf.token_file:
        try:
            with open(hf.token_file, encoding="utf-8") as f:
                token = f.read().strip() or None
        except OSError as exc:
            raise ConfigSourceError(
                f"SPECSERVER_HF_TOKEN_FILE cannot be read ({type(exc).__name__})"
            ) from exc
    try:
        target = fetch(endpoint, spec.model.path, spec.model.revision, "config.json", token)
        draft = (
            fetch(endpoint, spec.draft.path, spec.draft.revision, "config.json", token)
            if spec.draft
            else None
        )
    except (ConfigNotFoundError, ConfigUnreadableError) as exc:
        raise ConfigSourceError(str(exc)) from exc
    if target is None or (spec.draft and draft is None):
        return None, note
    return ModelConfigs(target, draft, None, None, f"endpoint {outbound.redact(endpoint)}"), note


#: What the operator tells the author when no source has the configs.
MISSING_HINT = (
    "give spec.modelSource.inline or a configMapName (or the admin an SPECSERVER_HF_ENDPOINT)"
)


def read_configs(
    spec: SpecServerSpec,
    read_configmap: Callable[[str], dict[str, str]],
    hf: HfSettings,
    shared: dict[tuple[str, str | None], ModelConfigs],
) -> ModelConfigs:
    """The operator's chain: inline, ConfigMap, allowed endpoint, bundled (in that order).

    ``read_configmap(name)``: the data of a ConfigMap in the SpecServer's own namespace (raises
    ConfigSourceError when absent). ``shared``: one bundled copy per model pair, however many
    SpecServers use it. Raises ConfigSourceError naming the missing model and why.
    """

    def configmap(spec: SpecServerSpec) -> Lookup:
        src = spec.model_source
        if not (src and src.config_map_name):
            return Lookup(None)
        data = read_configmap(src.config_map_name)
        return Lookup(from_configmap(src.config_map_name, data, spec.draft is not None))

    def endpoint(spec: SpecServerSpec) -> Lookup:
        return Lookup(*from_endpoint(spec, hf))

    catalog = configchain.references(lambda ref, _revision: bundled(ref), "bundled")

    def bundled_once(spec: SpecServerSpec) -> Lookup:
        pair = (spec.model.path, spec.draft.path if spec.draft else None)
        if pair not in shared:
            found = catalog(spec)
            if found.configs is None:
                return found
            shared[pair] = found.configs
        return Lookup(shared[pair])

    sources = [configchain.inline, configmap, endpoint, bundled_once]
    return configchain.first_configs(spec, sources, MISSING_HINT)
