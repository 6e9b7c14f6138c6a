"""The operator's unit tests: one folder per layer of ``operator/specserver_operator``
(``core``: desired state and rendering, ``kube``: the API client stack, ``reconcile``: one pass,
``loop``: the shared cycle and leader election, ``webhook``: admission, ``metrics``, ``main``:
the entry point and settings). They run the operator's code against our own seams (a recorded
API, a fake clock); everything against the real apiserver lives under ``tests/cluster``.
"""
