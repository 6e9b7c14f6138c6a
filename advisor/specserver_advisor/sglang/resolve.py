"""Resolve a launch the way SGLang 0.5.23's speculative hook does, saying why for each value.

Input: parsed server flags, the environment, and the target/draft HF configs. Output: every
speculative value with its source (user / default / auto / forced / derived) and the reason,
SGLang's warnings, and the hard errors it would raise at startup with its own message.
Used by ``plan``, the lint rules, the operator's validation and the engine preflight. Pure.
This module holds the result types and the pipeline; the configs are read with
``--json-model-override-args`` applied (``overrides``), the model hooks that run first live in
``resolve_model_hooks``, deterministic inference's checks in ``resolve_deterministic``, the
algorithm steps in ``resolve_eagle`` and ``resolve_other_algorithms``, SGLang's tables in
``speculative_tables``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.sglang import configvalues
from specserver_advisor.sglang.dplayout import attn_dp_enabled
from specserver_advisor.sglang.flagtable import default_of
from specserver_advisor.sglang.overrides import OverrideArgsError, effective_configs
from specserver_advisor.sglang.resolve_deterministic import deterministic
from specserver_advisor.sglang.resolve_eagle import adaptive, eagle
from specserver_advisor.sglang.resolve_model_hooks import model_hooks
from specserver_advisor.sglang.resolve_other_algorithms import ALGORITHM_HANDLERS
from specserver_advisor.sglang.speculative_tables import (
    ADAPTIVE_CANDIDATE_STEPS,
    BUILTIN_ALGORITHMS,
    GEMMA4_ASSISTANTS,
    RESERVING_ALGORITHMS,
    RESET_MESSAGE,
    RESETS_MAX_RUNNING,
    SPEC_MAX_RUNNING_REQUESTS,
)

#: Re-exported: callers import the tables they need beside the resolver.


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
    def reserved_tokens_error(self) -> str | None:
        """SGLang's TypeError when its tokenizer manager computes the reserved tokens at startup.

        ``compute_num_reserved_tokens`` is ``max(topk * steps, max draft tokens)``; with no
        draft-token count (topk > 1 without ``--speculative-num-draft-tokens``: resolution
        leaves it None) that is ``max(int, None)``. ``reserved_tokens`` still answers
        ``topk * steps`` (the named oracle difference ``reserved-tokens-unset-draft-tokens``).
        """
        if self.errors or self.algorithm not in RESERVING_ALGORITHMS:
            return None
        if self.get("speculative_num_draft_tokens") is not None:
            return None
        if self.get("speculative_adaptive"):
            return None
        return "'>' not supported between instances of 'NoneType' and 'int'"

    @property
    def draft_slots(self) -> int:
        """KV slots one request allocates per decode step."""
        steps = self.get("speculative_num_steps") or 0
        topk = self.get("speculative_eagle_topk") or 0
        return int(max(steps * topk, self.get("speculative_num_draft_tokens") or 0))


class Resolver:
    """One resolution in progress: the user's flags, the configs, and the values so far.

    The algorithm steps (``resolve_eagle``, ``resolve_other_algorithms``) read and record
    through ``user`` / ``cur`` / ``set`` / ``fail`` / ``warn``.
    """

    def __init__(
        self,
        args: dict[str, Any],
        target: dict[str, Any] | None,
        draft: dict[str, Any] | None,
        device: str,
        hip: bool = False,
    ) -> None:
        self.args = args
        self.device = device
        #: ROCm (``get_platform().is_hip``): SGLang's --device stays "cuda" there.
        self.hip = hip
        self.out = Resolution()
        #: The draft as given: SGLang reads its architecture for the algorithm alias without
        #: ``--json-model-override-args`` (``_resolve_speculative_algorithm_alias``).
        self.draft_as_given = draft
        try:
            target, draft = effective_configs(args, target, draft)
        except OverrideArgsError as exc:
            self.fail(exc.message, "json_model_override_args", exc=exc.exception)
        self.target = target or {}
        self.draft = draft

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
        names = ("attn_dp_size", "dp_size", "enable_dp_attention")
        return attn_dp_enabled({name: self.cur(name) for name in names})

    @property
    def arch(self) -> str:
        return configvalues.architecture(self.target)

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
        if self.out.errors:  # the model config could not be read (the override flag)
            return self.out
        if int(self.user("pp_size") or 1) > 1 and not self.cur("disable_overlap_schedule"):
            # overrides.py::_pipeline_parallel_overlap_disable, a post-process of every launch.
            msg = "Pipeline parallelism is incompatible with overlap schedule."
            self.set("disable_overlap_schedule", True, "forced", msg)
            self.warn(msg)
        model_hooks(self)  # handle_model_specific_adjustments: before the speculative hook
        if self.out.errors:
            return self.out
        deterministic(self)  # handle_deterministic_inference: after the model hooks
        if self.out.errors:
            return self.out
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
            adaptive(self, algo)
            if self.out.errors:
                return self.out
        handler = ALGORITHM_HANDLERS.get(algo, eagle)
        handler(self, algo)
        # The reset fires only on a cap still unset: a model hook's value (DeepSeek-V4's 256)
        # keeps, and UNO has no reset at all.
        if algo in RESETS_MAX_RUNNING and self.cur("max_running_requests") is None:
            self.set("max_running_requests", SPEC_MAX_RUNNING_REQUESTS, "forced", RESET_MESSAGE)
            self.warn(RESET_MESSAGE)
        return self.out

    def _alias(self, algo: str, raw: str) -> str | None:
        reason = "upper-cased" if raw != algo else ""
        draft_archs = configvalues.architectures(self.draft_as_given)
        if any(a in GEMMA4_ASSISTANTS for a in draft_archs):
            if algo == "EAGLE3":
                self.fail(  # SGLang names the one class, for the unified assistant too
                    "Gemma4AssistantForCausalLM draft requires --speculative-algorithm NEXTN or "
                    "EAGLE; EAGLE3 is not supported for this draft architecture.",
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


def resolve_launch(
    args: dict[str, Any],
    target_config: dict[str, Any] | None = None,
    draft_config: dict[str, Any] | None = None,
    device: str = "cuda",
    hip: bool = False,
) -> Resolution:
    """Resolve speculative settings from parsed flags (``ParsedArgs.values``) and configs;
    ``hip``: on an AMD card (ROCm), whose --device is still "cuda"."""
    return Resolver(args, target_config, draft_config, device, hip).run()
