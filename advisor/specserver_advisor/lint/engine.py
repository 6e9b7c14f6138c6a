"""Run the lint rules over files: find launches, load model configs once, apply suppressions.

Called by ``specserver-advisor lint``. ``files`` picks the files (excludes, stdin), ``sources``
and ``shell`` find the launches, every rule in the registry runs on every launch it applies
to, ``suppress`` applies suppressions. Broken input (bad YAML, binary or huge files, invalid
SpecServers, unterminated shell quotes) becomes one ``INPUT001`` diagnostic for that file at the
line it broke (``INFO003`` for template syntax), never a traceback; shell variables the file
never sets become ``INFO002``, a launch the shell budget did not fully evaluate ``INFO004``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specserver_advisor.bounded import InputLimitError, gc_young_only
from specserver_advisor.launch.secrets import scrub, secret_values
from specserver_advisor.lint import finder, suppress
from specserver_advisor.lint.configsource import merge_configs
from specserver_advisor.lint.files import (
    DEFAULT_EXCLUDE,
    STDIN,
    YAML_EXT,
    is_helm_template,
    select_files,
)
from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.rules import ENGINE_CODES, RULES
from specserver_advisor.lint.rules._base import draft_path_ignored
from specserver_advisor.lint.rules.engine_codes import DOCS as ENGINE_DOCS
from specserver_advisor.lint.selection import known_codes
from specserver_advisor.lint.sources import InputError, looks_like_template
from specserver_advisor.lint.specservers import SpecServerError, launch_from_specserver
from specserver_advisor.loaders.reading import MAX_FILE_BYTES, decode_utf8, read_bytes
from specserver_advisor.sglang import draftcontext

#: Bytes of one linted file or of stdin (``loaders.reading``'s default).
MAX_BYTES = MAX_FILE_BYTES


@dataclass
class Options:
    """What the user asked for."""

    #: Codes to report (None: all).
    enabled: frozenset[str] | None = None
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    model_dirs: list[Path] = field(default_factory=list)
    #: ``PATH=DIR`` pairs: a model reference at or under the absolute container path PATH
    #: is looked up under the local folder DIR (``/models/org/name=./org-name``).
    model_maps: list[tuple[str, Path]] = field(default_factory=list)
    fetch_configs: bool = False
    gpu: str | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    #: Bytes read for the path ``-`` (decoded like a file's), and the name to report it under
    #: (its suffix picks the kind).
    stdin: bytes | None = None
    stdin_name: str = "-"

    def codes(self) -> frozenset[str]:
        return self.enabled if self.enabled is not None else frozenset(known_codes())


@dataclass
class Report:
    """What a lint run found and how much it looked at."""

    diagnostics: list[Diagnostic]
    files: int
    launches: int
    excluded: int
    #: Files read in which nothing was found: no launch, no finding (named in the summary).
    no_launch: list[str] = field(default_factory=list)


#: The server rules decided by the flag names alone (they run when a --config is unread).
NAME_RULES = frozenset({"SPEC015"})


def engine_diag(code: str, path: str, line: int, column: int, message: str, fix: str) -> Diagnostic:
    """A diagnostic for one of the engine's own codes."""
    name, severity = ENGINE_CODES[code]
    return Diagnostic(path, line, column, code, name, severity, message, fix)


