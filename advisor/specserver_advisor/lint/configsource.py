"""Find each launch's ``--config`` file and merge it as SGLang does (``configfile``): the I/O
edge of that merge, called by the engine for the launches of each file.

SGLang opens the path from where the launch runs. For a file in a repository that is taken as
the launch file's folder; else a ConfigMap in the same file whose data key is the path's base
name (mounted at that path); else a file of that base name beside the launch. A path from a
variable, or a file found nowhere, leaves the flags it sets unknown: the launch says so
(INFO004). SGLang's own refusals (not ``.yaml``/``.yml``, not a mapping) are SPEC015.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from specserver_advisor.bounded import InputLimitError
from specserver_advisor.lint.configfile import apply_config, config_index
from specserver_advisor.lint.model import Launch
from specserver_advisor.loaders import yamlnodes
from specserver_advisor.loaders.reading import MAX_FILE_BYTES, decode_utf8, read_bytes
from specserver_advisor.sglang.flags import CONFIG_FLAG


def merge_configs(launches: list[Launch], path: str) -> None:
    """Merge the ``--config`` file into every server launch of the file ``path`` that has one."""
    for launch in launches:
        if launch.kind != "server":
            continue
        at = config_index(launch.args)
        if at is None:
            _not_merged(launch)
            continue
        ref = launch.args[at + 1]
        launch.config_at = launch.positions[at] if at < len(launch.positions) else launch.start
        if at + 1 in launch.held[0]:
            _unknown(launch, f"its --config path {ref} comes from a variable")
            continue
        if PurePosixPath(ref).suffix.lower() not in (".yaml", ".yml"):
            suffix = PurePosixPath(ref).suffix
            launch.config_refused = [f"Config file must be YAML format, got: {suffix}"]
            continue
        found = _find(launch, ref, path)
        if found is None:
            _unknown(launch, f"its --config file {ref} was not found beside {path}")
            continue
        text, first_line, shown = found
        try:
            docs = yamlnodes.load_all(text, shown)
        except InputLimitError as exc:
            _unknown(launch, f"its --config file {shown} does not parse: {exc.reason}")
            continue
        doc = docs[0] if docs else None
        doc = {} if doc is None else doc
        if not isinstance(doc, dict):
            launch.config_refused = [
                f"Config file must contain a dictionary at root level ({shown})"
            ]
            continue
        apply_config(launch, shown, doc, first_line)


def _not_merged(launch: Launch) -> None:
    """SGLang's refusal of several ``--config`` items, and a config file it never reads: only
    the exact item ``--config`` followed by the path is merged (``"--config" in argv``), so
    ``--config=FILE`` or an abbreviation is parsed as a plain option and the file ignored."""
    exact = [i for i, a in enumerate(launch.args) if a == CONFIG_FLAG]
    index = exact[0] if exact else launch.parsed.positions.get("config")
    if index is None:
        return
    launch.config_at = launch.positions[index] if index < len(launch.positions) else launch.start
    if len(exact) > 1:
        launch.config_refused = ["Multiple config files specified! Only one allowed."]
    elif not exact:
        launch.config_refused = [
            f"{launch.args[index]}: SGLang 0.5.23 merges a config file only when written "
            "`--config FILE`; this spelling is parsed as a plain option and the file is ignored"
        ]


def _unknown(launch: Launch, why: str) -> None:
    launch.config_unknown = True
    note = f"{why}, so the flags it sets are unknown: only flag names and the pod spec are checked"
    launch.incomplete = "; ".join(filter(None, [launch.incomplete, note]))


def _find(launch: Launch, ref: str, path: str) -> tuple[str, int, str] | None:
    """(text, its first line in the file it is in, its name) of the config, or None."""
    base = PurePosixPath(ref).name
    here = Path(path).parent
    candidates = [] if ref.startswith("/") else [here / ref]
    if base in launch.embedded_files:
        return launch.embedded_files[base]
    candidates.append(here / base)
    for candidate in candidates:
        if not candidate.is_file():
            continue
        try:
            raw = read_bytes(candidate, str(candidate), max_bytes=MAX_FILE_BYTES)
            return decode_utf8(raw, str(candidate)), 1, str(candidate)
        except InputLimitError:
            continue
    return None
