"""The data-parallel attention layout (``sglang/dplayout.py``) held to SGLang 0.5.23's own
``handle_deprecated_dp_attention`` (``arg_groups/parallel_hook.py``) and
``attn_dp_enabled_of`` (``runtime_context.py``), run here on every combination of the three
flags: the resolver, the all-reduce's FlashInfer fusion and the plan's DP-attention note all
read the layout through it."""

from __future__ import annotations

import itertools
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from oracle import sglang_function
from specserver_advisor.sglang.dplayout import attn_dp_enabled, dp_attention_layout


def _sglang_layout(enable: bool, dp: int, attn_dp: int) -> SimpleNamespace:
    """The fields after SGLang's handler declares its resolution."""
    cfg = SimpleNamespace(
        enable_dp_attention=enable, dp_size=dp, attn_dp_size=attn_dp, ep_join_mode=None
    )

    def declare(_args: Any, _source: str, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(cfg, name, value)

    handler = sglang_function(
        "srt/arg_groups/parallel_hook.py",
        "handle_deprecated_dp_attention",
        {"Any": Any, "resolving_view": lambda args: cfg, "declare_resolution": declare},
    )
    handler(cfg)
    return cfg


def _sglang_attn_dp_enabled(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``attn_dp_enabled_of``, whose body imports ``ep_scale_joiner_of`` from SGLang's
    ``arg_groups/model_override_base.py``: that function is SGLang's own too, served from a
    stand-in module (the project's environment has no sglang package)."""
    namespace: dict[str, Any] = {"Any": Any}
    joiner = sglang_function(
        "srt/arg_groups/model_override_base.py", "ep_scale_joiner_of", namespace
    )
    packages = ("sglang", "sglang.srt", "sglang.srt.arg_groups")
    for name in packages:
        monkeypatch.setitem(sys.modules, name, ModuleType(name))
    override_base = ModuleType("sglang.srt.arg_groups.model_override_base")
    override_base.ep_scale_joiner_of = joiner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, override_base.__name__, override_base)
    return sglang_function("srt/runtime_context.py", "attn_dp_enabled_of", {"Any": Any})


def test_the_layout_and_attention_dp_are_sglangs(monkeypatch: pytest.MonkeyPatch) -> None:
    enabled = _sglang_attn_dp_enabled(monkeypatch)
    seen = set()
    for enable, dp, attn_dp in itertools.product((False, True), (1, 2, 8), (1, 4)):
        want = _sglang_layout(enable, dp, attn_dp)
        given = {"dp_size": dp, "attn_dp_size": attn_dp}
        if enable:
            given["enable_dp_attention"] = True
        got = dp_attention_layout(given)
        assert (got["dp_size"], got["attn_dp_size"]) == (want.dp_size, want.attn_dp_size), given
        runs = enabled(want)
        assert attn_dp_enabled(given) == runs, given
        seen.add(runs)
    assert seen == {True, False}
