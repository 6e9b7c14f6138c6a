"""SpecServer documents as launches: the SGLang flags the operator will render from them.

The flags come from ``specserver_advisor.launch.args.specserver_args`` (the operator's own), each
placed at the spec field that set it. Called by the lint engine; pure apart from what
``sources`` already read.
"""

from __future__ import annotations

from typing import Any

from specserver_advisor.launch import validation
from specserver_advisor.launch.args import specserver_args
from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.lint.argv import make_launch
from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.lint.sources import _annotation_suppressions, _pos
from specserver_advisor.models import Mode, SpecServerSpec
from specserver_advisor.sglang.configcheck import check_model_config
from specserver_advisor.sglang.configvalues import ConfigShapeError

COMPUTED_CAP = -1


class SpecServerError(ValueError):
    """The document is not a valid SpecServer; carries the field path and its line, and every
    further problem (``more``: the operator's validation reports them all)."""

    def __init__(
        self, message: str, position: Position, more: list[tuple[str, Position]] | None = None
    ) -> None:
        super().__init__(message)
        self.position = position
        self.more = more or []

    @property
    def problems(self) -> list[tuple[str, Position]]:
        """(message, position) of every problem, this one first."""
        return [(str(self), self.position), *self.more]


def _node_at(doc: Any, loc: tuple[Any, ...]) -> tuple[Any, Any]:
    node: Any = doc
    parent: Any = doc
    key: Any = None
    for part in loc:
        if isinstance(node, dict) and part in node:
            parent, node, key = node, node[part], part
            continue
        if isinstance(node, list) and isinstance(part, int) and part < len(node):
            parent, node, key = node, node[part], part
            continue
        break
    else:
        return parent, key
    return node, None


def _check_inline_configs(spec: SpecServerSpec, raw_spec: Any, doc: Any) -> None:
    """``spec.modelSource.inline``'s configs through ``configcheck`` (SpecServerError there)."""
    given = spec.model_source.inline if spec.model_source else None
    if given is None:
        return
    target, draft = given.configs()  # the model checked both texts are JSON objects
    for key, config in (("targetConfig", target), ("draftConfig", draft)):
        if config is None:
            continue
        try:
            check_model_config(config, f"spec.modelSource.inline.{key}")
        except ConfigShapeError as exc:
            source = raw_spec.get("modelSource") if isinstance(raw_spec, dict) else None
            inline = source.get("inline") if isinstance(source, dict) else None
            pos = _pos(inline, key=key) if isinstance(inline, dict) else _pos(doc)
            raise SpecServerError(f"invalid SpecServer: {exc}", pos) from exc


def _field_pos(doc: Any, loc: tuple[Any, ...]) -> Position:
    """The line of the field ``loc`` names (the document's when it names none)."""
    parent, key = _node_at(doc, loc) if loc else (doc, None)
    if isinstance(key, int):
        return _pos(parent, index=key)
    return _pos(parent, key=key) if key is not None else _pos(doc)


def launch_from_specserver(path: str, doc: Any) -> Launch:
    """Translate a SpecServer into the server launch the operator renders; a SpecServer the
    operator's own validation (``launch.validation.parse``) refuses is a SpecServerError
    naming every problem, so lint passes exactly what the operator admits."""
    if not isinstance(doc, dict):
        raise SpecServerError("invalid SpecServer: not a mapping", _pos(doc))
    server, problems = validation.parse(doc)
    if server is None:
        found = [
            (f"invalid SpecServer: {p}", _field_pos(doc, validation.field_path(p)))
            for p in problems
        ] or [("invalid SpecServer", _pos(doc))]
        raise SpecServerError(found[0][0], found[0][1], found[1:])
    spec = server.spec
    raw_spec = doc.get("spec", {})
    _check_inline_configs(spec, raw_spec, doc)
    s_pos = _pos(raw_spec, key="speculative") if "speculative" in raw_spec else _pos(doc)
    e_pos = _pos(raw_spec, key="engine") if "engine" in raw_spec else s_pos
    raw_extra = (raw_spec.get("engine") or {}).get("extraArgs") or []
    where = {
        "model": _pos(raw_spec, key="model"),
        "engine": e_pos,
        "resources": _pos(raw_spec, key="resources"),
        "speculative": s_pos,
        "draft": _pos(raw_spec, key="draft"),
    }
    args: list[str] = []
    positions: list[Position] = []
    # The target config is not read yet: an MTP target's draft path is kept as written.
    rendered = specserver_args(
        spec, spec.mode != Mode.DISABLED, max_running_requests=spec.engine.max_running_requests
    )
    for arg in rendered:
        if arg.source.startswith("engine.extraArgs."):
            k = int(arg.source.rsplit(".", 1)[1])
            pos = _pos(raw_extra, index=k) if k < len(raw_extra) else e_pos
        else:
            pos = where[arg.source]
        args.append(arg.flag)
        positions.append(pos)
        if arg.value is not None:
            args.append(arg.value)
            positions.append(pos)
    e = spec.engine
    # Across nodes the argv carries LeaderWorkerSet's $(VAR) references (--node-rank
    # $(LWS_WORKER_INDEX)): judged as the group's leader runs it (multinode.as_leader).
    args = as_leader(args, spec.resources.nodes)
    launch = make_launch(
        path, "specserver", args, positions, _pos(doc), {v.name: v.value for v in e.env}, True
    )
    # The operator always renders a cap (computed from the KV pool when absent): -1 marks that.
    launch.parsed.values["max_running_requests"] = e.max_running_requests or COMPUTED_CAP
    launch.gpu_type = spec.resources.gpu_type
    launch.specserver = spec
    launch.document_suppressions = _annotation_suppressions(doc)
    launch.last_line = max(p.line for p in positions) if positions else launch.start.line
    return launch
