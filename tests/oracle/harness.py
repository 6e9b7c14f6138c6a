"""The differential fidelity harness: launches x model configs x GPUs, advisor vs SGLang 0.5.23.

Used by tests/oracle/test_differential.py and scripts/bench-fidelity. A ``Case`` is SGLang flags
(without the model paths), a target and optional draft from ``MODELS``, a GPU from the advisor's
table and an environment. ``run_case`` asks the advisor (``predict_server``) and the oracle (SGLang
itself, through ``oracle.Oracle``) and returns the fields on which they differ. ``EXCEPTIONS``
names, with the reason, the differences we keep on purpose; anything else is a bug.
"""

from __future__ import annotations

import copy
import json
import random
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oracle import Oracle
from specserver_advisor.gpus import GPUS
from specserver_advisor.sglang.serverargs import ServerOutcome, predict_server

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "advisor" / "specserver_advisor" / "data" / "configs"

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


MODELS: dict[str, dict[str, Any]] = _models()
TARGETS = tuple(m for m, c in MODELS.items() if "Eagle" not in c["architectures"][0])
DRAFTS = tuple(m for m, c in MODELS.items() if "Eagle" in c["architectures"][0])


def materialize(root: Path) -> dict[str, Path]:
    """Write every model config to ``root/NAME/config.json``; return name -> directory."""
    out = {}
    for name, cfg in MODELS.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg))
        out[name] = d
    return out


