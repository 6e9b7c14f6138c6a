"""The cluster admin's pod policy for engine pods: what a SpecServer's pod may ask for (pure).

A SpecServer's author chooses the engine image, so the admin decides whether its pod may mount a
``hostPath``, tolerate every taint, or carry extraArgs that let clients or a model repository
run code in the engine (``CODE_EXECUTION_FLAGS``): refused unless allowed
(``SPECSERVER_ALLOW_HOST_PATH``, ``SPECSERVER_ALLOW_WILDCARD_TOLERATIONS``,
``SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS``). The operator (ConfigValid, reason
``PodPolicyRefused``), its admission webhook and ``lint`` (POD009, under the default policy) all
call ``refusal``; the operator's ``core.podpolicy`` adds the pod's resources.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from specserver_advisor.models import SpecServerSpec
from specserver_advisor.sglang.flags import match_option

REFUSED = "PodPolicyRefused"
_TRUE = ("1", "true", "yes")
_MODELOPT = (
    "selects SGLang's ModelOpt loader, which runs the Python code of the model repository in "
    "the engine (from_pretrained(..., trust_remote_code=True))"
)
#: SGLang 0.5.23 flags that let whoever reaches the engine (or the model repository) run code
#: in it: refused in extraArgs unless the admin allows them (docs/security.md#extraargs).
CODE_EXECUTION_FLAGS = {
    "--enable-custom-logit-processor": (
        "lets every client send a serialized Python logit processor that the engine runs"
    ),
    "--trust-remote-code": "runs the Python code of the model repository in the engine",
    # SGLang 0.5.23's ModelOpt loader (model_loader/loader.py, _load_modelopt_base_model) loads
    # the checkpoint with trust_remote_code=True whatever the spec says; each of these flags
    # selects it (tests/oracle/test_remote_code_paths.py finds every such call in SGLang).
    "--modelopt-quant": _MODELOPT,
    "--modelopt-checkpoint-restore-path": _MODELOPT,
    "--modelopt-checkpoint-save-path": _MODELOPT,
    "--modelopt-export-path": _MODELOPT,
}
#: Flags whose value decides (a value starting with the prefix, in any case):
#: ``--quantization modelopt*`` selects the ModelOpt loader too; ``--model-impl transformers``
#: the Transformers backend, which imports the repository's ``auto_map`` modules
#: (model_loader/utils.py, resolve_transformers_arch; models/transformers.py).
CODE_EXECUTION_VALUES = {
    "--quantization": ("modelopt", _MODELOPT),
    "--model-impl": (
        "transformers",
        "selects SGLang's Transformers backend, which imports the Python modules the model "
        "repository's auto_map names",
    ),
}


@dataclass(frozen=True)
class PodPolicy:
    """The cluster admin's choices for engine pods (operator environment)."""

    allow_host_path: bool = False
    allow_wildcard_tolerations: bool = False
    allow_code_execution_flags: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PodPolicy:
        env = os.environ if env is None else env
        return cls(
            env.get("SPECSERVER_ALLOW_HOST_PATH", "").lower() in _TRUE,
            env.get("SPECSERVER_ALLOW_WILDCARD_TOLERATIONS", "").lower() in _TRUE,
            env.get("SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS", "").lower() in _TRUE,
        )


def code_execution_flag(extra: list[str]) -> str | None:
    """Why ``extra`` (engine.extraArgs) may not carry a flag that runs code a client or a model
    repository supplies, matched in every spelling argparse accepts (None: it carries none)."""
    for i, item in enumerate(extra):
        if not item.startswith("--"):
            continue
        option, eq, inline = item.partition("=")
        flag, _ = match_option(option)
        if flag is None:
            continue
        why = CODE_EXECUTION_FLAGS.get(flag.cli)
        if flag.cli in CODE_EXECUTION_VALUES:
            prefix, because = CODE_EXECUTION_VALUES[flag.cli]
            value = inline if eq else (extra[i + 1] if i + 1 < len(extra) else "")
            if value.lower().startswith(prefix):
                why = f"{value} {because}"
        if why:
            return (
                f"spec.engine.extraArgs[{i}]: {option} ({flag.cli}) {why}; refused by the "
                "operator's pod policy (the admin allows it with "
                "SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS)"
            )
    return None


def refusal(spec: SpecServerSpec, policy: PodPolicy) -> str | None:
    """Why the pod this spec asks for is refused under ``policy`` (None when it is not)."""
    if not policy.allow_code_execution_flags:
        flagged = code_execution_flag(spec.engine.extra_args)
        if flagged:
            return flagged
    src = spec.model_source
    if src and src.volume and src.volume.host_path and not policy.allow_host_path:
        return (
            "spec.modelSource.volume.hostPath: hostPath volumes are refused by the operator's "
            "pod policy (the admin allows them with SPECSERVER_ALLOW_HOST_PATH); use "
            "persistentVolumeClaimName"
        )
    if not policy.allow_wildcard_tolerations:
        for i, t in enumerate(spec.resources.tolerations):
            if not t.key and (t.operator or "Equal") == "Exists":
                return (
                    f"spec.resources.tolerations[{i}]: a toleration without a key tolerates "
                    "every taint; refused by the operator's pod policy (the admin allows it "
                    "with SPECSERVER_ALLOW_WILDCARD_TOLERATIONS)"
                )
    return None
