"""One reconcile pass for one SpecServer (above ``kube``): observe (every read, one snapshot),
decide (``core.desired``, pure), apply (the writes, in order). The Prometheus signals and the
model-config sources are read here. May import ``kube``, ``core``, ``settings``, ``metrics``
and the advisor; never ``loop`` or ``webhook``.
"""
