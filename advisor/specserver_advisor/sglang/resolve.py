"""Resolve a launch the way SGLang 0.5.23's speculative hook does, saying why for each value.

Input: parsed server flags, the environment, and the target/draft HF configs. Output: every
speculative value with its source (user / default / auto / forced / derived) and the reason,
SGLang's warnings, and the hard errors it would raise at startup with its own message.
Used by ``plan``, the lint rules, the operator's validation and the engine preflight. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.sglang.flags import default_of

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


@dataclass(frozen=True)
class Value:
    """A resolved value and why it is what it is."""

    value: Any
    source: str  # user | default | auto | forced | derived
    reason: str = ""


@dataclass(frozen=True)
class StartupError:
    """An exception SGLang raises during argument resolution (the server never starts)."""

    exception: str  # ValueError | AssertionError | NotImplementedError
    message: str
    fields: tuple[str, ...] = ()


@dataclass
class Resolution:
    """What the server will really run with."""

    values: dict[str, Value] = field(default_factory=dict)
    errors: list[StartupError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def get(self, name: str) -> Any:
        return self.values[name].value if name in self.values else None

    @property
    def algorithm(self) -> str | None:
        value = self.get("speculative_algorithm")
        return str(value) if value is not None else None

    @property
    def speculative(self) -> bool:
        return self.algorithm is not None

    @property
    def max_draft_tokens(self) -> int:
        """``max_speculative_num_draft_tokens``: adaptive mode sizes for its largest candidate."""
        ndt = int(self.get("speculative_num_draft_tokens") or 0)
        if self.get("speculative_adaptive"):
            return max(ndt, max(ADAPTIVE_CANDIDATE_STEPS) + 1)
        return ndt

    @property
    def reserved_tokens(self) -> int:
        """Tokens the tokenizer adds to every prompt (``compute_num_reserved_tokens``)."""
        if self.algorithm not in RESERVING_ALGORITHMS:
            return 0
        steps = self.get("speculative_num_steps") or 0
        topk = self.get("speculative_eagle_topk") or 0
        return int(max(topk * steps, self.max_draft_tokens))

    @property
    def draft_slots(self) -> int:
        """KV slots one request allocates per decode step."""
        steps = self.get("speculative_num_steps") or 0
        topk = self.get("speculative_eagle_topk") or 0
        return int(max(steps * topk, self.get("speculative_num_draft_tokens") or 0))


class _Resolver:
    def __init__(
        self,
        args: dict[str, Any],
        target: dict[str, Any] | None,
        draft: dict[str, Any] | None,
        device: str,
    ) -> None:
        self.args = args
        self.target = target or {}
        self.draft = draft
        self.device = device
        self.out = Resolution()

    # helpers ----------------------------------------------------------------
    def user(self, name: str) -> Any:
        return self.args.get(name)

    def cur(self, name: str) -> Any:
        if name in self.out.values:
            return self.out.values[name].value
        return self.args.get(name, default_of(name))

    def keep(self, *names: str) -> None:
        for name in names:
            if name in self.args:
                self.out.values[name] = Value(self.args[name], "user")
            else:
                self.out.values[name] = Value(default_of(name), "default")

    def set(self, name: str, value: Any, source: str, reason: str = "") -> None:
        self.out.values[name] = Value(value, source, reason)

    def fail(self, message: str, *fields: str, exc: str = "ValueError") -> None:
        self.out.errors.append(StartupError(exc, message, fields))

    def warn(self, message: str) -> None:
        self.out.warnings.append(message)

    @property
    def attn_dp(self) -> bool:
        """``attn_dp_enabled_of``: ``--attn-dp-size`` > 1 (``--enable-dp-attention`` is the
        deprecated spelling: it moves ``--dp-size`` into the attention-DP size)."""
        if int(self.cur("attn_dp_size") or 1) > 1:
            return True
        return bool(self.cur("enable_dp_attention")) and int(self.cur("dp_size") or 1) > 1

    @property
    def arch(self) -> str:
        archs = self.target.get("architectures") or [""]
        return str(archs[0])

    # pipeline ---------------------------------------------------------------
    def run(self) -> Resolution:
        self.keep(
            "max_running_requests",
            "enable_mixed_chunk",
            "disable_overlap_schedule",
            "speculative_draft_model_path",
            "speculative_draft_model_revision",
            "speculative_num_steps",
            "speculative_eagle_topk",
            "speculative_num_draft_tokens",
            "speculative_accept_threshold_single",
            "speculative_accept_threshold_acc",
            "page_size",
            "attention_backend",
            "speculative_use_rejection_sampling",
            "speculative_adaptive",
        )
        raw = self.user("speculative_algorithm")
        if raw is None:
            self.set("speculative_algorithm", None, "default", "speculation off")
            return self.out
        algo = str(raw).upper()
        if algo not in BUILTIN_ALGORITHMS:
            self.fail(f"Unknown speculative algorithm name: {raw}", "speculative_algorithm")
            self.set("speculative_algorithm", raw, "user")
            return self.out
        resolved = self._alias(algo, str(raw))
        if resolved is None:
            return self.out
        algo = resolved
        if self.cur("speculative_draft_model_path") and not self.user(
            "speculative_draft_model_revision"
        ):
            self.set(
                "speculative_draft_model_revision",
                "main",
                "default",
                "draft revision defaults to main when a draft path is set",
            )
        if self.cur("speculative_adaptive"):
            self._adaptive(algo)
            if self.out.errors:
                return self.out
        handler = {
            "NGRAM": self._ngram,
            "DFLASH": self._dflash,
            "DSPARK": self._dspark,
            "UNO": self._uno,
            "FROZEN_KV_MTP": self._frozen_kv_mtp,
        }.get(algo, self._eagle)
        handler(algo)
        if algo in RESETS_MAX_RUNNING and self.user("max_running_requests") is None:
            self.set("max_running_requests", SPEC_MAX_RUNNING_REQUESTS, "forced", RESET_MESSAGE)
            self.warn(RESET_MESSAGE)
        return self.out

    def _alias(self, algo: str, raw: str) -> str | None:
        reason = "upper-cased" if raw != algo else ""
        draft_archs = (self.draft or {}).get("architectures") or []
        if any(a in GEMMA4_ASSISTANTS for a in draft_archs):
            if algo == "EAGLE3":
                self.fail(
                    "Gemma4 assistant drafts require --speculative-algorithm NEXTN or EAGLE; "
                    "EAGLE3 is not supported for this draft.",
                    "speculative_algorithm",
                )
                self.set("speculative_algorithm", algo, "user")
                return None
            if algo in ("NEXTN", "EAGLE"):
                self.set(
                    "speculative_algorithm",
                    "FROZEN_KV_MTP",
                    "forced",
                    "Gemma4 assistant draft promotes NEXTN/EAGLE to FROZEN_KV_MTP",
                )
                return "FROZEN_KV_MTP"
        if algo == "NEXTN":
            self.set("speculative_algorithm", "EAGLE", "forced", "NEXTN is an alias of EAGLE")
            return "EAGLE"
        self.set("speculative_algorithm", algo, "user", reason)
        return algo

    def _mtp_draft_path(self) -> None:
        if self.arch not in MTP_TARGETS:
            return
        if self.user("speculative_draft_model_path") is None:
            self.set(
                "speculative_draft_model_path",
                self.user("model_path"),
                "derived",
                f"{self.arch} carries its MTP layers; the draft is the target checkpoint",
            )
            self.set(
                "speculative_draft_model_revision",
                self.user("revision"),
                "derived",
                "draft revision follows --revision for MTP targets",
            )
        elif self.arch not in ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration"):
            self.warn("DeepSeek MTP does not require setting speculative_draft_model_path.")

    def _eagle(self, algo: str) -> None:
        if algo == "STANDALONE" and self.attn_dp:
            self.fail(
                "Currently standalone speculative decoding does not support dp attention.",
                "attn_dp_size",
            )
            return
        if self.device == "cpu":
            self.set(
                "disable_overlap_schedule",
                True,
                "forced",
                "Overlap schedule is not implemented for speculative decoding on CPU.",
            )
        if self.cur("enable_mixed_chunk") and algo not in MIXED_CHUNK_SUPPORTED:
            msg = (
                f"Mixed chunked prefill is disabled: {algo} speculative decoding does not "
                "support it."
            )
            self.set("enable_mixed_chunk", False, "forced", msg)
            self.warn(msg)
        self._mtp_draft_path()
        steps, topk, ndt = (
            self.user("speculative_num_steps"),
            self.user("speculative_eagle_topk"),
            self.user("speculative_num_draft_tokens"),
        )
        if self.cur("speculative_adaptive"):
            pass  # shape set by _adaptive
        elif steps is None:
            if topk is not None or ndt is not None:
                self.fail(
                    "assert speculative_eagle_topk is None and speculative_num_draft_tokens "
                    "is None (set --speculative-num-steps together with --speculative-eagle-"
                    "topk / --speculative-num-draft-tokens)",
                    "speculative_eagle_topk",
                    "speculative_num_draft_tokens",
                    exc="AssertionError",
                )
                return
            shape, why = auto_choose(algo, self.arch)
            for name, value in zip(
                ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"),
                shape,
                strict=True,
            ):
                self.set(name, value, "auto", why)
        topk = self.cur("speculative_eagle_topk")
        backend = self.cur("attention_backend")
        if topk is None and (
            backend == "trtllm_mha" or not self.cur("speculative_use_rejection_sampling")
        ):
            # --speculative-num-steps without --speculative-eagle-topk: SGLang 0.5.23 compares
            # the unset topk with 1 and crashes (speculative_hook.py, the page-tree check).
            self.fail(
                NONE_TOPK_CRASH,
                "speculative_num_steps",
                "speculative_eagle_topk",
                exc="TypeError",
            )
            return
        if topk is not None and topk > 1 and backend == "trtllm_mha":
            self.fail(
                "trtllm_mha backend only supports topk = 1 for speculative decoding.",
                "attention_backend",
                "speculative_eagle_topk",
            )
            return
        self._rejection_sampling(algo)
        if self.out.errors:
            return
        steps = self.cur("speculative_num_steps")
        if topk == 1 and self.cur("speculative_num_draft_tokens") != steps + 1:
            msg = (
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                "speculative_eagle_topk == 1"
            )
            if self.user("speculative_num_draft_tokens") is not None:
                self.warn(msg)
            self.set("speculative_num_draft_tokens", steps + 1, "forced", msg)
        page = self.cur("page_size") or 1
        if (
            topk is not None
            and topk > 1
            and page > 1
            and backend is not None
            and backend not in PAGE_TREE_BACKENDS
        ):
            self.fail(
                f"speculative_eagle_topk > 1 with page_size > 1 is only supported on "
                f"{PAGE_TREE_BACKENDS}; got attention_backend={backend!r}. Use page_size "
                "== 1 or one of those backends.",
                "speculative_eagle_topk",
                "page_size",
            )

    def _adaptive(self, algo: str) -> None:
        """``_maybe_disable_adaptive`` + ``_init_adaptive_speculative_params`` (before the
        algorithm's handler): off outside EAGLE/EAGLE3 with topk 1 and no attention DP."""
        topk = self.user("speculative_eagle_topk")
        reason = None
        if algo not in ("EAGLE", "EAGLE3"):
            reason = f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
        elif topk is not None and topk != 1:
            reason = f"speculative_eagle_topk={topk} (only topk=1 is supported)"
        elif self.attn_dp:
            reason = (
                "attention DP is not supported (adaptive tier decisions are not synchronized "
                "across DP ranks)"
            )
        elif self.cur("enable_multi_layer_eagle"):
            reason = "enable_multi_layer_eagle=True is not supported"
        elif self.cur("enable_two_batch_overlap"):
            reason = "enable_two_batch_overlap=True is not supported"
        elif self.cur("enable_pdmux"):
            reason = "enable_pdmux=True is not supported"
        if reason is not None:
            msg = (
                f"speculative_adaptive disabled: {reason}. "
                "Falling back to static speculative params."
            )
            self.set("speculative_adaptive", False, "forced", msg)
            self.warn(msg)
            return
        if topk is None:
            self.set("speculative_eagle_topk", 1, "default", "adaptive mode defaults topk to 1")
        steps = self.user("speculative_num_steps")
        if steps is None:
            steps = ADAPTIVE_DEFAULT_STEPS
            self.set(
                "speculative_num_steps",
                steps,
                "default",
                "middle of the adaptive candidate steps",
            )
        if steps not in ADAPTIVE_CANDIDATE_STEPS:
            self.fail(
                f"--speculative-num-steps={steps} is not in the adaptive config candidate_steps "
                f"{list(ADAPTIVE_CANDIDATE_STEPS)}. Pass one of those values.",
                "speculative_num_steps",
            )
            return
        self.set(
            "speculative_num_draft_tokens",
            steps + 1,
            "forced",
            "adaptive mode uses num_steps + 1 draft tokens",
        )

    def _ngram(self, algo: str) -> None:
        if self.device not in ("cuda", "cpu", "xpu"):
            self.fail("Ngram speculative decoding only supports CUDA, CPU, or XPU devices.")
        msg = "The mixed chunked prefill are disabled because of using ngram speculative decoding."
        self.set("enable_mixed_chunk", False, "forced", msg)
        if self.user("enable_mixed_chunk"):
            self.warn(msg)
        breadth = self.cur("speculative_ngram_max_bfs_breadth")
        self.set(
            "speculative_eagle_topk",
            breadth,
            "forced",
            "NGRAM sets topk to --speculative-ngram-max-bfs-breadth",
        )
        ndt = self.user("speculative_num_draft_tokens")
        if ndt is None:
            ndt = 12
            self.set(
                "speculative_num_draft_tokens",
                12,
                "default",
                "speculative_num_draft_tokens is set to 12 by default for ngram",
            )
        if self.user("speculative_num_steps") is None:
            self.set("speculative_num_steps", ndt // breadth, "derived", "num_draft_tokens // topk")
        page = self.cur("page_size") or 1
        backend = self.cur("attention_backend")
        if breadth > 1 and page > 1 and backend not in (None, "flashinfer"):
            self.fail(
                f"speculative_eagle_topk({breadth}) > 1 with page_size({page}) > 1 is "
                "unstable and produces incorrect results for paged attention backends. "
                "This combination is only supported for the 'flashinfer' backend.",
                "page_size",
                "attention_backend",
            )
        if self.attn_dp:
            self.fail(
                "Currently ngram speculative decoding does not support dp attention.",
                "attn_dp_size",
            )

    def _dflash(self, algo: str) -> None:
        if self.cur("pp_size") != 1:
            self.fail("Currently DFLASH speculative decoding only supports pp_size == 1.")
        if self.cur("speculative_draft_model_path") is None:
            self.fail(
                "DFLASH speculative decoding requires setting --speculative-draft-model-path.",
                "speculative_draft_model_path",
            )
        self._force_single_step("DFLASH")
        block = self.user("speculative_dflash_block_size")
        ndt = self.user("speculative_num_draft_tokens")
        if block is not None and ndt is not None and block != ndt:
            self.fail(
                "--speculative-dflash-block-size must equal --speculative-num-draft-tokens "
                "when both are set.",
                "speculative_dflash_block_size",
            )
        inferred = (self.draft or {}).get("block_size")
        value, why = next(
            (
                (v, w)
                for v, w in (
                    (block, "--speculative-dflash-block-size"),
                    (ndt, "user"),
                    (inferred, "draft config block_size"),
                )
                if v is not None
            ),
            (DFLASH_FALLBACK_BLOCK, "fallback 16"),
        )
        self.set("speculative_num_draft_tokens", int(value), "derived", why)

    def _dspark(self, algo: str) -> None:
        if self.cur("speculative_draft_model_path") is None:
            self.set(
                "speculative_draft_model_path",
                self.user("model_path"),
                "derived",
                "DSPARK uses the target checkpoint's bundled head or its dspark/ subfolder; "
                "without either SGLang raises 'DSpark dense speculative decoding requires "
                "setting --speculative-draft-model-path.'",
            )
        self._force_single_step("DSPARK")
        gamma = (
            self.user("speculative_dspark_block_size")
            or (self.draft or {}).get("block_size")
            or DEFAULT_DSPARK_GAMMA
        )
        self.set("speculative_num_draft_tokens", int(gamma) + 1, "derived", "gamma + 1")

    def _frozen_kv_mtp(self, algo: str) -> None:
        msg = (
            "Mixed chunked prefill is disabled because of using Frozen-KV MTP speculative decoding."
        )
        if self.cur("enable_mixed_chunk"):
            self.warn(msg)
        self.set("enable_mixed_chunk", False, "forced", msg)

    def _uno(self, algo: str) -> None:
        if self.device != "cuda":
            self.fail("UNO only supports CUDA.")
        if self.user("speculative_draft_model_path") is not None:
            self.fail(
                "UNO reuses the target model and does not accept --speculative-draft-model-path.",
                "speculative_draft_model_path",
            )
        if self.cur("uno_lora_path") is None:
            self.fail("UNO requires --uno-lora-path.", "uno_lora_path")
        ndt = self.cur("speculative_num_draft_tokens")
        if ndt is None or ndt < 1:
            self.fail(
                "UNO requires --speculative-num-draft-tokens >= 1.", "speculative_num_draft_tokens"
            )
        if self.cur("tp_size") != 1 or self.cur("pp_size") != 1:
            self.fail("UNO requires TP=PP=1.", "tp_size")
        self.set("enable_mixed_chunk", False, "forced", "UNO disables mixed chunked prefill")

    def _force_single_step(self, algo: str) -> None:
        for name in ("speculative_num_steps", "speculative_eagle_topk"):
            if self.user(name) not in (None, 1):
                self.warn(f"{algo} forces {name}=1 (was {self.user(name)}).")
            self.set(name, 1, "forced", f"{algo} uses one step and topk 1")

    def _rejection_sampling(self, algo: str) -> None:
        """The eagle-family handler's rejection-sampling checks (SGLang's own text)."""
        if not self.cur("speculative_use_rejection_sampling"):
            return
        if algo not in ("EAGLE", "EAGLE3"):
            self.fail(
                "--speculative-use-rejection-sampling is only supported for EAGLE / EAGLE3 / "
                f"NEXTN, not speculative_algorithm={algo}.",
                "speculative_use_rejection_sampling",
                exc="NotImplementedError",
            )
        elif self.cur("speculative_eagle_topk") != 1:
            self.fail(
                "--speculative-use-rejection-sampling requires --speculative-eagle-topk=1.",
                "speculative_use_rejection_sampling",
            )
        elif (
            self.cur("speculative_accept_threshold_single") != 1.0
            or self.cur("speculative_accept_threshold_acc") != 1.0
        ):
            self.fail(
                "--speculative-use-rejection-sampling is incompatible with "
                "--speculative-accept-threshold-single / --speculative-accept-threshold-acc; "
                "rejection sampling ignores the accept thresholds.",
                "speculative_use_rejection_sampling",
            )


def auto_choose(algorithm: str, architecture: str) -> tuple[tuple[int, int, int], str]:
    """``_auto_choose_speculative_params``: (steps, topk, draft tokens) and why."""
    if algorithm == "STANDALONE":
        return AUTO_CHOOSE_STANDALONE, "auto-chosen for STANDALONE"
    for archs, shape in AUTO_CHOOSE_TABLE:
        if architecture in archs:
            return shape, f"auto-chosen for target architecture {architecture}"
    return AUTO_CHOOSE_DEFAULT, f"auto-chosen default (architecture {architecture or 'unknown'})"


def resolve_launch(
    args: dict[str, Any],
    target_config: dict[str, Any] | None = None,
    draft_config: dict[str, Any] | None = None,
    device: str = "cuda",
) -> Resolution:
    """Resolve speculative settings from parsed flags (``ParsedArgs.values``) and configs."""
    return _Resolver(args, target_config, draft_config, device).run()
