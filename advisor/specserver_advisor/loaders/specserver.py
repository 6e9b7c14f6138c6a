"""Model configs for a SpecServer read by the CLI (``replay --policy``, ``plan --from``, ``lint``).

The advisor's one chain (``configchain.first_configs``): the configs the spec gives inline
first (as the operator reads them), then the model references through ``load_config`` (a
directory, the HF cache, an HF endpoint when one is given, the advisor's bundled configs).
I/O: reads files and, only with an endpoint, fetches.
"""

from __future__ import annotations

from specserver_advisor.loaders import configchain
from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import load_config
from specserver_advisor.models import SpecServerSpec
from specserver_advisor.sglang.configcheck import LoadedConfig


def configs_for_spec(
    spec: SpecServerSpec, env: dict[str, str], hf_endpoint: str | None = None
) -> ModelConfigs:
    """The configs the operator would plan this spec with.

    Raises:
        ConfigNotFoundError, ConfigUnreadableError: as ``load_config``.
    """

    def load(ref: str, revision: str | None) -> LoadedConfig:
        return load_config(ref, revision, env, hf_endpoint)

    return configchain.first_configs(
        spec, [configchain.inline, configchain.references(load)], "not found"
    )
