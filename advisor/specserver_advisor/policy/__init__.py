"""The auto-speculation policy (layer 3 of the advisor, above ``sglang``): what it reads,
remembers and decides each cycle, what a switch costs, the PromQL of its signals, and one
evaluation exactly as the operator runs it. Pure. May import ``sglang`` and the ground modules
(``models``, ``findings``, ``errors``, ``gpus``, ``bounded``); nothing above.
"""
