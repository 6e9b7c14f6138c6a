"""SpecServer documents as launches: the SGLang flags the operator will render from them.

Called by the lint engine; pure apart from what ``sources`` already read.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from specserver_advisor.lint.model import Launch, Position
from specserver_advisor.lint.sources import _annotation_suppressions, _pos, make_launch
from specserver_advisor.models import Mode, SpecServer

COMPUTED_CAP = -1


class SpecServerError(ValueError):
    """The document is not a valid SpecServer; carries the field path and its line."""

    def __init__(self, message: str, position: Position) -> None:
        super().__init__(message)
        self.position = position


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


def launch_from_specserver(path: str, doc: Any) -> Launch:
    """Translate a SpecServer into the server launch the operator renders."""
    try:
        server = SpecServer.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        parent, key = _node_at(doc, loc)
        pos = (
            _pos(parent, key=key)
            if key is not None and not isinstance(key, int)
            else _pos(parent, index=key)
            if isinstance(key, int)
            else _pos(doc)
        )
        field = ".".join(str(p) for p in loc)
        raise SpecServerError(f"invalid SpecServer: {field}: {err['msg']}", pos) from exc
    spec = server.spec
    raw_spec = doc.get("spec", {})
    s_pos = _pos(raw_spec, key="speculative") if "speculative" in raw_spec else _pos(doc)
    e_pos = _pos(raw_spec, key="engine") if "engine" in raw_spec else s_pos
    args: list[str] = []
    positions: list[Position] = []

    def add(flag: str, value: Any, pos: Position) -> None:
        if value is None:
            return
        args.append(flag)
        positions.append(pos)
        if value is not True:
            args.append(str(value))
            positions.append(pos)

    add("--model-path", spec.model.path, _pos(raw_spec, key="model"))
    add("--host", "0.0.0.0", e_pos)
    add("--enable-metrics", True, e_pos)
    add("--tp-size", spec.resources.gpus, _pos(raw_spec, key="resources"))
    if spec.mode != Mode.DISABLED:
        s = spec.speculative
        add("--speculative-algorithm", s.algorithm.value, s_pos)
        if spec.draft:
            add("--speculative-draft-model-path", spec.draft.path, _pos(raw_spec, key="draft"))
        add("--speculative-num-steps", s.num_steps, s_pos)
        add("--speculative-eagle-topk", s.eagle_topk, s_pos)
        add("--speculative-num-draft-tokens", s.num_draft_tokens, s_pos)
        add("--speculative-accept-threshold-single", s.accept_threshold_single, s_pos)
        add("--speculative-accept-threshold-acc", s.accept_threshold_acc, s_pos)
    e = spec.engine
    add("--context-length", e.context_length, e_pos)
    add("--mem-fraction-static", e.mem_fraction_static, e_pos)
    raw_extra = (raw_spec.get("engine") or {}).get("extraArgs") or []
    for k, item in enumerate(e.extra_args):
        args.append(item)
        positions.append(_pos(raw_extra, index=k) if k < len(raw_extra) else e_pos)
    launch = make_launch(
        path, "specserver", args, positions, _pos(doc), {v.name: v.value for v in e.env}, True
    )
    # The operator always renders a cap (computed from the KV pool when absent): -1 marks that.
    launch.parsed.values["max_running_requests"] = e.max_running_requests or COMPUTED_CAP
    launch.gpu_type = spec.resources.gpu_type
    launch.document_suppressions = _annotation_suppressions(doc)
    launch.last_line = max(p.line for p in positions) if positions else launch.start.line
    return launch
