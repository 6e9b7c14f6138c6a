"""The client stack (above ``core``): the only code that talks to the Kubernetes API, as in kopf:
the REST client with its deadlines, paths, bodies and errors, the watch-fed informer cache,
kopf's decoding and paging, the Secret-grant record. May import ``core``, ``settings``,
``metrics`` and the advisor.
"""
