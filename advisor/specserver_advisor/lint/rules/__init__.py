"""The explicit rule registry: one module per rule, listed here (no discovery magic)."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from specserver_advisor.lint.rules import (
    bench001_bench_ignore_eos,
    bench002_bench_synthetic_only,
    bench003_bench_concurrency_over_cap,
    bench004_bench_lifetime_accept_length,
    mn001_nnodes_not_group_size,
    mn002_node_rank_not_from_index,
    mn003_dist_init_addr_not_leader,
    mn004_service_selects_workers,
    mn005_tp_not_divisible_by_nodes,
    mn006_worker_probe_never_passes,
    pod001_tp_exceeds_gpu_limit,
    pod002_shm_not_memory,
    pod003_liveness_without_startup,
    pod004_hf_token_plain_env,
    pod005_hf_cache_emptydir,
    pod006_image_unpinned,
    pod007_no_gpu_resource,
    pod008_gpu_count_from_default,
    pod009_operator_refuses,
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
    spec017_topk_without_draft_tokens,
    spec018_adaptive_zero_step_tier,
    spec019_deterministic_rccl_on_rocm,
)
from specserver_advisor.lint.rules.engine_codes import DOCS as ENGINE_DOCS

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
    spec017_topk_without_draft_tokens,
    spec018_adaptive_zero_step_tier,
    spec019_deterministic_rccl_on_rocm,
    bench001_bench_ignore_eos,
    bench002_bench_synthetic_only,
    bench003_bench_concurrency_over_cap,
    bench004_bench_lifetime_accept_length,
    pod001_tp_exceeds_gpu_limit,
    pod002_shm_not_memory,
    pod003_liveness_without_startup,
    pod004_hf_token_plain_env,
    pod005_hf_cache_emptydir,
    pod006_image_unpinned,
    pod007_no_gpu_resource,
    pod008_gpu_count_from_default,
    pod009_operator_refuses,
    mn001_nnodes_not_group_size,
    mn002_node_rank_not_from_index,
    mn003_dist_init_addr_not_leader,
    mn004_service_selects_workers,
    mn005_tp_not_divisible_by_nodes,
    mn006_worker_probe_never_passes,
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
    "INFO002": ("unresolved-variable", "info"),
    "INFO003": ("template-skipped", "info"),
    "INFO004": ("not-fully-evaluated", "info"),
    "INFO005": ("gpu-unknown", "info"),
    "INFO006": ("no-launch-taken", "info"),
    "SUPP001": ("unused-suppression", "warning"),
}


@dataclass(frozen=True)
class RuleDoc:
    """What ``explain``, docs/rules.md and SARIF say about one code (rule or engine code)."""

    code: str
    name: str
    severity: str
    summary: str
    fix: str
    doc: str  # What it does / Why it matters / Example (fails) / Use instead


def documentation() -> dict[str, RuleDoc]:
    """Every code the tool can print, rules first."""
    out = {
        code: RuleDoc(
            code,
            m.NAME,
            m.SEVERITY,
            m.SUMMARY,
            m.FIX,
            (m.__doc__ or "").strip().split("\n", 1)[-1].strip(),
        )
        for code, m in RULES.items()
    }
    for code, (name, severity) in ENGINE_CODES.items():
        summary, fix, doc = ENGINE_DOCS[code]
        out[code] = RuleDoc(code, name, severity, summary, fix, doc)
    return out


def describe(code_or_name: str) -> RuleDoc:
    """One code's documentation by code or name (KeyError when there is none)."""
    key = code_or_name.strip()
    docs = documentation()
    if key.upper() in docs:
        return docs[key.upper()]
    for doc in docs.values():
        if key.lower() == doc.name:
            return doc
    raise KeyError(code_or_name)
