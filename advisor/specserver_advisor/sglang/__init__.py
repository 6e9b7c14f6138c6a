"""SGLang 0.5.23's own behaviour (layer 2 of the advisor, above the ground): flags, launch
resolution, context derivation, the model shape read from ``config.json``, memory and KV-pool
sizing, the memory-fraction choice, whether a launch needs a draft. Pure. May import the
ground modules (``models``, ``findings``, ``errors``, ``gpus``, ``bounded``) only.
"""
