"""specserver's pure core: the SpecServer API, SGLang 0.5.23 knowledge, models and rules.

Imported by the operator, the engine entrypoint and the ``specserver-advisor`` CLI.
Nothing here talks to Kubernetes; only ``loaders`` read files or HTTP.
"""

__version__ = "0.1.0"
SGLANG_VERSION = "0.5.23"
