"""Where the engine pod writes, and the writable volumes and environment that put it there (pure).

The engine runs as UID 10001, which has no passwd entry in the stock image
(``lmsysorg/sglang:v0.5.23-runtime``): without ``HOME`` the runtime gives it ``/``, which it
cannot write. ``WRITES`` lists every path SGLang 0.5.23 and the libraries it loads (Triton,
FlashInfer, torch's inductor, tvm-ffi, the Hugging Face hub, outlines) write at start-up or at
the first request, found by reading those packages as installed in the SGLang oracle
environment (docs/engine.md, "Where the engine writes", quotes each with its file and line;
tests/oracle/test_engine_writes.py reads the installed files back). Each path is given as the
library computes it: ``${VAR:-default}`` in terms of the environment, with ``$HOME`` and
``$TMPDIR`` as the runtime would leave them.

The operator puts all of them on two emptyDir volumes, ``home`` (``HOME``: every cache) and
``tmp`` (``TMPDIR``: lock files, IPC sockets, the metrics directory), names each cache
explicitly in the environment (``ENGINE_ENV``), and keeps the model volume read-only: the
Hugging Face home (token, xet and asset caches, locks) is writable and only the hub cache
(``HF_HUB_CACHE``) points into an HF-cache model volume, with ``HF_HUB_OFFLINE=1`` because a
read-only cache can only be read (tests/operator/core/test_engine_writable.py renders every
example and resolves each path against each container's environment and mounts).

It lives in the advisor (``launch``) because the one validation of a SpecServer
(``launch.validation``, which ``lint`` runs too) refuses env names the operator owns
(``OWNED_ENV``) and model volumes mounted over the writable ones (``WRITABLE_MOUNTS``); the
operator's ``core.enginefs`` is this module, re-exported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: The engine's home (an emptyDir): every cache lives under it.
HOME = "/home/specserver"
#: The engine's temporary directory (an emptyDir): TMPDIR.
TMP = "/tmp"
CACHE = f"{HOME}/.cache"
SGLANG_CACHE = f"{CACHE}/sglang"
HOME_VOLUME = "home"
TMP_VOLUME = "tmp"
#: The user name getpass.getuser() returns (it reads USER before the passwd database, which
#: has no entry for the engine's UID in the stock image).
USER = "specserver"

#: What every engine and preflight container gets (names the operator owns: a SpecServer's
#: ``engine.env`` may not set them, validation.RESERVED_ENV).
ENGINE_ENV: tuple[tuple[str, str], ...] = (
    ("HOME", HOME),
    ("USER", USER),
    ("TMPDIR", TMP),
    ("XDG_CACHE_HOME", CACHE),
    ("SGLANG_CACHE_DIR", SGLANG_CACHE),
    ("SGLANG_JIT_CACHE_DIR", f"{SGLANG_CACHE}/jit"),
    ("TRITON_HOME", HOME),
    ("TRITON_CACHE_DIR", f"{SGLANG_CACHE}/triton"),
    ("TORCHINDUCTOR_CACHE_DIR", f"{SGLANG_CACHE}/inductor"),
    ("CUDA_CACHE_PATH", f"{SGLANG_CACHE}/nv"),
    ("TILELANG_CACHE_DIR", f"{SGLANG_CACHE}/tilelang"),
    ("FLASHINFER_WORKSPACE_BASE", SGLANG_CACHE),
    ("TVM_FFI_CACHE_DIR", f"{CACHE}/tvm-ffi"),
    ("OUTLINES_CACHE_DIR", f"{CACHE}/outlines"),
    ("HF_HOME", f"{CACHE}/huggingface"),
)
#: Variables the operator sets besides ENGINE_ENV, depending on the spec.
SPEC_ENV = ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_TOKEN")
OWNED_ENV = tuple(name for name, _ in ENGINE_ENV) + SPEC_ENV
#: Paths a model volume may not be mounted at or under (the writable volumes are there).
WRITABLE_MOUNTS = (HOME, TMP)


@dataclass(frozen=True)
class EngineWrite:
    """One place the engine writes: ``path`` as the library computes it, its source (file and
    line in the installed package, relative to site-packages), and when it is written."""

    what: str
    path: str
    source: str
    when: str
    #: a variable that, set to 1, means nothing is written there (the library only reads)
    unless: str | None = None


START = "start-up"
FIRST = "first request"
#: Every path SGLang 0.5.23 and its libraries write on a single-node or multi-node launch of a
#: text model, at start-up and at the first request (docs/engine.md quotes the same list).
WRITES: tuple[EngineWrite, ...] = (
    # SGLang 0.5.23
    EngineWrite(
        "SGLang's cache root (DeepGEMM, CuTe AOT, torch.compile, FlashInfer autotune, FA3 lock)",
        "${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}",
        "sglang/srt/environ.py:1383",
        START,
    ),
    EngineWrite(
        "Triton kernel cache, redirected by `import sglang`",
        "${TRITON_CACHE_DIR:-${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}/triton}",
        "sglang/srt/environ.py:2311",
        START,
    ),
    EngineWrite(
        "torch inductor cache, redirected by `import sglang`",
        "${TORCHINDUCTOR_CACHE_DIR:-${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}/inductor}",
        "sglang/srt/environ.py:2312",
        START,
    ),
    EngineWrite(
        "CUDA's PTX JIT cache, redirected by `import sglang`",
        "${CUDA_CACHE_PATH:-${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}/nv}",
        "sglang/srt/environ.py:2313",
        START,
    ),
    EngineWrite(
        "TileLang cache, redirected by `import sglang`",
        "${TILELANG_CACHE_DIR:-${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}/tilelang}",
        "sglang/srt/environ.py:2317",
        START,
    ),
    EngineWrite(
        "FlashInfer's workspace base, redirected by `import sglang`",
        "${FLASHINFER_WORKSPACE_BASE:-${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}}",
        "sglang/srt/environ.py:2320",
        START,
    ),
    EngineWrite(
        "DeepGEMM JIT cache (DG_JIT_CACHE_DIR, forced by SGLang)",
        "${SGLANG_DG_CACHE_DIR:-${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}/deep_gemm}",
        "sglang/srt/environ.py:1373",
        START,
    ),
    EngineWrite(
        "torch.compile / piecewise CUDA graph cache",
        "${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}/torch_compile_cache",
        "sglang/srt/compilation/backend.py:408",
        START,
    ),
    EngineWrite(
        "FlashInfer autotune results",
        "${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}/flashinfer/autotune",
        "sglang/srt/model_executor/runner/flashinfer_autotune.py:193",
        START,
    ),
    EngineWrite(
        "GPU peer-access cache (tp > 1, custom all-reduce)",
        "${SGLANG_CACHE_DIR:-$HOME/.cache/sglang}",
        "sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py:267",
        START,
    ),
    EngineWrite(
        "SGLang's JIT kernel build cache (tvm-ffi modules)",
        "${SGLANG_JIT_CACHE_DIR:-$HOME/.cache/sglang/jit}",
        "sglang/kernels/jit/utils/compile/cache.py:318",
        START,
    ),
    EngineWrite(
        "model download lock files (one per model, also for a cached model)",
        "${TMPDIR:-/tmp}",
        "sglang/srt/model_loader/weight_utils.py:162",
        START,
    ),
    EngineWrite(
        "ZMQ IPC sockets between tokenizer, scheduler and detokenizer",
        "${TMPDIR:-/tmp}",
        "sglang/srt/server_args.py:807",
        START,
    ),
    EngineWrite(
        "Prometheus multiprocess directory (--enable-metrics)",
        "${PROMETHEUS_MULTIPROC_DIR:-${TMPDIR:-/tmp}}",
        "sglang/srt/utils/common.py:2838",
        START,
    ),
    # torch 2.14.1
    EngineWrite(
        "torch inductor cache (torch's own default; getpass.getuser() falls back to uid_<uid>)",
        "${TORCHINDUCTOR_CACHE_DIR:-${TMPDIR:-/tmp}/torchinductor_specserver}",
        "torch/_inductor/runtime/cache_dir_utils.py:15",
        FIRST,
    ),
    # Triton
    EngineWrite(
        "Triton kernel cache (Triton's own default)",
        "${TRITON_CACHE_DIR:-${TRITON_HOME:-$HOME}/.triton/cache}",
        "triton/knobs.py:348",
        FIRST,
    ),
    EngineWrite(
        "Triton's launcher build directory",
        "${TMPDIR:-/tmp}",
        "triton/runtime/build.py:148",
        START,
    ),
    # FlashInfer 0.7.2 (sglang 0.5.23's pin)
    EngineWrite(
        "FlashInfer JIT and cubin cache",
        "${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache/flashinfer",
        "flashinfer/jit/env.py:67",
        START,
    ),
    # tvm-ffi
    EngineWrite(
        "tvm-ffi's torch DLPack addon, built at import when no wheel matches torch",
        "${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}",
        "tvm_ffi/_optional_torch_c_dlpack.py:133",
        START,
    ),
    EngineWrite(
        "tvm-ffi C++ extension builds",
        "${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}",
        "tvm_ffi/cpp/extension.py:758",
        START,
    ),
    # Hugging Face hub 2.4.0 (transformers and SGLang load configs, tokenizers and weights with it)
    EngineWrite(
        "the hub's home: xet chunk cache, assets, stored tokens",
        "${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}",
        "huggingface_hub/constants.py:160",
        START,
    ),
    EngineWrite(
        "the hub's xet chunk cache (downloads from xet-backed repositories)",
        "${HF_XET_CACHE:-${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}/xet}",
        "huggingface_hub/constants.py:342",
        START,
    ),
    EngineWrite(
        "hub cache: downloads, their .locks and refs (offline: only read, file_download.py:1168)",
        "${HF_HUB_CACHE:-${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}/hub}",
        "huggingface_hub/constants.py:177",
        START,
        unless="HF_HUB_OFFLINE",
    ),
    # transformers 5.19.0
    EngineWrite(
        "transformers' dynamic modules (a model's own code, with trust_remote_code)",
        "${HF_MODULES_CACHE:-${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}/modules}",
        "transformers/utils/hub.py:108",
        START,
    ),
    # outlines (only with --grammar-backend outlines; xgrammar, the default, writes nothing)
    EngineWrite(
        "outlines' compiled-grammar disk cache",
        "${OUTLINES_CACHE_DIR:-$HOME/.cache/outlines}",
        "outlines/caching.py:54",
        FIRST,
    ),
)


def engine_env() -> list[dict[str, str]]:
    """The environment that names every writable path (before the spec's own variables)."""
    return [{"name": name, "value": value} for name, value in ENGINE_ENV]


def writable_mounts() -> list[dict[str, Any]]:
    """The container mounts of the writable volumes."""
    return [
        {"name": HOME_VOLUME, "mountPath": HOME},
        {"name": TMP_VOLUME, "mountPath": TMP},
    ]


def writable_volumes() -> list[dict[str, Any]]:
    """The pod's writable volumes (emptyDir: node-local, gone with the pod)."""
    return [{"name": HOME_VOLUME, "emptyDir": {}}, {"name": TMP_VOLUME, "emptyDir": {}}]


_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-)?|\$([A-Za-z_][A-Za-z0-9_]*)")


def resolve(path: str, env: dict[str, str]) -> str:
    """``path`` with ``$VAR`` and ``${VAR:-default}`` (nested) expanded from ``env``; an unset
    ``HOME`` is ``/`` (what the runtime gives a UID without a passwd entry)."""
    env = {"HOME": "/", **env}
    out, i = [], 0
    while i < len(path):
        m = _REF.match(path, i)
        if path[i] != "$" or m is None:
            out.append(path[i])
            i += 1
            continue
        if m.group(3):
            out.append(env.get(m.group(3), ""))
            i = m.end()
            continue
        name, depth, j = m.group(1), 1, m.end()
        start = j
        while depth:
            if path.startswith("${", j):
                depth, j = depth + 1, j + 2
                continue
            depth -= path[j] == "}"
            j += 1
        default = path[start : j - 1] if m.group(2) else ""
        value = env.get(name, "")
        out.append(value if value else resolve(default, env))
        i = j
    return "".join(out)
