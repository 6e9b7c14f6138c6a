"""Replay and fleet simulation (layer 6 of the advisor, beside ``lint``): recorded observations
through the auto-speculation policy, and traffic traces through the performance model with
every switch paid for. Pure but for reading the files it is given. May import ``launch`` and
everything below; never ``lint`` (its sibling) or ``cli``.
"""
