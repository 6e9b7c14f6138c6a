"""The startup refusals that depend on the card (pure): what ``resolve_launch`` cannot raise
because it knows whether the card runs ROCm but not its compute capability.

Today one: deterministic inference's attention backend (``handle_deterministic_inference``,
which runs before the speculative hook, so its error comes first). With no
``--attention-backend`` it picks its own (after a model hook's fill: DeepSeek-V3 on sm100 is
given trtllm_mla first, which it then refuses); a given backend outside its list, or one an
absorbed-MLA model cannot use, is a ValueError (``resolve_deterministic``). ``plan`` and the
launch model (the operator's StartupError) add these to the resolution's errors; the server
prediction the oracle checks (``serverargs.predict_server``) reads the same
``serverargs.backend_before_default``.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.gpus import Gpu
from specserver_advisor.sglang import configvalues
from specserver_advisor.sglang.resolve import StartupError
from specserver_advisor.sglang.serverargs import backend_before_default, is_mla


def card_startup_errors(
    args: dict[str, Any], target_config: dict[str, Any] | None, gpu: Gpu
) -> list[StartupError]:
    """SGLang's startup errors for ``args`` on ``gpu`` that the resolver does not raise."""
    arch = configvalues.architecture(target_config)
    _, refused = backend_before_default(args, gpu, is_mla(target_config), arch)
    if refused is None:
        return []
    return [StartupError("ValueError", refused, ("attention_backend",))]
