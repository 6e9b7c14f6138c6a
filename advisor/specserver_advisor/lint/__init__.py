"""``specserver-advisor lint``: speculative-decoding mistakes in the config files people have.

``sources`` finds SGLang launches and benchmark commands in files (the only I/O is reading
them), ``rules`` holds one module per rule in an explicit registry, ``engine`` runs them and
applies suppressions, ``render`` formats the diagnostics.
"""
