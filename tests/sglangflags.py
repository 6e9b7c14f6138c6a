"""SGLang 0.5.23 flags that its dumped parser table alone does not show as accepted (tests only).

``sglang serve`` registers some flags by hand outside ``ServerArgs.add_cli_args`` and keeps
deprecated spellings that only warn; both the advisor's argv parser
(tests/advisor/sglang/test_sglang_fixes.py) and the engine's pass-through
(tests/engine/test_serve_passthrough.py) must accept each of these, with its value.
"""

from __future__ import annotations

#: Each as argv after ``--model-path m``: flag and value (if it takes one).
HAND_REGISTERED_AND_DEPRECATED: list[list[str]] = [
    ["--reasoning-parser", "qwen3"],
    ["--tool-call-parser", "qwen25"],
    ["--sampling-backend", "pytorch"],
    ["--kv-canary-real-data", "none"],
    ["--disable-cuda-graph"],
    ["--enable-dp-attention"],
    ["--monokernel-backend", "amd"],
    ["--enable-flashinfer-allreduce-fusion"],
]
