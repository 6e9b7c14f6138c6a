"""The operator's engine config: the advisor's one launch model (``specserver_advisor.launch``).

Kept as the operator's import point; every decision is made by the advisor, so the operator,
``lint``, ``plan --from`` and ``replay`` render and plan a SpecServer the same way.
"""

from __future__ import annotations

from specserver_advisor.launch import (
    ARG_SOURCES,
    NEEDS_DRAFT,
    OWNED,
    EngineConfig,
    build_engine_config,
    extra_args_refusal,
    policy_context_for,
)

__all__ = [
    "ARG_SOURCES",
    "NEEDS_DRAFT",
    "OWNED",
    "EngineConfig",
    "build_engine_config",
    "extra_args_refusal",
    "policy_context_for",
]
