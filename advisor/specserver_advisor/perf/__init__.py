"""The performance model and the plan (layer 4 of the advisor, beside ``loaders``): step times
with and without speculation, SGLang's adaptive speculation, the constants and their
calibration, and ``plan`` for one launch on one GPU type. Pure. May import ``policy``, ``sglang``
and the ground modules; never ``loaders`` (its sibling) or anything above.
"""
