"""The differential fidelity harness: launches x model configs x GPUs, advisor vs SGLang 0.5.23.

Used by tests/oracle/test_differential.py and scripts/bench-fidelity. A ``Case`` is SGLang flags
(without the model paths), a target and optional draft from ``MODELS``, a GPU from the advisor's
table and an environment (the launches themselves are in launches.py). ``Harness.run`` asks the
advisor (``predict_server``) and the oracle (SGLang itself, through ``oracle.Oracle``) and returns
the fields on which they differ. ``EXCEPTIONS`` names, with the reason, the differences we keep
on purpose; anything else is a bug.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oracle import Oracle
from specserver_advisor.gpus import GPUS
from specserver_advisor.loaders.configs import load_config
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.overrides import config_file_names
from specserver_advisor.sglang.serverargs import ServerOutcome, predict_server

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "advisor" / "specserver_advisor" / "data" / "configs"
#: Target configs the bundled set lacks, for the model hooks that decide a launch's defaults
#: (DeepSeek-V4's cap, Gemma4 assistant drafts -> FROZEN_KV_MTP); written from the config
#: classes SGLang 0.5.23 and transformers 5.19 load them with. Not in ``TARGETS``: their
#: attention and memory resolution (dsv4 backend, page 256) are outside what the advisor
#: models, so their cases compare only ``Case.only``.
HOOK_CONFIGS = Path(__file__).with_name("configs")

#: Resolved fields compared on every accepted launch.
COMPARED_FIELDS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "max_running_requests",
    "mem_fraction_static",
    "chunked_prefill_size",
    "cuda_graph_max_bs_decode",
    "page_size",
    "attention_backend",
    "enable_mixed_chunk",
    "disable_overlap_schedule",
    "speculative_adaptive",
    "reserved_tokens",
)


def _bundled(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return data


def _variant(base: str, **changes: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(_bundled(base))
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg


def _models() -> dict[str, dict[str, Any]]:
    models = {p.stem: _bundled(p.stem) for p in sorted(CONFIGS.glob("*.json"))}
    models["qwen3-8b-yarn4"] = _variant(
        "qwen3-8b",
        rope_scaling={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
    )
    models["qwen3-8b-yarn4-no-orig"] = _variant(
        "qwen3-8b", rope_scaling={"rope_type": "yarn", "factor": 4.0}
    )
    models["qwen3-8b-linear2"] = _variant(
        "qwen3-8b", rope_scaling={"rope_type": "linear", "factor": 2.0}
    )
    models["qwen3-8b-dynamic2"] = _variant(
        "qwen3-8b", rope_scaling={"rope_type": "dynamic", "factor": 2.0}
    )
    models["qwen3-8b-fp8"] = _variant(
        "qwen3-8b",
        quantization_config={
            "quant_method": "fp8",
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "weight_block_size": [128, 128],
        },
    )
    models["qwen3-8b-fp8-kvq"] = _variant(
        "qwen3-8b",
        quantization_config={
            "quant_method": "fp8",
            "activation_scheme": "static",
            "kv_cache_quant_algo": "FP8",
        },
    )
    models["qwen3-8b-seqlen"] = _variant("qwen3-8b", seq_length=8192)
    models["llama-8k-llama3-type-key"] = _variant(
        "llama-3.1-8b",
        max_position_embeddings=8192,
        rope_scaling={
            "type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    )
    models["llama-8k-longrope"] = _variant(
        "llama-3.1-8b",
        max_position_embeddings=8192,
        rope_scaling={
            "rope_type": "longrope",
            "factor": 4.0,
            "short_factor": [1.0] * 64,
            "long_factor": [1.0] * 64,
        },
    )
    models["eagle3-4096-linear"] = _variant(
        "qwen3-8b-eagle3",
        max_position_embeddings=4096,
        rope_scaling={"rope_type": "linear", "factor": 10.0},
    )
    return models


def _hook_models() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(HOOK_CONFIGS.glob("*.json"))}


MODELS: dict[str, dict[str, Any]] = _models()
TARGETS = tuple(m for m, c in MODELS.items() if "Eagle" not in c["architectures"][0])
DRAFTS = tuple(m for m, c in MODELS.items() if "Eagle" in c["architectures"][0])
HOOK_MODELS: dict[str, dict[str, Any]] = _hook_models()
MODELS.update(HOOK_MODELS)


#: The second config file every materialized model carries, for ``--decrypted-config-file`` /
#: ``--decrypted-draft-config-file``: the same model at 131,072 positions.
DECRYPTED = "decrypted.json"


def materialize(root: Path) -> dict[str, Path]:
    """Write every model config to ``root/NAME/config.json`` (and ``DECRYPTED``); return
    name -> directory."""
    out = {}
    for name, cfg in MODELS.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg))
        (d / DECRYPTED).write_text(json.dumps({**cfg, "max_position_embeddings": 131072}))
        out[name] = d
    return out


def advisor_configs(
    case: Case, paths: dict[str, Path]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The configs the advisor plans a case with: ``MODELS``, or, when the launch names a
    config file of its own, what the advisor's loader reads for it (as lint and plan do)."""
    target, draft = MODELS[case.target], MODELS[case.draft] if case.draft else None
    values = parse_server_argv(list(case.flags)).values
    target_file, draft_file = config_file_names(values)
    if target_file:
        target = load_config(str(paths[case.target]), config_file=target_file).config
    if draft_file and case.draft:
        draft = load_config(str(paths[case.draft]), config_file=draft_file).config
    return target, draft


