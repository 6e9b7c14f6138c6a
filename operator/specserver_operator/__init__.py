"""specserver's Kubernetes operator: the kopf shell around specserver_advisor.

``handlers`` holds every ``@kopf.on.*``; ``client`` is the only Kubernetes I/O.
"""
