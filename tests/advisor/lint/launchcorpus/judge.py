"""Lint's verdicts on the launch corpus, compared with SGLang 0.5.23's (``verdicts.json``).

Used by tests/advisor/lint/test_launch_corpus.py and scripts/bench-lint-corpus. A launch's
SGLang verdict is ``accepted``, ``refused`` (its parser exits) or ``fails`` (resolution,
the model config or the draft raises, or an EAGLE-family launch without a draft resolves to no
draft path, so the target checkpoint is loaded as the draft); ``capped`` when accepted and
SGLang resets ``max_running_requests`` to 48. Lint agrees when it reports an error of a rule
that claims SGLang refuses or fails (``VERDICT_CODES``) exactly for the launches SGLang does not
accept, and SPEC001 exactly for the accepted launches SGLang caps.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specserver_advisor.lint.engine import Options, read_launches, run

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"
#: Error rules whose finding says SGLang refuses the launch or fails starting it.
VERDICT_CODES = frozenset(
    {"SPEC002", "SPEC005", "SPEC007", "SPEC010", "SPEC013", "SPEC015", "SPEC016", "SPEC017"}
)
GPU = "h100"


@dataclass
class Result:
    launches: int = 0
    agreed: int = 0
    found: int = 0
    per_form: Counter[str] = field(default_factory=Counter)
    agreed_per_form: Counter[str] = field(default_factory=Counter)
    disagreements: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    silent_files: list[str] = field(default_factory=list)
    files: int = 0


def load() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    launches = json.loads((HERE / "launches.json").read_text())["launches"]
    verdicts = json.loads((HERE / "verdicts.json").read_text())["verdicts"]
    return launches, verdicts


def judge(env: dict[str, str] | None = None) -> Result:
    """Run lint over the corpus and compare it with SGLang's stored verdicts."""
    launches, verdicts = load()
    options = Options(env=env or {}, gpu=GPU)
    report = run([FILES], options)
    by_file: dict[str, list[Any]] = defaultdict(list)
    for d in report.diagnostics:
        by_file[Path(d.path).name].append(d)
    result = Result(files=report.files)
    result.silent_files = sorted(Path(name).name for name in report.no_launch)
    taken: dict[str, list[Any]] = {}
    for entry, verdict in zip(launches, verdicts, strict=True):
        name = entry["file"]
        first, last = entry["lines"]
        if name not in taken:
            taken[name], _, _ = read_launches(FILES / name, options)
        lines_of = [{la.start.line, *(p.line for p in la.positions)} for la in taken[name]]
        found = any(any(first <= n <= last for n in lines) for lines in lines_of)
        result.launches += 1
        result.per_form[entry["form"]] += 1
        where = f"{name}:{first}-{last} ({entry['form']})"
        if found:
            result.found += 1
        else:
            result.missing.append(where)
        codes = {d.code for d in by_file[name] if first <= d.line <= last}
        lint_rejects = bool(codes & VERDICT_CODES)
        lint_caps = "SPEC001" in codes
        sglang_rejects = verdict["verdict"] != "accepted"
        agree = found and lint_rejects == sglang_rejects
        if agree and not sglang_rejects:
            agree = lint_caps == verdict["capped"]
        if agree:
            result.agreed += 1
            result.agreed_per_form[entry["form"]] += 1
        else:
            result.disagreements.append(
                f"{where}: SGLang {verdict['verdict']}"
                f"{' (capped at 48)' if verdict['capped'] else ''} [{verdict['message'][:120]}]"
                f"; lint {sorted(codes) or 'nothing'}{'' if found else ' (launch not found)'}"
            )
    return result


def table(result: Result) -> str:
    rows = [f"{'form':28} launches agreed"]
    for form, n in sorted(result.per_form.items()):
        rows.append(f"{form:28} {n:8} {result.agreed_per_form[form]:6}")
    share = 100.0 * result.agreed / max(result.launches, 1)
    rows.append(
        f"{len(result.per_form)} forms, {result.launches} launches in {result.files} files: "
        f"lint agrees with SGLang 0.5.23 on {result.agreed} ({share:.1f}%); "
        f"{result.found} launches found, {len(result.silent_files)} silent files"
    )
    return "\n".join(rows)
