"""SGLang 0.5.23's speculative-decoding tables: algorithm families, MTP targets, auto shapes.

The constants ``resolve_launch`` and its algorithm handlers consult, copied from SGLang's
``server_args`` / ``speculative_hook`` (the oracle tests in tests/oracle compare the resolver's
outcome with SGLang's own), and ``auto_choose`` (``_auto_choose_speculative_params``). Pure data.
"""

from __future__ import annotations

BUILTIN_ALGORITHMS = (
    "EAGLE",
    "EAGLE3",
    "NEXTN",
    "STANDALONE",
    "NGRAM",
    "DFLASH",
    "DSPARK",
    "UNO",
    "FROZEN_KV_MTP",
)
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
#: ``is_eagle()``: algorithms whose tokenizer reserves draft slots in every prompt.
RESERVING_ALGORITHMS = ("EAGLE", "EAGLE3", "FROZEN_KV_MTP")
MIXED_CHUNK_SUPPORTED = ("EAGLE", "EAGLE3", "DFLASH", "DSPARK")
RESETS_MAX_RUNNING = ("EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "FROZEN_KV_MTP")
SPEC_MAX_RUNNING_REQUESTS = 48
RESET_MESSAGE = (
    "Max running requests is reset to 48 for speculative decoding. You can override this by "
    "explicitly setting --max-running-requests."
)
GEMMA4_ASSISTANTS = ("Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM")
#: Targets whose draft is their own MTP layers (draft path defaults to the model path).
MTP_TARGETS = (
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV4ForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "GlmMoeDsaForCausalLM",
    "BailingMoeForCausalLM",
    "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "HYV3ForCausalLM",
    "HYV4ForCausalLM",
    "Qwen4ExpForConditionalGeneration",
)
#: Targets whose checkpoints carry MTP layers that SGLang loads path-less via the model path.
PATHLESS_MTP_ARCHS = (
    *MTP_TARGETS,
    "Qwen3NextForCausalLM",
    "Qwen3MoeForCausalLM",
    "MiMoForCausalLM",
    "MiMoV2ForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Step3p5ForCausalLM",
    "NemotronHForCausalLM",
)
#: ``_auto_choose_speculative_params`` (checked after the STANDALONE row).
AUTO_CHOOSE_TABLE: tuple[tuple[tuple[str, ...], tuple[int, int, int]], ...] = (
    (("LlamaForCausalLM",), (5, 4, 8)),
    (
        (
            "DeepseekV32ForCausalLM",
            "DeepseekV3ForCausalLM",
            "DeepseekV2ForCausalLM",
            "GptOssForCausalLM",
            "Glm4MoeForCausalLM",
            "Glm4MoeLiteForCausalLM",
            "GlmMoeDsaForCausalLM",
            "BailingMoeForCausalLM",
            "BailingMoeV2ForCausalLM",
            "BailingMoeV2_5ForCausalLM",
            "MistralLarge3ForCausalLM",
            "PixtralForConditionalGeneration",
            "MiMoV2ForCausalLM",
            "MiMoV2FlashForCausalLM",
        ),
        (3, 1, 4),
    ),
    (("Grok1ForCausalLM", "Grok1VForCausalLM"), (5, 4, 8)),
)
AUTO_CHOOSE_STANDALONE = (3, 1, 4)
AUTO_CHOOSE_DEFAULT = (3, 1, 4)
PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")
#: What SGLang 0.5.23 raises (TypeError) for an eagle-family launch that sets the number of
#: steps but not topk: the unset topk reaches ``speculative_eagle_topk > 1``.
NONE_TOPK_CRASH = "'>' not supported between instances of 'NoneType' and 'int'"
DEFAULT_DSPARK_GAMMA = 7
DFLASH_FALLBACK_BLOCK = 16
#: ``DEFAULT_ADAPTIVE_CONFIG``: the union of every batch-size slot's candidate steps.
ADAPTIVE_CANDIDATE_STEPS = (0, 1, 3, 5, 7)
ADAPTIVE_DEFAULT_STEPS = ADAPTIVE_CANDIDATE_STEPS[len(ADAPTIVE_CANDIDATE_STEPS) // 2]


def auto_choose(algorithm: str, architecture: str) -> tuple[tuple[int, int, int], str]:
    """``_auto_choose_speculative_params``: (steps, topk, draft tokens) and why."""
    if algorithm == "STANDALONE":
        return AUTO_CHOOSE_STANDALONE, "auto-chosen for STANDALONE"
    for archs, shape in AUTO_CHOOSE_TABLE:
        if architecture in archs:
            return shape, f"auto-chosen for target architecture {architecture}"
    return AUTO_CHOOSE_DEFAULT, f"auto-chosen default (architecture {architecture or 'unknown'})"
