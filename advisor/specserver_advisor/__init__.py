"""specserver's pure core: the SpecServer API, SGLang 0.5.23 knowledge, the performance model,
the policy, the one launch model, lint, replay and the CLI, in layers (packages).

From the top: ``cli``/``schema`` > ``replay`` | ``lint`` > ``launch`` > ``loaders`` | ``perf`` >
``policy`` > ``sglang`` > the ground (``models``, ``findings``, ``errors``, ``gpus``, then
``bounded``). A layer imports only the layers below it (import-linter contracts in
pyproject.toml, run by scripts/test). Imported by the operator, the engine entrypoint and the
``specserver-advisor`` CLI; nothing here talks to Kubernetes, and only ``loaders`` read files
or HTTP.
"""

__version__ = "0.1.0"
SGLANG_VERSION = "0.5.23"
