"""Admission review of a SpecServer: every problem at once, with the codes ConfigValid uses.

Called by the webhook server (webhook.py) for CREATE and UPDATE. Pure: no API or network
access, so only configs available offline are used (``spec.modelSource.inline``, else the
advisor's bundled configs of well-known models); a SpecServer whose configs come from a
ConfigMap or an HF endpoint gets the schema and flag checks here and the rest from its
ConfigValid condition. Problems:

1. the models' validation, every error with its field path;
2. the operator's own render (``build_engine_config``) for each mode the spec can run, which
   is what ConfigValid reports (without engine.memFractionStatic it also decides memory: a
   fraction the operator would compute is not a problem, so the lint's SPEC016 defers to it);
3. the advisor's lint rules for SpecServers (the CLI's catalogue) for codes not found yet,
   error severity; warning severity comes back as admission warnings (kubectl prints them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from specserver_advisor import findings
from specserver_advisor.lint.model import Context
from specserver_advisor.lint.rules import RULES
from specserver_advisor.lint.specservers import SpecServerError, launch_from_specserver
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import Mode, SpecServer
from specserver_operator.configsource import ModelConfigs, from_inline
from specserver_operator.engineconfig import build_engine_config


@dataclass
class Verdict:
    """What the webhook answers."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.problems


def offline_configs(server: SpecServer) -> ModelConfigs | None:
    """Inline configs, else bundled ones for well-known repo ids; None when neither has them."""
    inline = from_inline(server.spec)
    if inline is not None:
        return inline
    target = bundled(server.spec.model.path)
    if target is None:
        return None
    draft = bundled(server.spec.draft.path) if server.spec.draft else None
    if server.spec.draft and draft is None:
        return None
    return ModelConfigs(target.config, draft.config if draft else None, None, None, "bundled")


def _lint(
    doc: dict[str, Any],
    configs: ModelConfigs | None,
    verdict: Verdict,
    computes_memory: bool,
    seen: set[str],
) -> None:
    try:
        launch = launch_from_specserver("admission", doc)
    except SpecServerError as exc:
        verdict.problems.append(str(exc))
        return
    if configs is not None:
        launch.configs.update({"target": configs.target, "draft": configs.draft})
    ctx = Context([launch])
    for module in RULES.values():
        if "specserver" not in module.APPLIES_TO:
            continue
        for d in module.check(launch, ctx):
            if d.code == findings.NO_KV_MEMORY and computes_memory:
                continue  # the operator's render decides (it may compute the fraction)
            if d.severity == "error" and d.code not in seen:
                verdict.problems.append(f"{d.code}: {d.message}")
                seen.add(d.code)
            elif d.severity == "warning":
                verdict.warnings.append(f"{d.code}: {d.message}")


def review_specserver(obj: dict[str, Any]) -> Verdict:
    """Every reason to refuse this SpecServer (and warnings to show), at once."""
    verdict = Verdict()
    doc = {k: v for k, v in obj.items() if k != "status"}
    try:
        server = SpecServer.model_validate(doc)
    except ValidationError as exc:
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(object)"
            verdict.problems.append(f"{where}: {err['msg']}")
        return verdict
    configs = offline_configs(server)
    # The operator's own render first: its messages are written for the SpecServer's author.
    seen: set[str] = set()
    modes = {
        Mode.ENABLED: [True],
        Mode.DISABLED: [False],
        Mode.AUTO: [True, False],
    }[server.spec.mode]
    for speculative in modes if configs is not None else []:
        cfg = build_engine_config(server.spec, configs, speculative)  # type: ignore[arg-type]
        if not cfg.valid and cfg.reason not in seen:
            seen.add(cfg.reason)
            off = "" if speculative else " (with speculation off)"
            verdict.problems.append(f"{cfg.reason}: {cfg.message}{off}")
    _lint(doc, configs, verdict, server.spec.engine.mem_fraction_static is None, seen)
    return verdict


def admission_response(review: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview (admission.k8s.io/v1) answer to one request."""
    request = review.get("request") or {}
    uid = request.get("uid", "")
    obj = request.get("object")
    if request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        verdict = Verdict()
    else:
        verdict = review_specserver(obj)
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if verdict.warnings:
        response["warnings"] = verdict.warnings[:20]
    if not verdict.allowed:
        response["status"] = {
            "code": 422,
            "reason": "Invalid",
            "message": f"{len(verdict.problems)} problem(s): " + "; ".join(verdict.problems),
        }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
