"""``specserver-advisor`` (the advisor's top layer): one module per command (``plan``, ``lint``,
``replay``/``fleetsim``, ``calibrate``) and ``plan``'s front ends (``--from``, text, plot). Parses
arguments, calls the layers below, prints; the loaders are its only I/O. May import everything
in the advisor; nothing imports it.
"""
