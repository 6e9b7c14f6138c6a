"""Find SGLang launches and benchmark commands in files, with line and column of every argument.

Inputs: SpecServer YAML; Kubernetes workloads (Deployment, StatefulSet, DaemonSet, Job, Pod,
LeaderWorkerSet; multi-document, Helm-rendered), OME ServingRuntime/ClusterServingRuntime and
Dynamo DynamoGraphDeployment (``servingkinds``), including ``bash -c "..."`` strings;
docker-compose files; SGLang ``--config`` YAML; shell scripts and one-line commands. Reading the
files is this module's only I/O; unreadable input raises ``InputError`` with a clear reason.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from typing import Any

from specserver_advisor.bounded import InputLimitError
from specserver_advisor.lint import lwsgroup, servingkinds
from specserver_advisor.lint.argv import detect, launcher_of, make_launch
from specserver_advisor.lint.configfile import config_argv
from specserver_advisor.lint.model import Launch, Position, Selecting, Workload
from specserver_advisor.lint.shell.budget import MAX_ARGS, MAX_FILE_LAUNCHES, Budget
from specserver_advisor.lint.shell.evaluate import (
    Relocate,
    forget_unresolved,
    from_shell,
    name_decided,
)
from specserver_advisor.lint.shell.words import ShellSyntaxError
from specserver_advisor.loaders import yamlnodes
from specserver_advisor.sglang.flagtable import flag_table

WORKLOAD_KINDS = {
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "Pod",
    "LeaderWorkerSet",
    "ReplicaSet",
    "CronJob",
}


class InputError(ValueError):
    """A file that cannot be linted; the message says why, line and column say where."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line, self.column = line, column


TEMPLATE = re.compile(r"\{\{-?.*?-?\}\}|\{%-?.*?-?%\}")


def looks_like_template(text: str) -> bool:
    """Helm/Jinja template syntax somewhere in the file."""
    return TEMPLATE.search(text) is not None


def embedded(lines: list[str] | None, at: Position) -> Relocate:
    """Where a position inside a YAML string scalar starting at ``at`` is in the file.

    Exact for literal block scalars (``|``) and one-line plain or quoted scalars without
    escapes; anything else (folded ``>``, multi-line flow strings) reports the scalar itself.
    """
    text = lines[at.line - 1][at.column - 1 :] if lines and 0 < at.line <= len(lines) else ""
    if text.startswith("|"):
        following = [ln for ln in lines[at.line :] if ln.strip()] if lines else []
        indent = len(following[0]) - len(following[0].lstrip()) if following else 0
        return lambda p: Position(at.line + p.line, indent + p.column)
    if text[:1] in ("'", '"') or (text and text[0] not in "|>"):
        offset = 1 if text[:1] in ("'", '"') else 0
        return lambda p: Position(at.line, at.column + offset + p.column - 1) if p.line == 1 else at
    return lambda _: at


def launches_in_command(
    path: str,
    text: str,
    base: Position,
    env: dict[str, str],
    in_container: bool,
    lines: list[str] | None = None,
    budget: Budget | None = None,
) -> list[Launch]:
    """Launches in one shell command string (``bash -c``, compose ``command:``); ``budget`` is
    the file's shell budget, shared by all its commands."""
    try:
        where = embedded(lines, base)
        return from_shell(
            path, text, env=env, in_container=in_container, where=where, budget=budget
        )
    except ShellSyntaxError as exc:
        raise InputError(f"cannot parse shell command: {exc}", base.line, base.column) from exc


def _pos(node: Any, key: Any = None, index: int | None = None) -> Position:
    try:
        if index is not None and isinstance(node, yamlnodes.PSeq):
            line, col = node.lc.item(index)
            return Position(line + 1, col + 1)
        if key is not None and isinstance(node, yamlnodes.PMap):
            line, col = node.lc.value(key) if node.lc.data.get(key) else node.lc.key(key)
            return Position(line + 1, col + 1)
        return Position(node.lc.line + 1, node.lc.col + 1)
    except (AttributeError, KeyError, TypeError, IndexError):
        return Position(1, 1)


def load_yaml_documents(text: str, path: str = "YAML") -> list[Any]:
    """All documents (with line info); raises InputError on bad or oversized YAML."""
    return list(YamlDocuments(text, path))


