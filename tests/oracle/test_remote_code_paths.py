"""Every path in SGLang 0.5.23 to the model repository's Python is a refused flag (issue 37,
finding 4): this reads the installed source for each call that runs repository code
(``trust_remote_code=True`` and ``get_class_from_dynamic_module(``) and holds each to the
flags that reach it, so a call site SGLang adds is a failure here, not a way in."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import yaml

from oracle import REPO, sglang_file
from specserver_advisor.models import SpecServer
from specserver_operator.core import podpolicy

#: (file under sglang/srt, the function around the call) -> the extraArgs that reach it, each
#: of which the pod policy refuses; () means "only with --trust-remote-code" (the call passes
#: the launch's own trust_remote_code on).
CALL_SITES: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    # The ModelOpt loader (DefaultModelLoader.load_model with modelopt_quant, and
    # ModelOptModelLoader), chosen in get_model_loader by --modelopt-quant, a ModelOpt
    # checkpoint/export path, or --quantization modelopt*.
    ("model_loader/loader.py", "_load_modelopt_base_model"): (
        ("--modelopt-quant", "fp8"),
        ("--modelopt-checkpoint-restore-path", "/tmp/x"),
        ("--modelopt-checkpoint-save-path", "/tmp/x"),
        ("--modelopt-export-path", "/tmp/x"),
        ("--quantization", "modelopt"),
        ("--quantization", "modelopt_fp8"),
        ("--quantization", "modelopt_fp4"),
        ("--quantization", "modelopt_mixed"),
    ),
    # The Transformers backend: --model-impl transformers (and an architecture SGLang does not
    # implement: docs/security.md, "Not covered").
    ("models/transformers.py", "__init__"): (("--model-impl", "transformers"),),
    ("models/transformers.py", "_resolve_attention_backend_model_cls"): (
        ("--model-impl", "transformers"),
    ),
    ("model_loader/utils.py", "resolve_transformers_arch"): (("--model-impl", "transformers"),),
    # Only when the launch's trust_remote_code is on.
    ("utils/hf_transformers/tokenizer.py", "_load_tokenizer_by_declared_class"): (),
}
#: Calls the model repository's own files reach with no flag at all (docs/security.md, "Not
#: covered"): an architecture SGLang does not implement falls back to the Transformers backend
#: (the three sites above, whatever --model-impl says), and a multimodal model whose
#: preprocessor_config.json AutoProcessor cannot read builds its processor from auto_map.
#: Listed so that the test still fails on any site not named here.
UNGATED = {
    ("utils/hf_transformers/processor.py", "_build_processor_manually"),
}


def _sites(root: Path) -> set[tuple[str, str]]:
    """(file, enclosing function) of every call passing trust_remote_code=True or calling
    get_class_from_dynamic_module, in SGLang's server runtime."""
    found: set[tuple[str, str]] = set()
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "trust_remote_code" not in text and "get_class_from_dynamic_module" not in text:
            continue
        tree = ast.parse(text)
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                forced = any(
                    k.arg == "trust_remote_code"
                    and isinstance(k.value, ast.Constant)
                    and k.value.value is True
                    for k in node.keywords
                )
                if forced or name == "get_class_from_dynamic_module":
                    found.add((path.relative_to(root).as_posix(), func.name))
    # A call inside a nested function is found for it and for every function around it; keep
    # the innermost (the one named in the table).
    return {
        (f, n)
        for f, n in found
        if not any(f == g and n != m and _nested(root / f, n, m) for g, m in found)
    }


def _nested(path: Path, outer: str, inner: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and func.name == outer:
            for node in ast.walk(func):
                if node is not func and getattr(node, "name", None) == inner:
                    return True
    return False


SPEC = yaml.safe_load((REPO / "manifests/examples/qwen3-8b-eagle3-l4.yaml").read_text())


def _spec(*extra: str) -> SpecServer:
    doc = copy.deepcopy(SPEC)
    doc["spec"]["engine"]["extraArgs"] = list(extra)
    return SpecServer.model_validate(doc)


def test_every_call_that_runs_repository_code_is_reached_only_by_refused_flags() -> None:
    root = sglang_file("srt/server_args.py").parent
    found = _sites(root)
    known = set(CALL_SITES) | UNGATED
    assert found == known, (
        "SGLang's calls that run the model repository's code changed; add the flags that "
        f"reach each new one to podpolicy's refused set: new {sorted(found - known)},"
        f" gone {sorted(known - found)}"
    )
    policy = podpolicy.PodPolicy()
    for site, flags in CALL_SITES.items():
        for flag in [("--trust-remote-code",), *flags]:
            refused = podpolicy.refusal(_spec(*flag).spec, policy)
            assert refused and "SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS" in refused, (site, flag)
            joined = "=".join(flag) if len(flag) == 2 else flag[0]
            assert podpolicy.refusal(_spec(joined).spec, policy), (site, joined)


def test_the_modelopt_loader_passes_trust_remote_code_whatever_the_launch_says() -> None:
    """The reason the ModelOpt flags are code-execution flags: the calls pass True, not the
    launch's trust_remote_code, and get_model_loader picks the loader for these values."""
    loader = sglang_file("srt/model_loader/loader.py").read_text()
    body = loader.split("def _load_modelopt_base_model", 1)[1].split("\n    def ", 1)[0]
    assert body.count("trust_remote_code=True") >= 3
    picker = loader.split("def get_model_loader", 1)[1]
    for value in ("modelopt_fp8", "modelopt_fp4", "modelopt_mixed", '"modelopt"'):
        assert value in picker
    for field in ("checkpoint_restore_path", "checkpoint_save_path", "export_path"):
        assert f"modelopt_config.{field}" in picker
