"""Read facts out of an SGLang wheel's source with ``ast`` (never importing or running it).

Used by ``python -m specserver_advisor.sglang.wheelsource WHEEL`` to regenerate
``data/flags-0.5.23.json`` and by the fidelity test, which checks that the advisor's flag names,
defaults and auto-choose table match the pinned wheel.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from pathlib import Path
from typing import Any

FIELDS_PREFIX = "sglang/srt/arg_groups/fields/"
SPEC_HOOK = "sglang/srt/arg_groups/speculative_hook.py"


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return {"expr": ast.unparse(node)}


def _type_name(node: ast.expr) -> str:
    text = ast.unparse(node)
    if text.startswith("Optional[") and text.endswith("]"):
        return text[len("Optional[") : -1]
    return text


def _field_from_annassign(stmt: ast.AnnAssign) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(stmt.target, ast.Name):
        return None
    ann = stmt.annotation
    if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "A"):
        return None
    parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    name = stmt.target.id
    info: dict[str, Any] = {
        "cli": "--" + name.replace("_", "-"),
        "aliases": [],
        "type": _type_name(parts[0]),
        "no_cli": False,
        "action": None,
    }
    info["default"] = _literal(stmt.value) if stmt.value is not None else {"expr": "required"}
    meta = parts[1] if len(parts) > 1 else None
    if isinstance(meta, ast.Call):
        for kw in meta.keywords:
            if kw.arg == "aliases":
                info["aliases"] = _literal(kw.value)
            elif kw.arg == "no_cli":
                info["no_cli"] = bool(_literal(kw.value))
            elif kw.arg == "cli_name":
                info["cli"] = _literal(kw.value)
            elif kw.arg == "action":
                info["action"] = ast.unparse(kw.value)
    return name, info


def read_fields(wheel: Path) -> dict[str, dict[str, Any]]:
    """Every ServerArgs field of the wheel: CLI name, aliases, type, default."""
    fields: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for member in sorted(zf.namelist()):
            if not (member.startswith(FIELDS_PREFIX) and member.endswith(".py")):
                continue
            tree = ast.parse(zf.read(member).decode())
            for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
                for stmt in cls.body:
                    if isinstance(stmt, ast.AnnAssign):
                        found = _field_from_annassign(stmt)
                        if found:
                            fields[found[0]] = found[1]
    return fields


def read_auto_choose_table(wheel: Path) -> list[tuple[list[str], tuple[int, int, int]]]:
    """The (architectures, (steps, topk, draft_tokens)) rows of ``_auto_choose_speculative_params``.

    The STANDALONE row is returned with the architecture list ``["<STANDALONE>"]`` and the final
    fallback with ``["<default>"]``.
    """
    with zipfile.ZipFile(wheel) as zf:
        tree = ast.parse(zf.read(SPEC_HOOK).decode())
    func = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "_auto_choose_speculative_params"
    )
    rows: list[tuple[list[str], tuple[int, int, int]]] = []

    def visit(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                test = stmt.test
                ret = next((s for s in stmt.body if isinstance(s, ast.Return)), None)
                archs: list[str] = []
                if isinstance(test, ast.Compare) and isinstance(test.comparators[0], ast.List):
                    archs = [
                        str(e.value)
                        for e in test.comparators[0].elts
                        if isinstance(e, ast.Constant)
                    ]
                elif isinstance(test, ast.Compare) and "STANDALONE" in ast.unparse(test):
                    archs = ["<STANDALONE>"]
                if ret is not None and ret.value is not None:
                    rows.append((archs, tuple(_literal(ret.value))))
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                value = _literal(stmt.value)
                if isinstance(value, tuple):
                    rows.append((["<default>"], value))

    visit(func.body)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Dump the wheel's flag table as JSON (the committed data file)."""
    parser = argparse.ArgumentParser(prog="python -m specserver_advisor.sglang.wheelsource")
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    fields = read_fields(args.wheel)
    text = (
        json.dumps(
            {"sglang": args.wheel.name.split("-")[1], "fields": fields}, indent=1, sort_keys=True
        )
        + "\n"
    )
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def read_tree(wheel: Path, member: str) -> ast.Module:
    """Parse one source file of the wheel."""
    with zipfile.ZipFile(wheel) as zf:
        return ast.parse(zf.read(member).decode())


def string_constants(tree: ast.AST) -> set[str]:
    """Every string literal in a module (adjacent literals arrive joined)."""
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def module_assignment(tree: ast.Module, name: str) -> Any:
    """The literal value assigned to a module-level name."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return _literal(value)
    raise KeyError(name)


def string_lists_in_function(tree: ast.Module, function: str) -> list[list[str]]:
    """Lists/tuples of string literals inside a function (e.g. architecture lists)."""
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    out = []
    for node in ast.walk(func):
        if (
            isinstance(node, ast.List | ast.Tuple)
            and node.elts
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
        ):
            out.append([str(e.value) for e in node.elts])  # type: ignore[attr-defined]
    return out
