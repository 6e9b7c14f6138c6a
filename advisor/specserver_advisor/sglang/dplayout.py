"""How SGLang 0.5.23 reads a launch's data-parallel attention layout (pure).

``--enable-dp-attention`` is the deprecated spelling of ``--attn-dp-size``: its
``--dp-size`` moves into the attention-DP size (``_handle_deprecated_dp_attention``), so at
``--dp-size`` 1 no attention-DP group forms; attention DP runs when that size is above one
(``attn_dp_enabled_of``). The resolver, the performance model's all-reduce and the plan's
notes read the layout here, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def dp_attention_layout(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with ``--enable-dp-attention`` turned into ``attn_dp_size`` as SGLang does
    (``dp_size`` then counts replicas: 1)."""
    out = dict(values)
    if out.pop("enable_dp_attention", False) and int(out.get("attn_dp_size") or 1) == 1:
        out["attn_dp_size"] = out.get("dp_size", 1)
        out["dp_size"] = 1
    return out


def attn_dp_enabled(values: Mapping[str, Any]) -> bool:
    """Whether attention DP runs (``attn_dp_enabled_of``: an attention-DP size above one)."""
    return int(dp_attention_layout(values).get("attn_dp_size") or 1) > 1
