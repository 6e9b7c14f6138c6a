"""``specserver-advisor lint``'s engine (layer 6 of the advisor, beside ``replay``):
speculative-decoding mistakes in the config files people have.

``sources`` finds SGLang launches and benchmark commands in files (``shell`` evaluates launch
scripts), ``rules`` holds one module per rule in an explicit registry, ``engine`` runs them and
applies suppressions, ``render`` formats the diagnostics; the command itself is ``cli.lint``.
May import ``launch`` and everything below; never ``replay`` or ``cli``.
"""
