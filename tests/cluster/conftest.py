"""The cluster tier: tests against the real local stack (etcd, kube-apiserver,
kube-controller-manager on loopback, started by scripts/devcluster's code; a real Prometheus),
the operator run as a process, and simulated engines. Every test here is marked ``cluster``
(tests/conftest.py marks it from the fixtures it uses; tests/test_markers.py checks it), and
scripts/test runs this tier in its own process beside the fast tier. The session fixtures
(``kube``, ``prom``) live in tests/conftest.py.
"""