def _input_error(path: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    return engine_diag(
        "INPUT001",
        path,
        line,
        column,
        message,
        "Fix the file so it parses, or exclude it from the lint run.",
    )


def decode(name: str, raw: bytes) -> tuple[str | None, list[Diagnostic]]:
    """The text of a file, or the INPUT001 that says why it cannot be linted."""
    if len(raw) > MAX_BYTES:
        return None, [_input_error(name, f"file too large to lint ({len(raw)} bytes)")]
    if b"\x00" in raw[:8192]:
        return None, [_input_error(name, "binary file")]
    try:
        return decode_utf8(raw, name), []
    except InputLimitError as exc:
        return None, [_input_error(name, exc.reason, exc.line or 1)]


def read_raw(path: Path, options: Options) -> tuple[str, bytes | None, list[Diagnostic]]:
    """The name to report a file under and its bytes (``loaders.reading``: size checked before
    reading), or the INPUT001 that says why it cannot be read."""
    if path == STDIN:
        return options.stdin_name, options.stdin or b"", []
    name = str(path)
    try:
        return name, read_bytes(path, name, max_bytes=MAX_BYTES), []
    except InputLimitError as exc:
        reason = exc.reason.replace("too large (", "file too large to lint (", 1)
        return name, None, [_input_error(name, reason)]


def is_yaml(name: str, text: str) -> bool:
    """Whether a file is read as YAML (by extension, else by its first line)."""
    if name.endswith(YAML_EXT):
        return True
    if name.endswith((".sh", ".bash")):
        return False
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    return not first.startswith("#!") and (
        first.startswith(("---", "apiVersion:", "kind:", "services:")) or ": " in first
    )


#: Forms whose files always say what they held (INFO006 when no launch); other files do when
#: they name SGLang, else the summary names them among the files with no launch.
ALWAYS_SAID = ("Markdown", "Jupyter notebook", "Python source", "Dockerfile", "Makefile", "text")


def launches_in_text(name: str, text: str) -> tuple[list[Launch], list[Diagnostic]]:
    """Launches found in one file's text (``finder``: every form by its own syntax), and input
    diagnostics: INPUT001 for a YAML or shell file that does not parse, INFO006 for a file
    where no launch could be taken."""
    launches: list[Launch] = []
    problems: list[Diagnostic] = []
    try:
        found = finder.scan(name, text)
        launches = found.launches
        for doc in found.specservers:
            try:
                launches.append(launch_from_specserver(name, doc))
            except SpecServerError as exc:
                problems += [
                    _input_error(name, message, at.line, at.column) for message, at in exc.problems
                ]
        if not launches and not problems and _say_none(found, text):
            problems.append(
                engine_diag(
                    "INFO006",
                    name,
                    1,
                    1,
                    f"no SGLang launch taken from this file ({found.why})",
                    ENGINE_DOCS["INFO006"][1],
                )
            )
    except InputError as exc:
        if looks_like_template(text):
            problems.append(
                engine_diag(
                    "INFO003",
                    name,
                    exc.line,
                    exc.column,
                    "a template (`{{ }}` outside YAML values), not linted",
                    "Lint the rendered output (helm template ... | specserver-advisor lint -).",
                )
            )
        else:
            problems.append(_input_error(name, str(exc), exc.line, exc.column))
    except (RecursionError, ValueError, TypeError, AttributeError) as exc:
        problems.append(_input_error(name, f"cannot interpret this file: {exc}"))
    return launches, problems


def _say_none(found: finder.Scan, text: str) -> bool:
    """INFO006 for the finder's own forms always; for YAML and shell files only when a launch
    is written in them that could not be taken (else the summary names them)."""
    return found.form in ALWAYS_SAID or finder.LAUNCH.search(text) is not None


def read_launches(path: Path, options: Options) -> tuple[list[Launch], list[Diagnostic], str]:
    """Launches found in one file, input diagnostics, and the text (for suppressions)."""
    name, raw, problems = read_raw(path, options)
    if raw is None:
        return [], problems, ""
    text, problems = decode(name, raw)
    if text is None:
        return [], problems, ""
    launches, problems = launches_in_text(name, text)
    merge_configs(launches, name)
    return launches, problems, text


def _is_dir(name: str) -> bool:
    """``Path(name).is_dir()``, False for a name the filesystem refuses (too long, NUL)."""
    try:
        return Path(name).is_dir()
    except (OSError, ValueError):
        return False


class ConfigFinder:
    """Model configs for the context rules, found once per model reference."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.cache: dict[tuple[str, str | None], Any] = {}

    def find(
        self, ref: str | None, config_file: str | None = None
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The config of ``ref`` (``config_file``: the file SGLang reads instead of
        config.json, ``sglang.overrides.config_file_names``) and why not, when not found."""
        if not ref:
            return None, None
        key = (ref, config_file)
        if key in self.cache:
            cached: tuple[dict[str, Any] | None, str | None] = self.cache[key]
            return cached
        from specserver_advisor.loaders.configs import (
            ConfigNotFoundError,
            ConfigUnreadableError,
            load_config,
        )

        env = dict(self.options.env)
        if not self.options.fetch_configs:
            env.pop("HF_ENDPOINT", None)
        result: tuple[dict[str, Any] | None, str | None] = (None, f"no config for {ref}")
        candidates = [
            *(str(local) for local in mapped(ref, self.options.model_maps)),
            *(str(d / ref) for d in self.options.model_dirs),
            ref,
        ]
        for candidate in candidates:
            try:
                result = (load_config(candidate, env=env, config_file=config_file).config, None)
                break
            except (ConfigNotFoundError, ConfigUnreadableError) as exc:
                result = (None, str(exc))
                if config_file and _is_dir(candidate):
                    break  # the model's directory, without the file the launch names
            except (OSError, RuntimeError, ValueError) as exc:  # e.g. "~nobody/model"
                result = (None, f"cannot look up {candidate!r}: {exc}")
        self.cache[key] = result
        return result

    @staticmethod
    def inline(launch: Launch) -> Any:
        """A SpecServer's inline configs (``configchain.inline``, the chain's first source)."""
        from specserver_advisor.loaders import configchain

        if launch.specserver is None:
            return None
        return configchain.inline(launch.specserver).configs

    def attach(self, launch: Launch) -> None:
        if launch.kind == "bench":
            return

        def ref(field_name: str) -> str | None:
            if field_name in launch.unresolved_fields:
                return None  # INFO002 already names the variable
            value = launch.parsed.values.get(field_name)
            return str(value) if value is not None else None

        from specserver_advisor.sglang.overrides import config_file_names

        target_file, draft_file = config_file_names(launch.parsed.values)
        target, why = self.find(ref("model_path"), target_file)
        draft, why_d = self.find(ref("speculative_draft_model_path"), draft_file)
        given = self.inline(launch)
        if given is not None:  # the operator's order: a SpecServer's inline configs first
            target, why = given.target, None
            if ref("speculative_draft_model_path") is not None:
                draft, why_d = given.draft, None
        spec = launch.specserver
        if spec is not None and target is not None and spec.speculative.draft_context_from_target:
            # The operator renders the target's own context for the draft (draftcontext.py).
            launch.parsed.values["json_model_override_args"] = draftcontext.override_json(target)
        launch.configs.update({"target": target, "draft": draft})
        if target is None and why:
            launch.configs.update(
                missing=why, missing_model="target", missing_ref=ref("model_path")
            )
        elif draft is None and why_d and not draft_path_ignored(target):  # the draft's rules
            draft_ref = ref("speculative_draft_model_path")
            launch.configs.update(missing=why_d, missing_model="draft", missing_ref=draft_ref)
        if launch.gpu_type is None:
            launch.gpu_type = self.options.gpu


def mapped(ref: str, maps: list[tuple[str, Path]]) -> list[Path]:
    """Local folders for a model reference under the absolute paths of ``PATH=DIR`` pairs."""
    out = []
    for prefix, local in maps:
        root = prefix.rstrip("/") or "/"
        if ref == root:
            out.append(local)
        elif ref.startswith(root.rstrip("/") + "/"):
            out.append(local / ref[len(root) :].lstrip("/"))
    return out


def lint(paths: list[Path], options: Options) -> tuple[list[Diagnostic], int]:
    """All diagnostics for the paths (sorted) and the number of files read."""
    report = run(paths, options)
    return report.diagnostics, report.files


def run(paths: list[Path], options: Options) -> Report:
    """Lint the paths: diagnostics (sorted, suppressions applied) and what was looked at.

    The cyclic collector runs on young objects only, after each file and each launch's rules
    (``bounded.gc_young_only``): what a file yields is kept to the end, and full collections
    walking the growing result again and again cost more than the rules."""
    with gc_young_only() as settle:
        return _run(paths, options, settle)


def _run(paths: list[Path], options: Options, settle: Callable[[], None]) -> Report:
    finder = ConfigFinder(options)
    launches: list[Launch] = []
    diagnostics: list[Diagnostic] = []
    texts: dict[str, str] = {}
    selection = select_files(paths, options.exclude)
    diagnostics += skipped_charts(selection.excluded)
    for path in selection.files:
        in_file, problems, text = read_launches(path, options)
        settle()  # one file's young objects, bounded by its size
        launches += in_file
        diagnostics += problems
        texts[options.stdin_name if path == STDIN else str(path)] = text
    for launch in launches:
        finder.attach(launch)
    ctx = Context(launches)
    chosen: dict[tuple[str, bool], list[Any]] = {}  # the rules for a kind of launch, once
    for index, launch in enumerate(launches):
        found = [*_unresolved(launch), *_incomplete(launch), *_unknown_gpu(launch)]
        kind = (launch.kind, bool(launch.config_unknown))
        if kind not in chosen:
            chosen[kind] = _rules_for(*kind)
        for module in chosen[kind]:
            found += list(module.check(launch, ctx))
        settle()
        for d in found:
            d.origin = index
            if launch.form:
                d.message = f"{d.message} (in {launch.form})"
        diagnostics += found
    enabled = options.codes()
    diagnostics = [d for d in diagnostics if d.code in enabled]
    hidden = set().union(*(secret_values(la.env, la.parsed.values) for la in launches))
    for d in diagnostics:  # a finding never prints a credential's value
        d.message, d.fix = scrub(d.message, hidden), scrub(d.fix, hidden)
    diagnostics = suppress.apply(diagnostics, launches, texts, enabled)
    unique = {(d.path, d.line, d.column, d.code, d.message): d for d in diagnostics}
    ordered = sorted(unique.values(), key=lambda d: (d.path, d.line, d.column, d.code))
    spoken = {la.path for la in launches} | {d.path for d in ordered}
    spoken |= {la.config_from for la in launches if la.config_from}  # merged into a launch
    said = {os.path.normpath(name) for name in spoken}
    quiet = [name for name in texts if os.path.normpath(name) not in said]
    return Report(ordered, len(selection.files), len(launches), len(selection.excluded), quiet)


def _rules_for(kind: str, config_unknown: bool) -> list[Any]:
    """The rule modules that check a launch of ``kind`` (a SpecServer is also a server)."""
    applies = "server" if kind == "specserver" else kind
    out = []
    for module in RULES.values():
        if kind not in module.APPLIES_TO and applies not in module.APPLIES_TO:
            continue
        if kind == "specserver" and "specserver" not in module.APPLIES_TO:
            continue
        if config_unknown and module.CODE.startswith("SPEC") and module.CODE not in NAME_RULES:
            continue  # any flag may come from the unread --config file
        out.append(module)
    return out


def skipped_charts(excluded: list[Path]) -> list[Diagnostic]:
    """INFO003 once per Helm chart whose ``templates/`` the excludes skipped: the chart is not
    clean, it was not linted; the finding names the command that lints it."""
    charts: dict[Path, None] = {}
    for path in excluded:
        chart = next((p.parent for p in (path, *path.parents) if is_helm_template(p)), None)
        if chart is not None:
            charts[chart] = None
    out = []
    for chart in charts:
        shown = shlex.quote(str(chart))
        out.append(
            engine_diag(
                "INFO003",
                str(chart / "Chart.yaml"),
                1,
                1,
                f"a Helm chart: its templates/ are not linted (Go templates are not YAML); "
                f"lint what they render: helm template {shown} | specserver-advisor lint -",
                f"helm template {shown} --values YOUR-VALUES.yaml | specserver-advisor lint -",
            )
        )
    return out


def _unknown_gpu(launch: Launch) -> list[Diagnostic]:
    """INFO005 once for a server launch whose GPU type the memory rules do not know."""
    from specserver_advisor.gpus import GPUS, UnknownGpuError, lookup_gpu

    if launch.kind == "bench" or not launch.gpu_type:
        return []
    try:
        lookup_gpu(launch.gpu_type)
        return []
    except UnknownGpuError:
        pass
    message = (
        f"unknown GPU {launch.gpu_type!r}, so SPEC009 and SPEC016 (KV pool, memory) did not "
        f"run; valid names: {', '.join(GPUS)} (any case; aliases: {', '.join(gpu_aliases())})"
    )
    fix = "Pass --gpu (or the SpecServer's gpuType) as one of the valid names."
    at = launch.start
    return [engine_diag("INFO005", launch.path, at.line, at.column, message, fix)]


def gpu_aliases() -> list[str]:
    """The other spellings ``gpus.lookup_gpu`` accepts."""
    from specserver_advisor.gpus import _ALIASES

    return sorted(_ALIASES)


def _incomplete(launch: Launch) -> list[Diagnostic]:
    """INFO004 once for a launch the shell evaluator did not fully evaluate (and why)."""
    if launch.incomplete is None:
        return []
    message = f"not fully evaluated: {launch.incomplete}"
    if not launch.config_unknown:
        message += "; the flags it decided are checked"
    fix = "Simplify the script around the launch, or lint the command it runs."
    at = launch.start
    return [engine_diag("INFO004", launch.path, at.line, at.column, message, fix)]


def _unresolved(launch: Launch) -> list[Diagnostic]:
    """INFO002 for each shell variable (or command output) the launch uses that is unknown:
    what it supplies (whole arguments, or only the values of named options) is not checked."""
    out = []
    for name, pos in launch.unresolved.items():
        if name.startswith("{"):
            fix = "Lint the rendered output (helm template ... | specserver-advisor lint -)."
            message = f"{name} is a template expression"
        elif name.startswith("$"):
            fix = "Write the value in the script, or set a variable to it."
            message = f"the output of {name} is unknown"
        else:
            fix = f"Set {name} in the script (or give a default: ${{{name}:-value}})."
            message = f"${name} is not set in this file"
        options = ", ".join(dict.fromkeys(launch.unresolved_flags.get(name, [])))
        if options:  # it supplies values only: the option names around it are decided
            message += f": the value it gives {options} is not checked (flag names are)"
        else:
            message += ": the arguments it supplies are not checked"
        out.append(engine_diag("INFO002", launch.path, pos.line, pos.column, message, fix))
    return out
