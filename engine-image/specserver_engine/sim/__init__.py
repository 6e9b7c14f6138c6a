"""The simulated engine: SGLang 0.5.23's HTTP API and exact metrics over a scheduler that runs
the advisor's step times (``specserver-engine simulate``), and its calibration against the
field. May import the advisor and ``specserver_engine.ports``; never the entry points.
"""
