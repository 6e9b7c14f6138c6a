"""Model configs for a SpecServer read by the CLI (``replay --policy``, ``plan --from``, ``lint``).

The advisor's one chain (``configchain.first_configs``): the configs the spec gives inline
first (as the operator reads them), then the model references through ``load_config`` (a
directory, the HF cache, an HF endpoint when one is given, the advisor's bundled configs).
I/O: reads files and, only with an endpoint, fetches.
"""

from __future__ import annotations

from pathlib import Path

from specserver_advisor.loaders import configchain
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import load_config_in
from specserver_advisor.models import SpecServerSpec
from specserver_advisor.sglang.configcheck import LoadedConfig


def configs_for_spec(
    spec: SpecServerSpec,
    env: dict[str, str],
    hf_endpoint: str | None = None,
    dirs: list[Path] | None = None,
    maps: list[tuple[str, Path]] | None = None,
) -> ModelConfigs:
    """The configs the operator would plan this spec with (``dirs``/``maps``: local folders to
    look the references up in first, ``--model-dir``).

    Raises:
        ConfigNotFoundError, ConfigUnreadableError: as ``load_config``.
    """

    def load(ref: str, revision: str | None) -> LoadedConfig:
        return load_config_in(ref, revision, env, hf_endpoint, dirs or [], maps or [])

    return configchain.first_configs(
        spec, [configchain.inline, configchain.references(load)], "not found"
    )
