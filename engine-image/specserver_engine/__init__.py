"""What runs in the engine pod: preflight, argument composition (``launch``), the entrypoint
(``cli``), and the simulated engine (``sim``) with its load generator (``loadgen``).
"""