@dataclass(frozen=True)
class Case:
    """One launch on one GPU."""

    flags: tuple[str, ...]
    target: str
    gpu: str
    draft: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    origin: str = "generated"

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
        "own tests (tests/advisor/test_resolve.py) instead",
        lambda d: (
            d.field == "outcome"
            and d.sglang == "ModuleNotFoundError"
            and _algorithm(d.case) in ("DFLASH", "DSPARK")
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
    for name in COMPARED_FIELDS:
        if advisor.fields.get(name) != theirs.get(name):
            diffs.append(Difference(case, name, advisor.fields.get(name), theirs.get(name)))
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

    def run(self, case: Case) -> list[Difference]:
        argv = case.argv(self.paths)
        env = dict(case.env)
        gpu = GPUS[case.gpu]
        theirs = self.oracle.resolve(argv, gpu, env)
        target = MODELS[case.target]
        draft = MODELS[case.draft] if case.draft else None
        ours = predict_server(argv, gpu, target, draft, env)
        every = compare(case, ours, theirs)
        diffs = [d for d in every if not excepted(d)]
        self.excepted += len(every) - len(diffs)
        self.cases += 1
        self.agreeing += not diffs
        names = {"outcome"} | (
            set(COMPARED_FIELDS) | {"context_len"}
            if ours.outcome == theirs["outcome"] == "accepted"
            else set()
        )
        bad = {d.field for d in diffs}
        for name in names:
            self.field_total[name] = self.field_total.get(name, 0) + 1
            self.field_agree[name] = self.field_agree.get(name, 0) + (name not in bad)
        self.differences += diffs
        return diffs

    def summary(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "agreement": round(self.agreeing / self.cases, 4) if self.cases else 1.0,
            "fields": {
                k: round(self.field_agree[k] / self.field_total[k], 4)
                for k in sorted(self.field_total)
            },
            "differences": [d.as_dict() for d in self.differences],
            "named_exceptions": {e.name: e.reason for e in EXCEPTIONS},
            "excepted_cases": self.excepted,
        }


def excepted(diff: Difference) -> bool:
    """Whether a difference is one of the named exceptions."""
    return any(e.matches(diff) for e in EXCEPTIONS)


# ----------------------------------------------------------------------------- cases

#: DFLASH and DSPARK are left out: SGLang cannot resolve them on a CPU (EXCEPTIONS).
ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN", "NGRAM", "STANDALONE", "eagle3")
ENV_BOOLS = ("1", "true", "True", "yes", "y", "on", "0", "false", "off", "t")


def random_case(rng: random.Random) -> Case:
    """One launch from the generated space (algorithms, shapes, caps, pages, backends, ...)."""
    target = rng.choice(TARGETS)
    gpu = rng.choice(sorted(GPUS))
    flags: list[str] = []
    draft: str | None = None
    algo = rng.choice((*ALGORITHMS, None, None))
    if algo is not None:
        flags += [rng.choice(("--speculative-algorithm", "--speculative-algo")), algo]
        if algo.upper() in ("EAGLE3", "EAGLE", "STANDALONE", "DFLASH") or (
            algo.upper() == "NEXTN" and rng.random() < 0.3
        ):
            draft = rng.choice(DRAFTS)
        shape = rng.random()
        if shape < 0.5:
            steps = rng.choice((1, 2, 3, 4, 5, 7))
            flags += ["--speculative-num-steps", str(steps)]
            if rng.random() < 0.8:
                flags += ["--speculative-eagle-topk", str(rng.choice((1, 1, 2, 4, 8)))]
            if rng.random() < 0.7:
                flags += ["--speculative-num-draft-tokens", str(rng.choice((2, 4, 6, 8, 16)))]
        elif shape < 0.6:
            flags += ["--speculative-eagle-topk", str(rng.choice((1, 4)))]
        if rng.random() < 0.15:
            flags.append("--speculative-adaptive")
    if rng.random() < 0.4:
        flags += ["--max-running-requests", str(rng.choice((1, 8, 16, 32, 48, 64, 128, 300)))]
    if rng.random() < 0.2:
        flags += ["--page-size", str(rng.choice((1, 16, 32, 64)))]
    if rng.random() < 0.15:
        flags += [
            "--attention-backend",
            rng.choice(("flashinfer", "triton", "fa3", "trtllm_mha", "flashmla")),
        ]
    if rng.random() < 0.15:
        flags += ["--kv-cache-dtype", rng.choice(("auto", "fp8_e4m3", "bf16"))]
    if rng.random() < 0.15:
        flags += ["--chunked-prefill-size", str(rng.choice((1024, 2048, 4096, 8192)))]
    if rng.random() < 0.1:
        flags += ["--cuda-graph-max-bs-decode", str(rng.choice((8, 16, 64, 160)))]
    if rng.random() < 0.1:
        flags += ["--mem-fraction-static", str(rng.choice((0.7, 0.85, 0.9)))]
    if rng.random() < 0.1:
        tp = rng.choice((2, 4, 8))
        flags += ["--tp-size", str(tp)]
        if rng.random() < 0.5:
            flags += ["--attn-dp-size", str(rng.choice((2, tp)))]
    if rng.random() < 0.05:
        flags += ["--dp-size", "2", "--enable-dp-attention", "--tp-size", "2"]
    if rng.random() < 0.1:
        flags.append(rng.choice(("--enable-mixed-chunk", "--disable-overlap-schedule")))
    if rng.random() < 0.05:
        flags.append("--speculative-use-rejection-sampling")
    if rng.random() < 0.05:
        flags.append(rng.choice(("--disable-cuda-graph", "--disable-cuda-graph-padding")))
    if rng.random() < 0.1:
        flags += ["--context-length", str(rng.choice((2048, 4096, 40960, 65536, 200000)))]
    if rng.random() < 0.05:
        flags += rng.choice(
            (
                ["--reasoning-parser", "qwen3"],
                ["--tool-call-parser", "qwen25"],
                ["--sampling-backend", "pytorch"],
                ["--cuda-graph-max-bs", "8"],
                ["--enable-dp-atten"],
                ["--speculative-num-step", "3"],
                ["--page-size", "abc"],
                ["--bogus-flag"],
            )
        )
    env: tuple[tuple[str, str], ...] = ()
    if rng.random() < 0.2:
        env = (("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", rng.choice(ENV_BOOLS)),)
    return Case(tuple(flags), target, gpu, draft, env)


def generated_cases(n: int, seed: int = 17) -> list[Case]:
    """``n`` reproducible random launches."""
    rng = random.Random(seed)
    return [random_case(rng) for _ in range(n)]


def curated_cases() -> Iterable[Case]:
    """The launches named in the issue and the reference notes, on their GPUs."""
    l4 = "L4"
    eagle3 = ("--speculative-algorithm", "EAGLE3")
    yield Case(eagle3, "qwen3-8b", l4, "qwen3-8b-eagle3", origin="curated")
    yield Case(("--speculative-algorithm", "NGRAM"), "qwen3-8b", l4, origin="curated")
    yield Case(
        (
            *eagle3,
            "--speculative-num-steps",
            "5",
            "--speculative-eagle-topk",
            "1",
            "--max-running-requests",
            "16",
        ),
        "qwen3-8b",
        l4,
        "qwen3-8b-eagle3",
        origin="curated",
    )
    yield Case(
        ("--reasoning-parser", "qwen3", "--tool-call-parser", "qwen25"),
        "qwen3-8b",
        l4,
        origin="curated",
    )
    yield Case(("--cuda-graph-max-bs", "8"), "qwen3-8b", l4, origin="curated")
    for flag in (
        "--disable-cuda-graph",
        "--enable-dp-attention",
        "--kv-canary-real-data=none",
        "--sampling-backend=pytorch",
        "--enable-flashinfer-allreduce-fusion",
    ):
        yield Case((flag,), "qwen3-8b", "H100", origin="curated")
    yield Case(
        ("--speculative-algorithm", "NGRAM", "--attn-dp-size", "2", "--tp-size", "2"),
        "qwen3-8b",
        "H100",
        origin="curated",
    )
    yield Case(
        ("--speculative-algorithm", "STANDALONE", "--attn-dp-size", "2", "--tp-size", "2"),
        "qwen3-8b",
        "H100",
        "qwen3-8b-eagle3",
        origin="curated",
    )
    yield Case(
        ("--speculative-algorithm", "NGRAM", "--page-size", "16"),
        "qwen3-8b",
        "H100",
        origin="curated",
    )
    for steps in ("2", "3", "7"):
        yield Case(
            (*eagle3, "--speculative-adaptive", "--speculative-num-steps", steps),
            "qwen3-8b",
            l4,
            "qwen3-8b-eagle3",
            origin="curated",
        )
    yield Case(
        ("--speculative-algorithm", "NGRAM", "--speculative-adaptive"),
        "qwen3-8b",
        l4,
        origin="curated",
    )
    yield Case((), "qwen3-8b-yarn4", l4, origin="curated")
    # The named exception holds: SGLang cannot resolve these on a CPU (a test fails once it can).
    yield Case(
        ("--speculative-algorithm", "DFLASH"), "qwen3-8b", l4, "qwen3-8b-eagle3", origin="curated"
    )
    yield Case(("--speculative-algorithm", "DSPARK"), "qwen3-8b", l4, origin="curated")
    for value in ENV_BOOLS:
        yield Case(
            eagle3,
            "qwen3-8b",
            l4,
            "eagle3-2048-positions",
            (("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", value),),
            origin="curated",
        )


# ----------------------------------------------------------------------------- corpus

CORPUS_GLOBS = (
    "manifests/examples/*.yaml",
    "tests/golden/*.yaml",
    "tests/advisor/fixtures/*/*.sh",
    "tests/advisor/fixtures/*/*.yaml",
)
#: GPUs every corpus launch is crossed with (one per memory tier and architecture).
CORPUS_GPUS = ("L4", "A10G", "L40S", "A100-40G", "A100-80G", "H100", "H200", "B200", "GB10")
_MODEL_FLAGS = (
    "--model-path",
    "--model",
    "--speculative-draft-model-path",
    "--speculative-draft-model",
)


def _model_for(path: str) -> str:
    low = path.lower()
    if "deepseek" in low:
        return "deepseek-v3"
    if "30b" in low:
        return "qwen3-30b-a3b-eagle3" if "eagle" in low else "qwen3-30b-a3b"
    if "eagle" in low or "short-draft" in low:
        return "qwen3-8b-eagle3"
    if "llama" in low:
        return "llama-3.1-8b"
    return "qwen3-8b"


def corpus_launches(repo: Path) -> Iterable[tuple[str, list[str], dict[str, str]]]:
    """(file, server argv, environment) of every SGLang server launch in the repository's
    examples, golden files and lint fixtures (SpecServers rendered as the linter renders them)."""
    from specserver_advisor.lint import sources
    from specserver_advisor.lint.specservers import SpecServerError, launch_from_specserver

    for pattern in CORPUS_GLOBS:
        for path in sorted(repo.glob(pattern)):
            text = path.read_text()
            rel = str(path.relative_to(repo))
            try:
                if path.suffix == ".sh":
                    found = sources.from_shell(rel, text)
                else:
                    found, specservers = sources.from_yaml(rel, text)
                    for doc in specservers:
                        try:
                            found.append(launch_from_specserver(rel, doc))
                        except SpecServerError:
                            continue
            except sources.InputError:
                continue
            for launch in found:
                if launch.kind in ("server", "specserver"):
                    yield rel, list(launch.args), dict(launch.env)


def _strip_models(argv: list[str]) -> tuple[list[str], str | None, str | None]:
    out: list[str] = []
    model = draft = None
    i = 0
    if argv and not argv[0].startswith("-"):
        model, i = argv[0], 1
    while i < len(argv):
        item = argv[i]
        name, eq, inline = item.partition("=")
        if name in _MODEL_FLAGS:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if "draft" in name:
                draft = value
            else:
                model = value
            i += 1 if eq else 2
            continue
        out.append(item)
        i += 1
    return out, model, draft


def corpus_cases(repo: Path) -> Iterable[Case]:
    """Every repository launch x ``CORPUS_GPUS``, models mapped to ``MODELS`` by name."""
    for rel, argv, env in corpus_launches(repo):
        flags, model, draft = _strip_models(argv)
        target = _model_for(model or "")
        draft_name = _model_for(draft) if draft else None
        if draft_name in TARGETS:
            draft_name = None
        sglang_env = tuple(sorted((k, v) for k, v in env.items() if k.startswith("SGLANG_")))
        for gpu in CORPUS_GPUS:
            yield Case(tuple(flags), target, gpu, draft_name, sglang_env, origin=rel)
