"""One pass's inputs for the operator's pure core, shared by the tests of every layer: the
snapshot ``observe`` would take of a SpecServer (``observed``: its configs from the bundled set
or the inline source), the default settings, and a condition of a planned status by type.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.loaders.configchain import ModelConfigs
from specserver_advisor.loaders.configs import bundled
from specserver_operator.core.desired import PassPlan
from specserver_operator.core.observed import Observed
from specserver_operator.core.passcache import PassCache
from specserver_operator.core.statusmodel import serialized
from specserver_operator.reconcile.configsource import from_inline
from specserver_operator.reconcile.observe import validated
from specserver_operator.reconcile.runsettings import Settings

NOW, NOW_TS = "2026-11-30T12:00:00Z", 1_800_000_000.0
SETTINGS = Settings()


def observed(
    body: dict[str, Any],
    children: dict[tuple[str, str], dict[str, Any]] | None = None,
    autoscalers: list[tuple[str, str, str, str]] | None = None,
    memo: PassCache | None = None,
) -> Observed:
    """The snapshot observe.py would take (configs as the bundled or inline source gives)."""
    memo = memo or PassCache()
    server, invalid = validated(body, memo)
    configs = None
    if server is not None:
        configs = from_inline(server.spec)
        if configs is None:
            target, draft = bundled(server.spec.model.path), bundled(server.spec.draft.path)  # type: ignore[union-attr]
            assert target is not None and draft is not None
            configs = ModelConfigs(target.config, draft.config, None, None, "bundled")
    return Observed(
        body=body,
        server=server,
        invalid=invalid,
        configs=configs,
        children=dict(children or {}),
        autoscalers=autoscalers,
        now=NOW,
        now_ts=NOW_TS,
    )


def condition(plan: PassPlan, type_: str) -> dict[str, Any]:
    found = [c for c in serialized(plan.status)["conditions"] if c["type"] == type_]
    assert found, type_
    return found[0]
