"""The operator's engine config: the advisor's one pass from spec to engine, linted.

Kept as the operator's import point; every decision is made by the advisor (``launch.settle``,
with the lint rules' warnings added one floor up by ``launchlint``), so the operator, ``lint``,
``plan --from`` and ``replay`` render and plan a SpecServer the same way.
"""

from __future__ import annotations

from specserver_advisor.launch import (
    ARG_SOURCES,
    NEEDS_DRAFT,
    OWNED,
    EngineConfig,
    extra_args_refusal,
    policy_context_for,
)
from specserver_advisor.launchlint import build_engine_config

__all__ = [
    "ARG_SOURCES",
    "NEEDS_DRAFT",
    "OWNED",
    "EngineConfig",
    "build_engine_config",
    "extra_args_refusal",
    "policy_context_for",
]
