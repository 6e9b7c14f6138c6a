"""SGLang 0.5.23 itself, answering launches: runs ONLY inside the cached oracle environment.

Started by ``tests/oracle/oracle.py`` as ``$SPECSERVER_CACHE/sglang-0.5.23/bin/python
sglang_worker.py serve``; the project's own venv never imports sglang or torch. Protocol: one JSON
request per stdin line, one JSON answer per stdout line (SGLang's logging goes to stderr):

    request  {"argv": [...], "gpu": {"memory_mib": 23034, "capability": [8, 9]},
              "env": {"NAME": "value"}, "fields": [...], "draft_context": true}
    answer   {"outcome": "accepted" | "argparse" | "<ExceptionClass>", "message": str,
              "fields": {name: value}, "context_len": int | null,
              "draft": {"outcome": ..., "message": ..., "context_len": ...} | null}

``sglang_worker.py flags`` prints every action of SGLang's real argparse parser as JSON (the
source of ``advisor/specserver_advisor/sglang/data/flags-0.5.23.json``).

The machine facts SGLang branches on are set per request: ``is_cuda``, the compute capability
and the sm probes through ``runtime_context.override_platform``, and the device memory
(``get_nvgpu_memory_capacity``), as ../shared/reference/sglang-oracle.md describes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import traceback
from typing import Any

DEFAULT_FIELDS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "max_running_requests",
    "mem_fraction_static",
    "chunked_prefill_size",
    "page_size",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "enable_mixed_chunk",
    "disable_overlap_schedule",
    "context_length",
    "speculative_adaptive",
    "attn_dp_size",
    "kv_cache_dtype",
    "speculative_draft_model_path",
)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "value") and isinstance(value.value, str | int):  # enums
        return value.value
    return repr(value)


# ----------------------------------------------------------------------------- flags


def dump_flags() -> dict[str, Any]:
    """Every action of ``sglang serve``'s parser, as argparse holds it."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    actions = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        kind = type(action).__name__
        typ = action.type
        type_name = getattr(typ, "__name__", None) if typ is not None else None
        if type_name == "<lambda>" or (typ is not None and type_name is None):
            type_name = "callable"
        choices = None
        if action.choices is not None:
            choices = sorted(str(c) for c in action.choices)
        nargs = action.nargs
        actions.append(
            {
                "options": list(action.option_strings),
                "dest": action.dest,
                "action": kind,
                "nargs": nargs,
                "const": _jsonable(action.const),
                "default": _jsonable(action.default),
                "type": type_name,
                "choices": choices,
                "required": bool(action.required),
                "deprecated": kind.startswith("Deprecated")
                or "deprecated" in (action.help or "").lower()[:40],
            }
        )
    return {
        "sglang": __import__("sglang").__version__,
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "actions": actions,
    }


# ----------------------------------------------------------------------------- resolution


def _install_gpu(memory_mib: float, capability: tuple[int, int]) -> dict[str, Any]:
    """Patch the memory/device probes; return the platform facts for override_platform."""
    import sglang.srt.arg_groups.serving_hook as serving_hook
    import sglang.srt.utils.common as common

    common.is_cuda = lambda: True
    common.get_nvgpu_memory_capacity = lambda: float(memory_mib)
    common.get_device = lambda device_id=None: "cuda"
    serving_hook.get_device = common.get_device
    major, minor = capability
    return {
        "is_cuda": True,
        "is_hip": False,
        "is_npu": False,
        "is_xpu": False,
        "is_musa": False,
        "is_mps": False,
        "has_amx": False,
        "has_flashinfer": True,
        "is_sm90": major == 9,
        "is_sm100": major == 10,
        "is_sm100_or_sm110": major in (10, 11),
        "is_sm110": major == 11,
        "is_sm120": major == 12,
        "is_blackwell": major in (10, 11, 12),
        "is_hopper_with_cuda_12_3": major == 9,
        "device_sm": major * 10 + minor,
        "device_capability": (major, minor),
    }


@contextlib.contextmanager
def _environment(env: dict[str, str]):  # type: ignore[no-untyped-def]
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _failure(exc: BaseException, stderr: str) -> tuple[str, str]:
    if isinstance(exc, SystemExit):
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        return "argparse", (lines[-1] if lines else f"exit {exc.code}")
    return type(exc).__name__, str(exc)


_PARSER: argparse.ArgumentParser | None = None


def prepare_server_args(argv: list[str]) -> Any:
    """``server_args.prepare_server_args`` with the parser built once per worker.

    Building SGLang's parser (``ServerArgs.add_cli_args``) is 85% of a resolution's time and
    does not depend on the launch (no ``SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE`` here), so the
    worker keeps one; the rest of the body is SGLang's, line for line.
    """
    from sglang.srt.server_args import ServerArgs

    global _PARSER
    if _PARSER is None:
        _PARSER = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(_PARSER)
    parser = _PARSER
    if "--config" in argv:
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

        argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
    explicitly_set = any(
        arg == "--radix-eviction-policy" or arg.startswith("--radix-eviction-policy=")
        for arg in argv
    )
    raw_args = parser.parse_args(argv)
    raw_args._radix_eviction_policy_explicitly_set = explicitly_set
    server_args = ServerArgs.from_cli_args(raw_args)
    from sglang.srt.sampling.watermarking.core import redact_watermark_command_line

    server_args._launch_command = redact_watermark_command_line(argv, raw_args.watermark_config)
    return server_args


