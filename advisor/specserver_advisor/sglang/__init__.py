"""SGLang 0.5.23 knowledge: flags, launch resolution, context derivation, KV sizing."""
