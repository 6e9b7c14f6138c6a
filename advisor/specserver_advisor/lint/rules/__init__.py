"""The explicit rule registry: one module per rule, listed here (no discovery magic)."""

from __future__ import annotations

from types import ModuleType

from specserver_advisor.lint.rules import (
    bench001_bench_ignore_eos,
    bench002_bench_synthetic_only,
    bench003_bench_concurrency_over_cap,
    bench004_bench_lifetime_accept_length,
    spec001_max_running_requests_unset,
    spec002_draft_context_shorter,
    spec003_context_override_env,
    spec004_draft_tokens_rewritten,
    spec005_partial_spec_shape,
    spec006_lossy_accept_threshold,
    spec007_draft_path_mismatch,
    spec008_ngram_mixed_chunk,
    spec009_cap_exceeds_kv_pool,
    spec010_topk_backend_page_size,
    spec011_metrics_disabled,
    spec012_loopback_host,
    spec013_unknown_algorithm,
    spec014_draft_rope_scaling_missing,
    spec015_removed_flag,
    spec016_no_kv_memory,
)

_MODULES: tuple[ModuleType, ...] = (
    spec001_max_running_requests_unset,
    spec002_draft_context_shorter,
    spec003_context_override_env,
    spec004_draft_tokens_rewritten,
    spec005_partial_spec_shape,
    spec006_lossy_accept_threshold,
    spec007_draft_path_mismatch,
    spec008_ngram_mixed_chunk,
    spec009_cap_exceeds_kv_pool,
    spec010_topk_backend_page_size,
    spec011_metrics_disabled,
    spec012_loopback_host,
    spec013_unknown_algorithm,
    spec014_draft_rope_scaling_missing,
    spec015_removed_flag,
    spec016_no_kv_memory,
    bench001_bench_ignore_eos,
    bench002_bench_synthetic_only,
    bench003_bench_concurrency_over_cap,
    bench004_bench_lifetime_accept_length,
)


def _registry() -> dict[str, ModuleType]:
    rules: dict[str, ModuleType] = {}
    names: set[str] = set()
    for module in _MODULES:
        if module.CODE in rules or module.NAME in names:
            raise ValueError(f"duplicate rule {module.CODE} / {module.NAME}")
        rules[module.CODE] = module
        names.add(module.NAME)
    return rules


RULES: dict[str, ModuleType] = _registry()
#: Codes the engine itself emits (not rules): unreadable input, missing configs, suppressions.
ENGINE_CODES = {
    "INPUT001": ("unreadable-input", "error"),
    "INFO001": ("config-not-found", "info"),
    "SUPP001": ("unused-suppression", "warning"),
}


def lookup(code_or_name: str) -> ModuleType:
    """A rule by code (SPEC003) or name (context-override-env)."""
    key = code_or_name.strip()
    if key.upper() in RULES:
        return RULES[key.upper()]
    for module in RULES.values():
        if key.lower() == module.NAME:
            return module
    raise KeyError(code_or_name)
