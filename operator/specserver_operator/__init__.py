"""specserver's Kubernetes operator: the kopf shell around specserver_advisor, in layers.

From the top: ``main`` > ``handlers`` (every ``@kopf.on.*``) > ``webhook`` | ``loop`` >
``reconcile`` (observe -> decide -> apply) > ``kube`` (the only code that talks to the API) >
``core`` (pure: desired state, children, templates, conditions, validation, policy state),
with ``settings`` and ``metrics`` as leaves. import-linter contracts (pyproject.toml) hold the
order and keep ``core`` free of I/O.
"""
