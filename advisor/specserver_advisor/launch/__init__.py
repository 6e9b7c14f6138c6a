"""The one launch model (layer 5 of the advisor): a SpecServer, or SGLang argv + env, turned into
SGLang's launch with its model configs and GPU, rendered and planned. Everyone who needs
SGLang's launch (the operator, lint, plan, replay) asks it. May import ``loaders``, ``perf``,
``policy``, ``sglang`` and the ground modules; never ``lint``, ``replay`` or ``cli``.
"""