class YamlDocuments:
    """A file's documents (with line info), parsed as they are first iterated and kept for
    the next pass: a reader that stops at the launch cap leaves the rest of the file unparsed.
    Iterating raises InputError on bad or oversized YAML when it reaches it."""

    def __init__(self, text: str, path: str = "YAML") -> None:
        self.path = path
        self.read: list[Any] = []
        self._rest: Iterator[Any] | None = yamlnodes.load_each(text, path)

    def _next(self) -> bool:
        """One more document read into ``read`` (False at the end)."""
        while self._rest is not None:
            try:
                doc = next(self._rest)
            except StopIteration:
                self._rest = None
                return False
            except InputLimitError as exc:
                self._rest = None
                raise InputError(exc.reason, exc.line or 1, exc.column or 1) from exc
            except (ValueError, TypeError, RecursionError) as exc:
                self._rest = None
                raise InputError(f"invalid YAML: {exc}") from exc
            if doc is not None:
                self.read.append(doc)
                return True
        return False

    def __iter__(self) -> Iterator[Any]:
        index = 0
        while index < len(self.read) or self._next():
            yield self.read[index]
            index += 1


def _scope(launches: list[Launch], obj: Any, workload: Workload) -> None:
    """A launch's suppression scope is its whole object; attach what the pod-spec rules read."""
    lc = getattr(obj, "lc", None)
    for la in launches:
        la.workload = workload
        if lc is not None:
            la.first_line, la.last_line = lc.line + 1, max(lc.end_line + 1, la.last_line)


def _pods(doc: Any) -> list[servingkinds.Pod]:
    """(pod spec, its init and main containers, whether they serve SGLang's HTTP API)."""
    if doc.get("kind") in servingkinds.KINDS:
        return servingkinds.serving_pods(doc)
    return [(pod, _containers(pod), serves_http) for pod, serves_http in _pod_specs(doc)]