@dataclass(frozen=True)
class Case:
    """One launch on one GPU."""

    flags: tuple[str, ...]
    target: str
    gpu: str
    draft: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    origin: str = "generated"
    #: When set, only these resolved fields are compared (besides the outcome and its
    #: message), and not the context lengths: the ``HOOK_MODELS`` cases.
    only: tuple[str, ...] = ()

    def argv(self, paths: dict[str, Path]) -> list[str]:
        out = ["--model-path", str(paths[self.target])]
        if self.draft:
            out += ["--speculative-draft-model-path", str(paths[self.draft])]
        return out + list(self.flags)

    def describe(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env)
        draft = f" draft={self.draft}" if self.draft else ""
        return f"[{self.gpu} {self.target}{draft}] {env} {shlex.join(self.flags)}".strip()


@dataclass(frozen=True)
class Difference:
    """A field on which the advisor and SGLang disagree for one case."""

    case: Case
    field: str
    advisor: Any
    sglang: Any

    def as_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.describe(),
            "field": self.field,
            "advisor": self.advisor,
            "sglang": self.sglang,
        }


@dataclass
class Exception_:
    """A difference kept on purpose: which, and why."""

    name: str
    reason: str
    matches: Callable[[Difference], bool]


def dimensions(case: Case) -> tuple[str, ...]:
    """The issue-named dimensions a case exercises (bench-fidelity's table rows)."""
    out = []
    if any(f.startswith("--decrypted-") for f in case.flags):
        out.append("config-file")
    if "--json-model-override-args" in case.flags:
        out.append("override" + ("+draft" if case.draft or _algorithm(case) else ""))
    if _algorithm(case) and "--max-running-requests" not in case.flags:
        out.append("default-cap")
    return tuple(out)


def _algorithm(case: Case) -> str:
    flags = list(case.flags)
    for i, item in enumerate(flags[:-1]):
        if item in ("--speculative-algorithm", "--speculative-algo"):
            return flags[i + 1].upper()
    return ""


#: Named, documented differences (docs/advisor.md "Known differences from SGLang").
EXCEPTIONS: list[Exception_] = [
    Exception_(
        "dflash-dspark-need-cuda-kernels",
        "SGLang's DFLASH and DSPARK handlers import sgl_kernel (CUDA kernels) while resolving, "
        "which cannot be imported on the CPU oracle; those launches are held to the advisor's "
        "own tests (tests/advisor/sglang/test_resolve.py) instead",
        lambda d: (
            d.field == "outcome"
            and d.sglang == "ModuleNotFoundError"
            and _algorithm(d.case) in ("DFLASH", "DSPARK")
        ),
    ),
    Exception_(
        "reserved-tokens-unset-draft-tokens",
        "with eagleTopk > 1 and no --speculative-num-draft-tokens SGLang's resolution leaves "
        "speculative_num_draft_tokens None, and compute_num_reserved_tokens (max(topk * steps, "
        "None)) raises TypeError on the CPU oracle; the advisor reserves topk * steps. Whether "
        "a GPU launch fails in TokenizerManager the same way is not known yet",
        lambda d: (
            d.field == "reserved_tokens"
            and isinstance(d.sglang, str)
            and d.sglang.startswith("<TypeError")
        ),
    ),
]


