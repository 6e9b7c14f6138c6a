"""The advisor's only I/O (layer 4, beside ``perf``): model configs from directories, the HF
cache or an HF endpoint, the chain of config sources, Prometheus reads, bounded reading of
files and YAML. Thin; called by the CLI (and the operator's config sources). May import
``policy``, ``sglang`` and the ground; never ``perf`` (its sibling) or anything above.
"""
