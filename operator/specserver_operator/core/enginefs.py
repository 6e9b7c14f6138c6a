"""Where the engine pod writes, and the writable volumes and environment that put it there
(pure): the advisor's ``launch.enginefs``, re-exported for the operator's templates (the one
validation, ``launch.validation``, reads the same lists).
"""

from __future__ import annotations

from specserver_advisor.launch.enginefs import *  # noqa: F403
