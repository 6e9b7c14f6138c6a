"""The SpecServer rules that need no model config: one table, three enforcers (pure).

Each rule here is enforced three times from this one table, so none can be in one and missing
in another (tests/advisor/schema/test_structural_rules.py diffs them):

- by the API server itself, as a CEL ``x-kubernetes-validations`` rule on the field in the
  generated CRD (``schema.crd``): it holds while no webhook serves (a rollout, a crash);
- by ``launch.validation.spec_problems`` (``ConfigValid=False``, the webhook's
  refusal, lint), with the same message.

A rule's message names its field (``spec.engine.maxRunningRequests: ...``), as every refusal
does. Rules that need the model config, the cluster (a SubjectAccessReview) or SGLang's own
choices stay in ``core.validation``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Sane upper bounds (values far beyond any real deployment are mistakes, not plans).
MAX_REPLICAS = 1000
MAX_STARTUP_TIMEOUT_S = 86_400
MAX_RUNNING_REQUESTS = 65_536
MAX_CONTEXT_TOKENS = 10_000_000
MAX_NUM_STEPS = 32
MAX_EAGLE_TOPK = 64
MAX_DRAFT_TOKENS = 1024
MAX_NGRAM = 1_000_000_000
MAX_POLICY_SECONDS = 7 * 86_400
MAX_POLICY_COUNT = 10_000
MAX_EXTRA_ARGS = 256


@dataclass(frozen=True)
class _OnField:
    """A rule on one field below ``spec``."""

    #: camelCase keys below ``spec`` (the CRD's and the manifest's spelling)
    path: tuple[str, ...]

    @property
    def field(self) -> str:
        return "spec." + ".".join(self.path)


@dataclass(frozen=True)
class Maximum(_OnField):
    """An integer field's upper bound: ``spec.<path>`` at most ``maximum``."""

    maximum: int

    def message(self, value: object | None = None) -> str:
        """The refusal, naming the field (the webhook's and ConfigValid's carry the value)."""
        shown = f"{value} " if value is not None else ""
        return f"{self.field}: {shown}is above the maximum {self.maximum}"

    def cel(self) -> dict[str, str]:
        """The CRD's ``x-kubernetes-validations`` entry, on the field itself."""
        return {"rule": f"self <= {self.maximum}", "message": self.message()}


@dataclass(frozen=True)
class MaxItems(_OnField):
    """A list field's length bound: ``spec.<path>`` has at most ``maximum`` items."""

    maximum: int

    def message(self, value: object | None = None) -> str:
        return f"{self.field}: more than {self.maximum} items"

    def cel(self) -> dict[str, str]:
        return {"rule": f"size(self) <= {self.maximum}", "message": self.message()}


@dataclass(frozen=True)
class NoWhitespace(_OnField):
    """A string field that must be non-empty and hold no whitespace (an image reference)."""

    what: str

    def message(self, value: object | None = None) -> str:
        shown = f"{value!r} " if value is not None else ""
        return f"{self.field}: {shown}is not {self.what}"

    def cel(self) -> dict[str, str]:
        return {"rule": r"self.matches('^\\S+$')", "message": self.message()}

    def holds(self, value: str) -> bool:
        return re.fullmatch(r"\S+", value) is not None


Rule = Maximum | MaxItems | NoWhitespace

_POLICY_SECONDS = (
    "evaluationIntervalSeconds",
    "switchTimeoutSeconds",
    "minDwellSeconds",
    "staleAfterSeconds",
    "relearnAfterSeconds",
)
_POLICY_COUNTS = (
    "disableAfterBreaches",
    "enableAfterPasses",
    "maxSwitchesPerHour",
    "queueGrowthEvaluations",
)
_NGRAM = ("minBfsBreadth", "maxBfsBreadth", "maxTrieDepth", "capacity")

#: Every structural rule, in the order ``spec_problems`` reports them.
RULES: tuple[Rule, ...] = (
    Maximum(("replicas",), MAX_REPLICAS),
    Maximum(("engine", "startupTimeoutSeconds"), MAX_STARTUP_TIMEOUT_S),
    Maximum(("engine", "maxRunningRequests"), MAX_RUNNING_REQUESTS),
    Maximum(("engine", "contextLength"), MAX_CONTEXT_TOKENS),
    Maximum(("engine", "expectedInputTokens"), MAX_CONTEXT_TOKENS),
    Maximum(("engine", "expectedOutputTokens"), MAX_CONTEXT_TOKENS),
    NoWhitespace(("engine", "image"), "an image reference"),
    MaxItems(("engine", "extraArgs"), MAX_EXTRA_ARGS),
    Maximum(("speculative", "numSteps"), MAX_NUM_STEPS),
    Maximum(("speculative", "eagleTopk"), MAX_EAGLE_TOPK),
    Maximum(("speculative", "numDraftTokens"), MAX_DRAFT_TOKENS),
    *(Maximum(("speculative", "ngram", f), MAX_NGRAM) for f in _NGRAM),
    *(Maximum(("autoSpeculation", f), MAX_POLICY_SECONDS) for f in _POLICY_SECONDS),
    *(Maximum(("autoSpeculation", f), MAX_POLICY_COUNT) for f in _POLICY_COUNTS),
)


def snake(camel: str) -> str:
    """``maxRunningRequests`` -> ``max_running_requests`` (the models' attribute)."""
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


def violation(rule: Rule, value: object) -> str | None:
    """The rule's message when ``value`` (the field's, not None) breaks it, else None."""
    if isinstance(rule, Maximum):
        return rule.message(value) if isinstance(value, int) and value > rule.maximum else None
    if isinstance(rule, MaxItems):
        return rule.message() if isinstance(value, list) and len(value) > rule.maximum else None
    return None if isinstance(value, str) and rule.holds(value) else rule.message(value)
