"""The operator's pure core (its bottom layer): desired state, children, rendering from the
templates, conditions, validation, the policy state and the auto-speculation step. No I/O:
nothing here talks to Kubernetes, Prometheus or an endpoint (an import-linter contract forbids
``kube``, ``reconcile``, ``loop``, ``webhook``, kopf and urllib3). May import the advisor,
``settings`` and ``metrics``.
"""
