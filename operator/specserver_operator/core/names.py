"""Valid, short child names from any SpecServer name (pure): the advisor's ``launch.names``.

The rules live in the advisor so that the one validation of a SpecServer
(``specserver_advisor.launch.validation``, which ``lint``, the webhook and the operator all call)
checks the names the operator will give the children; the operator's core imports them from here.
"""

from __future__ import annotations

from specserver_advisor.launch.names import MAX_BASE, child_name, lws_name

__all__ = ["MAX_BASE", "child_name", "lws_name"]
