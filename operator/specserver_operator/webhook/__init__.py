"""The validating admission webhook (above ``reconcile``, beside ``loop``): its HTTPS server, its
certificates, the review of a SpecServer and the Secret access review. May import
``reconcile`` and everything below; never ``loop``.
"""
