"""The engine image's tests (``engine-image/specserver_engine``): the entrypoint, preflight and
argument composition, the simulated engine's HTTP API and metrics, and the load generator.
Simulators run as real processes on loopback (the ``start_simulator`` fixture in tests/conftest.py).
"""