def _containers(pod: dict[str, Any]) -> list[Any]:
    return [c for key in ("initContainers", "containers") for c in _as_list(pod.get(key))]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _pod_specs(doc: Any) -> list[tuple[Any, bool]]:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        return []
    found: Any
    if kind == "Pod":
        found = [spec]
    elif kind == "CronJob":
        found = [
            (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
        ]
    else:
        template = spec.get("template") or {}
        found = [template.get("spec")] if isinstance(template, dict) else []
    return [(p, True) for p in found if isinstance(p, dict)]


KUBE_REF = re.compile(r"\$(\$?)\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _literal_env(raw_env: Any) -> dict[str, str]:
    """Env vars with a literal value (``valueFrom`` ones are unknown to a linter)."""
    out: dict[str, str] = {}
    for item in raw_env if isinstance(raw_env, list) else []:
        if isinstance(item, dict) and "name" in item and item.get("value") is not None:
            out[str(item["name"])] = str(item["value"])
    return out


def _first_ref(item: str) -> int | None:
    """Where the first unresolved reference (``$(VAR)`` or a template) starts in an item."""
    starts = [m.start() for m in (KUBE_REF.search(item), TEMPLATE.search(item)) if m]
    return min(starts) if starts else None


def kube_expand(items: list[str], env: dict[str, str]) -> tuple[list[str], dict[int, list[str]]]:
    """Kubernetes ``$(VAR)`` references in command/args replaced from the container's env
    (``$$(VAR)`` is a literal ``$(VAR)``); the names it could not resolve, by item index."""
    unknown: dict[int, list[str]] = {}
    out = []
    for index, item in enumerate(items):
        if "$(" not in item:  # no reference: most items (KUBE_REF needs "$(")
            out.append(item)
            continue

        def replace(m: re.Match[str], index: int = index) -> str:
            escaped, name = m.group(1), m.group(2)
            if escaped:
                return f"$({name})"
            if name in env:
                return env[name]
            unknown.setdefault(index, []).append(name)
            return m.group(0)

        out.append(KUBE_REF.sub(replace, item))
    return out, unknown


def _container_launches(
    path: str,
    container: Any,
    in_container: bool,
    doc_suppress: dict[str, str],
    kubernetes: bool = True,
    lines: list[str] | None = None,
    injected: dict[str, str] | None = None,
    budget: Budget | None = None,
) -> list[Launch]:
    if not isinstance(container, dict):
        return []
    env: dict[str, str] = {}
    env_pos: dict[str, Position] = {}
    raw_env = container.get("env") or container.get("environment")
    if isinstance(raw_env, list):
        for k, item in enumerate(raw_env):
            if isinstance(item, dict) and "name" in item:
                env[str(item["name"])] = str(item.get("value", ""))
                env_pos[str(item["name"])] = _pos(raw_env, index=k)
            elif isinstance(item, str) and "=" in item:
                name, value = item.split("=", 1)
                env[name] = value
                env_pos[name] = _pos(raw_env, index=k)
    elif isinstance(raw_env, dict):
        for name, value in raw_env.items():
            env[str(name)] = str(value)
            env_pos[str(name)] = _pos(raw_env, key=name)
    items: list[str] = []
    positions: list[Position] = []
    given = [k for k in ("entrypoint", "command", "args") if container.get(k) is not None]
    for field_key in given:
        raw: Any = container.get(field_key)
        if isinstance(raw, str) and len(given) > 1:  # compose splits each string like a shell
            try:
                words = shlex.split(raw)
            except ValueError:
                words = [raw]
            items += words
            positions += [_pos(container, key=field_key)] * len(words)
        elif isinstance(raw, str):
            items.append(raw)
            positions.append(_pos(container, key=field_key))
        elif isinstance(raw, list):
            # Past 2 x MAX_ARGS items nothing is checked (make_launch cuts a launch line at
            # MAX_ARGS, INFO004): those items share the list's position instead of one each.
            far = _pos(container, key=field_key)
            for k, item in enumerate(raw):
                items.append(str(item))
                positions.append(_pos(raw, index=k) if k <= 2 * MAX_ARGS else far)
    unknown: dict[int, list[str]] = {}
    if kubernetes:
        items, unknown = kube_expand(items, {**(injected or {}), **_literal_env(raw_env)})
    for index, item in enumerate(items):  # quoted Helm/Jinja expressions: not rendered here
        if "{{" not in item and "{%" not in item:
            continue  # TEMPLATE needs one of them
        for m in TEMPLATE.finditer(item):
            unknown.setdefault(index, []).append(" ".join(m.group(0).split()))
    out: list[Launch] = []
    start = _pos(container)
    # A whole command given as one string (compose), or bash -c "...": parse as shell.
    for k, item in enumerate(items):
        if len(items) == 1 or (k > 0 and items[k - 1] in ("-c", "-lc", "-ec")):
            shell_env = {**(injected or {}), **env}  # LWS's variables are the container's too
            out += launches_in_command(
                path, item, positions[k], shell_env, in_container, lines, budget
            )
    if not out:
        launch = launch_from_items(path, items, positions, start, env, in_container, unknown)
        if launch is not None:
            out.append(launch)
    for la in out:
        la.env_positions = env_pos
        la.document_suppressions = dict(doc_suppress)
        la.last_line = max([p.line for p in positions] + [la.start.line])
    return out


def launch_from_items(
    path: str,
    items: list[str],
    positions: list[Position],
    start: Position,
    env: dict[str, str],
    in_container: bool,
    unknown: dict[int, list[str]] | None = None,
) -> Launch | None:
    """The launch an argv list holds (a container's command, a Python list, a Dockerfile exec
    form), or None; ``unknown``: item index -> the references in it that are not known here
    (``$(VAR)``, templates, Python names): what they supply is not checked (INFO002)."""
    found = detect(items)
    if not found:
        return None
    unknown = unknown or {}
    kind, first = found
    positional = kind == "server" and items[first - 1] == "serve"
    launch = make_launch(
        path,
        kind,
        items[first:],
        positions[first:] or [start],
        start,
        env,
        in_container,
        positional,
        launcher=launcher_of(items, first),
    )
    for index, names in unknown.items():
        for name in names:
            at = positions[index] if index < len(positions) else start
            launch.unresolved.setdefault(name, at)
    held = {i - first for i in unknown if i >= first}
    named = {i for i in held if name_decided(items[i + first], _first_ref(items[i + first]))}
    forget_unresolved(launch, held, named)
    return launch


def _annotation_suppressions(doc: Any) -> dict[str, str]:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    raw = (
        ((meta or {}).get("annotations") or {}).get("specserver.io/ignore")
        if isinstance(meta, dict)
        else None
    )
    out = {}
    if isinstance(raw, str):
        for part in raw.split(","):
            code, _, reason = part.partition(":")
            if code.strip():
                out[code.strip()] = reason.strip()
    return out


def from_yaml(
    path: str, text: str, docs: Iterable[Any] | None = None
) -> tuple[list[Launch], list[Any]]:
    """Launches in YAML documents; also returns SpecServer documents for their own rules
    (``docs``: the documents when the caller loaded them already)."""
    launches: list[Launch] = []
    specservers: list[Any] = []
    lines = text.splitlines()
    budget = Budget()  # one shell budget for every command in the file
    files: dict[str, tuple[str, int, str]] = {}
    selecting: list[Selecting] = []  # the file's Services and PodMonitors, for LWS groups
    for doc in YamlDocuments(text, path) if docs is None else docs:
        if len(launches) > MAX_FILE_LAUNCHES:
            break  # the caller (``finder.scan``) cuts them to the limit and says so
        if not isinstance(doc, dict):
            continue
        doc_suppress = _annotation_suppressions(doc)
        kind = doc.get("kind")
        if kind == "SpecServer":
            specservers.append(doc)
        elif kind == "LeaderWorkerSet":
            launches += _group_launches(path, doc, doc_suppress, lines, budget, selecting)
        elif kind in WORKLOAD_KINDS or kind in servingkinds.KINDS:
            for pod, containers, serves_http in _pods(doc):
                for container in containers:
                    found = _container_launches(
                        path, container, True, doc_suppress, lines=lines, budget=budget
                    )
                    _scope(found, doc, Workload(str(kind), doc, pod, container))
                    for la in found:
                        la.serves_http = la.serves_http and serves_http
                    launches += found
        elif (found_sel := lwsgroup.selecting(doc, _selector_pos(doc))) is not None:
            selecting.append(found_sel)
        elif isinstance(doc.get("services"), dict):  # docker-compose
            for service in doc["services"].values():
                found = _container_launches(
                    path, service, True, doc_suppress, kubernetes=False, lines=lines, budget=budget
                )
                _scope(found, service, Workload("compose", doc, service, service))
                launches += found
        elif kind == "ConfigMap":
            files.update(_configmap_files(doc, lines))
        elif _looks_like_config(doc):
            launches.append(_from_config(path, doc))
    for la in launches:
        la.embedded_files = files
    return launches, specservers


def known_document(doc: Any) -> bool:
    """A document ``from_yaml`` reads by its kind (a workload, a serving kind, a SpecServer, a
    ConfigMap, a compose file): the finder does not walk it again."""
    if not isinstance(doc, dict):
        return False
    kind = doc.get("kind")
    return (
        kind in WORKLOAD_KINDS
        or kind in servingkinds.KINDS
        or kind in ("SpecServer", "ConfigMap", "Service", "PodMonitor")
        or isinstance(doc.get("services"), dict)
    )


def _group_launches(
    path: str,
    doc: Any,
    doc_suppress: dict[str, str],
    lines: list[str],
    budget: Budget,
    selecting: list[Selecting],
) -> list[Launch]:
    """The launches of a LeaderWorkerSet's templates, each with its place in the group.

    A worker's (or a shared template's) containers are read a second time with another
    ``LWS_WORKER_INDEX`` (on a budget of their own): a ``--node-rank`` that changes with it
    comes from the index, however the command builds it.
    """
    out: list[Launch] = []
    size = lwsgroup.group_size(doc)
    for role, template, serves_http in lwsgroup.templates(doc):
        pod = template["spec"]
        for container in _containers(pod):
            found = _container_launches(
                path,
                container,
                True,
                doc_suppress,
                lines=lines,
                injected=lwsgroup.injected_env(size, role),
                budget=budget,
            )
            probe = []
            if role != "leader" and found:
                probe = _container_launches(
                    path,
                    container,
                    True,
                    doc_suppress,
                    lines=lines,
                    injected=lwsgroup.injected_env(size, role, probe=True),
                    budget=Budget(),
                )
            _scope(found, doc, Workload("LeaderWorkerSet", doc, pod, container))
            for k, la in enumerate(found):
                la.serves_http = la.serves_http and serves_http
                la.group = lwsgroup.group_of(doc, role, template)
                la.group.selecting = selecting
                if len(probe) == len(found):
                    la.group.rank_from_index = lwsgroup.rank_follows_index(la, probe[k])
            out += found
    return out


def _selector_pos(doc: Any) -> Position:
    spec = doc.get("spec")
    if isinstance(spec, dict) and "selector" in spec:
        return _pos(spec, key="selector")
    return _pos(doc)


def _configmap_files(doc: Any, lines: list[str]) -> dict[str, tuple[str, int, str]]:
    """The files a ConfigMap holds (its ``data``), each with the line its text starts on: the
    line after a block scalar's ``|``, else the value's own line."""
    data = doc.get("data")
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    out: dict[str, tuple[str, int, str]] = {}
    if not isinstance(data, dict):
        return out
    for key, value in data.items():
        if not isinstance(value, str):
            continue
        at = _pos(data, key=key)
        text = lines[at.line - 1][at.column - 1 :] if 0 < at.line <= len(lines) else ""
        first = at.line + 1 if text[:1] in ("|", ">") else at.line
        out[str(key)] = (value, first, f"ConfigMap {name or '?'} key {key}")
    return out


def _looks_like_config(doc: dict[str, Any]) -> bool:
    keys = {str(k).lstrip("-").replace("-", "_") for k in doc}
    return "model_path" in keys and len(keys & set(flag_table())) >= 2


def _from_config(path: str, doc: Any) -> Launch:
    """An SGLang ``--config`` YAML linted on its own (``sglang serve --config FILE``): its keys
    become flags as SGLang writes them (``configfile``), each at its key's line."""
    from_file = config_argv(doc)
    positions = [_pos(doc, key=key) for key in from_file.keys]
    launch = make_launch(path, "server", from_file.args, positions, _pos(doc), {}, False)
    launch.config_refused = [msg for _, msg in from_file.refused]
    launch.config_at = _pos(doc, key=from_file.refused[0][0]) if from_file.refused else None
    return launch