def _reserved_tokens(args: Any) -> int | str:
    """``managers.utils.compute_num_reserved_tokens`` on the published launch.

    That module imports ``einops`` (not in the oracle env), so its four lines are repeated
    here over SGLang's own pieces: the launch published as the tokenizer's, its ``spec`` bag
    and ``runtime_context.max_speculative_num_draft_tokens`` (the adaptive capacity included).
    """
    from sglang.srt import runtime_context as rc
    from sglang.srt.server_args import set_global_server_args_for_tokenizer
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    try:
        set_global_server_args_for_tokenizer(args)
        spec = rc.get_spec()
        if not SpeculativeAlgorithm.from_string(spec.speculative_algorithm).is_eagle():
            return 0
        return int(
            max(
                spec.speculative_eagle_topk * spec.speculative_num_steps,
                rc.max_speculative_num_draft_tokens(),
            )
        )
    except Exception as exc:
        return f"<{type(exc).__name__}: {exc}>"


def resolve(request: dict[str, Any]) -> dict[str, Any]:
    """One launch, resolved the way ``sglang serve`` would on the named GPU."""
    from sglang.srt import runtime_context as rc
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.configs.model_config import ModelConfig

    gpu = request["gpu"]
    facts = _install_gpu(gpu["memory_mib"], tuple(gpu["capability"]))
    fields = request.get("fields") or DEFAULT_FIELDS
    answer: dict[str, Any] = {
        "outcome": "accepted",
        "message": "",
        "fields": {},
        "context_len": None,
        "draft": None,
    }
    err = io.StringIO()
    with _environment(request.get("env") or {}), rc.override_platform(**facts):
        try:
            with contextlib.redirect_stderr(err):
                args = prepare_server_args(list(request["argv"]))
            args.resolve_once()
        except (SystemExit, Exception) as exc:
            answer["outcome"], answer["message"] = _failure(exc, err.getvalue())
            return answer
        for name in fields:
            try:
                answer["fields"][name] = _jsonable(resolution_result(args, name))
            except Exception as exc:  # a field this version does not have
                answer["fields"][name] = f"<{type(exc).__name__}>"
        answer["fields"]["reserved_tokens"] = _reserved_tokens(args)
        graphs = resolution_result(args, "cuda_graph_config")
        for phase in ("decode", "prefill"):
            cfg = getattr(graphs, phase, None)
            answer["fields"][f"cuda_graph_max_bs_{phase}"] = _jsonable(getattr(cfg, "max_bs", None))
            answer["fields"][f"cuda_graph_backend_{phase}"] = _jsonable(
                getattr(cfg, "backend", None)
            )
        if not request.get("context", True):
            return answer
        try:
            target = ModelConfig.from_server_args(args)
            answer["context_len"] = int(target.context_len)
        except Exception as exc:
            answer["outcome"], answer["message"] = _failure(exc, "")
            return answer
        draft_path = resolution_result(args, "speculative_draft_model_path")
        if request.get("draft_context", True) and draft_path:
            draft: dict[str, Any] = {"outcome": "accepted", "message": "", "context_len": None}
            try:
                d = ModelConfig.from_server_args(
                    args,
                    model_path=draft_path,
                    is_draft_model=True,
                    context_length=target.context_len,
                )
                draft["context_len"] = int(d.context_len)
            except Exception as exc:
                draft["outcome"], draft["message"] = _failure(exc, "")
            answer["draft"] = draft
    return answer


def kv_dtype(request: dict[str, Any]) -> dict[str, Any]:
    """``configure_kv_cache_dtype`` called with explicit numbers: bytes per KV element."""
    import types

    import torch
    from sglang.srt.mem_cache.kv_cache_dtype import configure_kv_cache_dtype

    quant = types.SimpleNamespace(kv_cache_quant_algo=request.get("kv_cache_quant_algo"))
    model = types.SimpleNamespace(quant_config=quant)
    try:
        model_dtype = getattr(torch, request.get("model_dtype", "bfloat16"))
        if "launch_dtype" in request:
            # The model dtype as a launch resolves it: --dtype against the config's dtype.
            from sglang.srt.configs.model_config import _get_and_verify_dtype

            model_dtype = _get_and_verify_dtype(request["config"], request["launch_dtype"])
        _, dtype = configure_kv_cache_dtype(
            server_args_kv_cache_dtype=request["kv_cache_dtype"],
            model=model,  # type: ignore[arg-type]
            model_dtype=model_dtype,
            is_draft_worker=bool(request.get("draft")),
            is_dflash=bool(request.get("dflash")),
            speculative_draft_attention_backend=request.get("draft_backend") or "",
            speculative_draft_kv_cache_dtype=request.get("draft_kv_cache_dtype"),
        )
    except Exception as exc:
        return {"outcome": type(exc).__name__, "message": str(exc)}
    return {
        "outcome": "accepted",
        "bytes": torch.empty((), dtype=dtype).element_size(),
        "model_bytes": torch.empty((), dtype=model_dtype).element_size(),
    }


def serve() -> int:
    """Answer requests, one JSON line each, until stdin closes."""
    import sglang.srt.server_args  # noqa: F401  (the slow import, once, before the first answer)

    logging.disable(logging.WARNING)
    out = sys.stdout
    sys.stdout = sys.stderr  # anything SGLang prints must not corrupt the protocol
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            answer = kv_dtype(request) if request.get("op") == "kv_dtype" else resolve(request)
        except Exception:
            answer = {"outcome": "worker-error", "message": traceback.format_exc()[-2000:]}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


def main() -> int:
    """``flags`` | ``serve``."""
    command = sys.argv[1] if len(sys.argv) > 1 else "serve"
    if command == "flags":
        logging.disable(logging.WARNING)
        print(json.dumps(dump_flags(), indent=1, sort_keys=True))
        return 0
    return serve()


if __name__ == "__main__":
    raise SystemExit(main())