def _kind(outcome: str) -> str:
    return outcome


def compare(case: Case, advisor: ServerOutcome, sglang: dict[str, Any]) -> list[Difference]:
    """Every compared field on which the two disagree (outcome first)."""
    diffs: list[Difference] = []
    if advisor.outcome != sglang["outcome"]:
        return [Difference(case, "outcome", advisor.outcome, sglang["outcome"])]
    if advisor.outcome != "accepted":
        # A bare ``assert`` has no text in SGLang; the advisor explains it instead.
        bare_assert = sglang["outcome"] == "AssertionError" and not sglang["message"]
        if advisor.message != sglang["message"] and not bare_assert:
            diffs.append(Difference(case, "message", advisor.message, sglang["message"]))
        return diffs
    theirs = sglang["fields"]
    for name in case.only or COMPARED_FIELDS:
        if advisor.fields.get(name) != theirs.get(name):
            diffs.append(Difference(case, name, advisor.fields.get(name), theirs.get(name)))
    if case.only:
        return diffs
    if advisor.context_len != sglang.get("context_len"):
        diffs.append(Difference(case, "context_len", advisor.context_len, sglang["context_len"]))
    draft = sglang.get("draft")
    if draft is not None and case.draft is not None:
        if advisor.draft_outcome != draft["outcome"]:
            diffs.append(Difference(case, "draft_outcome", advisor.draft_outcome, draft["outcome"]))
        elif draft["outcome"] != "accepted" and advisor.draft_message != draft["message"]:
            diffs.append(Difference(case, "draft_message", advisor.draft_message, draft["message"]))
    return diffs


@dataclass
class Harness:
    """Runs cases against both sides; remembers per-field agreement."""

    oracle: Oracle
    paths: dict[str, Path]
    cases: int = 0
    agreeing: int = 0
    field_total: dict[str, int] = field(default_factory=dict)
    field_agree: dict[str, int] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)
    excepted: int = 0
    dimension_total: dict[str, int] = field(default_factory=dict)
    dimension_agree: dict[str, int] = field(default_factory=dict)

    def run(self, case: Case) -> list[Difference]:
        argv = case.argv(self.paths)
        env = dict(case.env)
        gpu = GPUS[case.gpu]
        theirs = self.oracle.resolve(argv, gpu, env)
        target, draft = advisor_configs(case, self.paths)
        ours = predict_server(argv, gpu, target, draft, env)
        every = compare(case, ours, theirs)
        diffs = [d for d in every if not excepted(d)]
        self.excepted += len(every) - len(diffs)
        self.cases += 1
        self.agreeing += not diffs
        names = {"outcome"} | (
            (set(case.only) if case.only else set(COMPARED_FIELDS) | {"context_len"})
            if ours.outcome == theirs["outcome"] == "accepted"
            else set()
        )
        bad = {d.field for d in diffs}
        for name in names:
            self.field_total[name] = self.field_total.get(name, 0) + 1
            self.field_agree[name] = self.field_agree.get(name, 0) + (name not in bad)
        self.differences += diffs
        for name in dimensions(case):
            self.dimension_total[name] = self.dimension_total.get(name, 0) + 1
            self.dimension_agree[name] = self.dimension_agree.get(name, 0) + (not diffs)
        return diffs

    def summary(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "agreement": round(self.agreeing / self.cases, 4) if self.cases else 1.0,
            "fields": {
                k: round(self.field_agree[k] / self.field_total[k], 4)
                for k in sorted(self.field_total)
            },
            "dimensions": {
                k: {
                    "cases": self.dimension_total[k],
                    "agreement": round(self.dimension_agree[k] / self.dimension_total[k], 4),
                }
                for k in sorted(self.dimension_total)
            },
            "differences": [d.as_dict() for d in self.differences],
            "named_exceptions": {e.name: e.reason for e in EXCEPTIONS},
            "excepted_cases": self.excepted,
        }


def excepted(diff: Difference) -> bool:
    """Whether a difference is one of the named exceptions."""
    return any(e.matches(diff) for e in EXCEPTIONS)
