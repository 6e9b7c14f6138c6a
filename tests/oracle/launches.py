"""The launches of the differential suite: generated, curated and the repository's own corpus.

``generated_cases`` draws reproducible random launches over the space the issue names;
``curated_cases`` are the launches of the issue and the reference notes; ``corpus_cases`` is every
SGLang launch in the repository's examples, golden files and lint fixtures, crossed with one GPU
per memory tier and architecture. Used by test_differential.py and scripts/bench-fidelity.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from pathlib import Path

from harness import DECRYPTED, DRAFTS, TARGETS, Case

from specserver_advisor.gpus import GPUS

#: DFLASH and DSPARK are left out: SGLang cannot resolve them on a CPU (EXCEPTIONS).
ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN", "NGRAM", "STANDALONE", "eagle3")
ENV_BOOLS = ("1", "true", "True", "yes", "y", "on", "0", "false", "off", "t")
#: The target's own rope scaling and positions (Llama-3.1-8B), as a draft context fix renders
#: them: a no-op for the target, the fix for a 2,048-position draft.
LLAMA_OWN_ROPE = (
    '{"rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, '
    '"original_max_position_embeddings": 8192, "rope_type": "llama3"}, '
    '"max_position_embeddings": 131072}'
)
#: ``--json-model-override-args`` values: positions, rope kinds (merged into the config's own
#: rope dict), shape keys, and the values SGLang refuses (not JSON, not an object).
OVERRIDES = (
    '{"max_position_embeddings": 131072}',
    '{"max_position_embeddings": 4096}',
    '{"max_position_embeddings": 32768, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, '
    '"original_max_position_embeddings": 32768}}',
    '{"rope_scaling": {"rope_type": "linear", "factor": 2.0}}',
    '{"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}',
    LLAMA_OWN_ROPE,
    '{"seq_length": 8192}',
    '{"num_hidden_layers": 8, "max_position_embeddings": 65536}',
    "{}",
    "null",
    "{bad",
    "[1]",
)


#: The GPUs the oracle can stand in for: the worker sets CUDA's platform facts (compute
#: capability, sm probes) only; ROCm's (``is_hip``, gfx probes, aiter's availability) are not
#: emulated, so an AMD card's resolution would be SGLang's CUDA answer, not its ROCm one.
ORACLE_GPUS = sorted(name for name, gpu in GPUS.items() if not gpu.rocm)


def random_case(rng: random.Random) -> Case:
    """One launch from the generated space (algorithms, shapes, caps, pages, backends, ...)."""
    target = rng.choice(TARGETS)
    gpu = rng.choice(ORACLE_GPUS)
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
    # Overrides reach target and draft alike: more often where there is a draft (EAGLE-3,
    # STANDALONE, an MTP target's own layers).
    if rng.random() < (0.3 if algo is not None else 0.1):
        flags += ["--json-model-override-args", rng.choice(OVERRIDES)]
    # The config-file overrides: the file read instead of config.json (harness.DECRYPTED).
    if rng.random() < 0.08:
        flags += ["--decrypted-config-file", DECRYPTED]
    if draft is not None and rng.random() < 0.15:
        flags += ["--decrypted-draft-config-file", DECRYPTED]
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
    # Pipeline parallelism turns the overlap scheduler off, with speculation and without.
    for flags in ((*eagle3, "--pp-size", "2"), ("--pp-size", "2")):
        draft = "qwen3-8b-eagle3" if flags[0] == eagle3[0] else None
        yield Case(flags, "qwen3-8b", "H100", draft, origin="curated")
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
    yield from override_cases()
    yield from default_cap_cases()
    yield from deterministic_cases()


#: Attention backends crossed with deterministic inference: unset (its own pick), its list's
#: members, and ones it refuses (trtllm_mha; flashinfer for an absorbed-MLA model).
DETERMINISTIC_BACKEND_FLAGS = (None, "flashinfer", "triton", "fa3", "trtllm_mha")


def deterministic_cases() -> Iterable[Case]:
    """Deterministic inference (the flag, or ``--rl-on-policy-target`` turning it on) on each
    card generation, dense and absorbed-MLA, each backend choice: the backend it picks, the
    ones it refuses, and the page size that follows (``resolve_deterministic``)."""
    switches = (("--enable-deterministic-inference",), ("--rl-on-policy-target", "fsdp"))
    for gpu, target, switch, backend in itertools.product(
        ("L4", "A100-80G", "H100", "B200", "GB10"),
        ("qwen3-8b", "deepseek-v3"),
        switches,
        DETERMINISTIC_BACKEND_FLAGS,
    ):
        flags = (*switch, "--tp-size", "8" if target == "deepseek-v3" else "1")
        if backend is not None:
            flags = (*flags, "--attention-backend", backend)
        yield Case(flags, target, gpu, origin="curated")


def override_cases() -> Iterable[Case]:
    """``--json-model-override-args`` reaching the draft (issue 29, "What was measured")."""
    h100 = "H100"
    override = "--json-model-override-args"
    for algo in ("EAGLE3", "STANDALONE"):
        for value in ('{"max_position_embeddings": 131072}', LLAMA_OWN_ROPE):
            # A 2,048-position draft starts: the override lengthens the draft too.
            yield Case(
                ("--speculative-algorithm", algo, override, value),
                "llama-3.1-8b",
                h100,
                "eagle3-2048-positions",
                origin="curated",
            )
        # Linear x2 lengthens the draft (no rope of its own) to 4,096 only: still refused.
        yield Case(
            (
                "--speculative-algorithm",
                algo,
                override,
                '{"rope_scaling": {"rope_type": "linear", "factor": 2.0}}',
            ),
            "llama-3.1-8b",
            h100,
            "eagle3-2048-positions",
            origin="curated",
        )
    for algo in ("NEXTN", "EAGLE"):  # the MTP draft is the target's config, overridden too
        yield Case(
            ("--speculative-algorithm", algo, override, '{"max_position_embeddings": 4096}'),
            "deepseek-v3",
            h100,
            origin="curated",
        )
    # The config-file overrides: the draft's decrypted config (131,072 positions) starts the
    # short draft; the target's own replaces its config.json; the JSON overrides apply on top.
    decrypted = "decrypted.json"
    for algo in ("EAGLE3", "STANDALONE"):
        yield Case(
            ("--speculative-algorithm", algo, "--decrypted-draft-config-file", decrypted),
            "llama-3.1-8b",
            h100,
            "eagle3-2048-positions",
            origin="curated",
        )
    yield Case(
        (*("--speculative-algorithm", "EAGLE3"), "--decrypted-config-file", decrypted),
        "qwen3-8b",
        h100,
        "qwen3-8b-eagle3",
        origin="curated",
    )
    yield Case(
        (
            *("--speculative-algorithm", "EAGLE3", "--decrypted-draft-config-file", decrypted),
            *(override, '{"max_position_embeddings": 4096}'),
        ),
        "llama-3.1-8b",
        h100,
        "eagle3-2048-positions",
        origin="curated",
    )
    for bad in ("{bad", "[1]", '"x"', "null"):
        yield Case(
            ("--speculative-algorithm", "EAGLE3", override, bad),
            "qwen3-8b",
            h100,
            "qwen3-8b-eagle3",
            origin="curated",
        )


#: Fields compared on the model-hook targets (see ``harness.HOOK_CONFIGS``).
CAP_FIELDS = ("speculative_algorithm", "max_running_requests", "enable_mixed_chunk")


def default_cap_cases() -> Iterable[Case]:
    """The cap SGLang sets when ``--max-running-requests`` is unset, per algorithm and
    architecture: DeepSeek-V4's model hook (256, so no reset), UNO (no reset), FROZEN_KV_MTP
    (a Gemma4 assistant draft promotes NEXTN/EAGLE; 48)."""
    shape = (
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    )
    for gpu in ("H200", "B200"):
        for flags in (
            (),
            ("--speculative-algorithm", "EAGLE", *shape),
            ("--speculative-algorithm", "EAGLE", *shape, "--max-running-requests", "16"),
            ("--speculative-algorithm", "EAGLE"),  # topk not given: the hook refuses
            ("--speculative-algorithm", "NEXTN", *shape),  # the hook reads the flag as given
            ("--speculative-algorithm", "eagle", *shape),
            ("--speculative-algorithm", "EAGLE3", *shape),
            ("--speculative-algorithm", "NGRAM"),
        ):
            yield Case(flags, "deepseek-v4", gpu, origin="curated", only=CAP_FIELDS)
        for flags in (
            ("--speculative-algorithm", "NEXTN"),
            ("--speculative-algorithm", "EAGLE"),
            ("--speculative-algorithm", "EAGLE", "--max-running-requests", "8"),
            ("--speculative-algorithm", "EAGLE3"),
        ):
            yield Case(
                flags, "gemma-4", gpu, "gemma-4-assistant", origin="curated", only=CAP_FIELDS
            )
    uno = (
        "--speculative-algorithm",
        "UNO",
        "--uno-lora-path",
        "/nonexistent/uno-lora",
        "--speculative-num-draft-tokens",
        "4",
    )
    for gpu in ("L4", "H100"):
        yield Case(uno, "qwen3-8b", gpu, origin="curated")
        yield Case((*uno, "--max-running-requests", "32"), "qwen3-8b", gpu, origin="curated")


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
