"""Stable codes for what the advisor finds, shared by the operator's conditions and the linter.

Codes follow the lint rule catalogue (SPEC0xx); ``startup_error_code`` maps an error SGLang would
raise at startup to the rule that catches it. Pure.
"""

from __future__ import annotations

from typing import Protocol


class StartupFailure(Protocol):
    """What this module reads of ``sglang.resolve.StartupError`` (findings sit below ``sglang``)."""

    @property
    def exception(self) -> str: ...

    @property
    def message(self) -> str: ...


MAX_RUNNING_UNSET = "SPEC001"
DRAFT_CONTEXT_SHORTER = "SPEC002"
CONTEXT_OVERRIDE_ENV = "SPEC003"
DRAFT_TOKENS_REWRITTEN = "SPEC004"
PARTIAL_SPEC_SHAPE = "SPEC005"
LOSSY_ACCEPT_THRESHOLD = "SPEC006"
DRAFT_PATH_MISMATCH = "SPEC007"
NGRAM_MIXED_CHUNK = "SPEC008"
CAP_EXCEEDS_KV_POOL = "SPEC009"
TOPK_BACKEND_PAGE_SIZE = "SPEC010"
METRICS_DISABLED = "SPEC011"
LOOPBACK_HOST = "SPEC012"
UNKNOWN_ALGORITHM = "SPEC013"
DRAFT_ROPE_SCALING_MISSING = "SPEC014"
REMOVED_FLAG = "SPEC015"
NO_KV_MEMORY = "SPEC016"
TOPK_WITHOUT_DRAFT_TOKENS = "SPEC017"
DETERMINISTIC_RCCL_ON_ROCM = "SPEC019"


def startup_error_code(error: StartupFailure) -> str:
    """The rule code for an error SGLang raises during argument resolution."""
    message = error.message
    if error.exception == "AssertionError":
        return PARTIAL_SPEC_SHAPE
    if message.startswith("Unknown speculative algorithm"):
        return UNKNOWN_ALGORITHM
    if message.startswith("--disable-custom-all-reduce cannot be combined"):
        return DETERMINISTIC_RCCL_ON_ROCM
    if "supported for deterministic inference" in message:  # no rule: it names the backend
        return "StartupError"
    if "page_size" in message or "trtllm_mha" in message:
        return TOPK_BACKEND_PAGE_SIZE
    if "draft-model-path" in message or "draft_model_path" in message:
        return DRAFT_PATH_MISMATCH
    return "StartupError"
