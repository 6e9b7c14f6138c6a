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
   error severity; warning severity comes back as admission warnings (kubectl prints them);
4. the Secret named by ``spec.modelSource.hfTokenSecretRef``: the engine pod mounts it, so the
   requesting user must be allowed to ``get`` it themselves. That is the one question asked of
   the API server (a SubjectAccessReview, through the ``review_access`` callable the webhook
   passes in); it is asked on CREATE and on any UPDATE that changes the spec (an
   ``hfEndpoint`` change could send the token elsewhere), not on metadata-only updates. An
   allowed review that asked records a grant (``record_grant``, secretgrants.py): the operator
   renders the Secret only for a generation a grant approves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from specserver_advisor import configchain, findings
from specserver_advisor.lint.model import Context
from specserver_advisor.lint.rules import RULES
from specserver_advisor.lint.specservers import SpecServerError, launch_from_specserver
from specserver_advisor.loaders.configs import bundled
from specserver_advisor.models import Mode, SpecServer
from specserver_operator.configsource import ConfigSourceError, ModelConfigs
from specserver_operator.engineconfig import build_engine_config, extra_args_refusal


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
    catalog = configchain.references(lambda ref, _revision: bundled(ref), "bundled")
    try:
        return configchain.first_configs(server.spec, [configchain.inline, catalog], "")
    except ConfigSourceError:
        return None


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
    if configs is None:
        # No model config offline (a ConfigMap or HF source): what needs none is still checked.
        refused = extra_args_refusal(server.spec)
        if refused:
            seen.add(refused[0])
            verdict.problems.append(f"{refused[0]}: {refused[1]}")
    for speculative in modes if configs is not None else []:
        cfg = build_engine_config(server.spec, configs, speculative)  # type: ignore[arg-type]
        if not cfg.valid and cfg.reason not in seen:
            seen.add(cfg.reason)
            off = "" if speculative else " (with speculation off)"
            verdict.problems.append(f"{cfg.reason}: {cfg.message}{off}")
    _lint(doc, configs, verdict, server.spec.engine.mem_fraction_static is None, seen)
    return verdict


#: Creates a SubjectAccessReview and returns its ``status`` (``allowed``, ``reason``,
#: ``evaluationError``); the webhook's I/O edge.
ReviewAccess = Callable[[dict[str, Any]], dict[str, Any]]


def _secret_ref_name(obj: dict[str, Any]) -> str | None:
    """The Secret ``spec.modelSource.hfTokenSecretRef`` names, when it names one."""
    spec = obj.get("spec")
    source = spec.get("modelSource") if isinstance(spec, dict) else None
    ref = source.get("hfTokenSecretRef") if isinstance(source, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else None


def secret_access_review(user: dict[str, Any], namespace: str, secret: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether ``user`` (AdmissionReview userInfo) may get
    ``namespace/secret``."""
    spec: dict[str, Any] = {
        "user": str(user.get("username") or ""),
        "groups": [str(g) for g in user.get("groups") or []],
        "resourceAttributes": {
            "namespace": namespace,
            "verb": "get",
            "group": "",
            "version": "v1",
            "resource": "secrets",
            "name": secret,
        },
    }
    if user.get("uid"):
        spec["uid"] = str(user["uid"])
    if isinstance(user.get("extra"), dict):
        spec["extra"] = {str(k): [str(v) for v in vs] for k, vs in user["extra"].items()}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


#: Records that a review approved the Secret (secretgrants.Recorder): called with
#: (namespace, name, uid, generation, secret, user) only for an allowed review that asked.
RecordGrant = Callable[[str, str, str, int, str, str], None]


def asked_secret(request: dict[str, Any]) -> str | None:
    """The Secret this request's review asks about (None: it names none, or the UPDATE changes
    no spec: metadata only, nothing new reaches the pod)."""
    obj = request.get("object") or {}
    secret = _secret_ref_name(obj)
    old = request.get("oldObject")
    if (
        request.get("operation") == "UPDATE"
        and isinstance(old, dict)
        and old.get("spec") == obj.get("spec")
    ):
        return None
    return secret


def secret_problem(request: dict[str, Any], review_access: ReviewAccess) -> str | None:
    """Why the requesting user may not name this SpecServer's hfTokenSecretRef (None: may)."""
    obj = request.get("object") or {}
    secret = asked_secret(request)
    if secret is None:
        return None
    namespace = str(request.get("namespace") or (obj.get("metadata") or {}).get("namespace"))
    user = request.get("userInfo") or {}
    who = str(user.get("username") or "the requesting user")
    status = review_access(secret_access_review(user, namespace, secret))
    if status.get("allowed") is True:
        return None
    where = "spec.modelSource.hfTokenSecretRef.name"
    if status.get("evaluationError") and not status.get("reason"):
        return (
            f"{where}: could not check that {who} may get Secret {namespace}/{secret} "
            f"({status['evaluationError']}); the engine pod would receive it as HF_TOKEN"
        )
    return (
        f"{where}: {who} may not get Secret {namespace}/{secret}, and the engine pod would "
        "receive it as HF_TOKEN; name a Secret you can read (or ask for get on this one)"
    )


def _record(request: dict[str, Any], record_grant: RecordGrant) -> str | None:
    """Record the grant of an allowed review that asked about the Secret (not a dry run);
    why it could not be recorded (None: recorded, or nothing to record)."""
    secret = asked_secret(request)
    obj = request.get("object") or {}
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    if secret is None or request.get("dryRun") or not isinstance(meta, dict):
        return None
    uid, generation = meta.get("uid"), meta.get("generation")
    namespace = str(request.get("namespace") or meta.get("namespace") or "")
    user = str((request.get("userInfo") or {}).get("username") or "")
    if not isinstance(uid, str) or not isinstance(generation, int) or not uid:
        return "the API server sent no uid and generation; the approval cannot be recorded"
    try:
        record_grant(namespace, str(meta.get("name") or ""), uid, generation, secret, user)
    except Exception as exc:  # an API error: refuse rather than admit what will not render
        return f"the approval could not be recorded ({type(exc).__name__}: {str(exc)[:200]})"
    return None


def admission_response(
    review: dict[str, Any],
    review_access: ReviewAccess | None = None,
    record_grant: RecordGrant | None = None,
) -> dict[str, Any]:
    """The AdmissionReview (admission.k8s.io/v1) answer to one request.

    ``review_access`` answers SubjectAccessReviews; without it the hfTokenSecretRef check is
    not made (only the webhook server, which has API access, can make it). ``record_grant``
    records an allowed review's Secret approval for the operator (secretgrants.py); an
    approval that cannot be recorded refuses the request.
    """
    request = review.get("request") or {}
    uid = request.get("uid", "")
    obj = request.get("object")
    if request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        verdict = Verdict()
    else:
        verdict = review_specserver(obj)
        problem = secret_problem(request, review_access) if review_access else None
        if problem:
            verdict.problems.append(f"SecretNotReadable: {problem}")
        elif verdict.allowed and review_access and record_grant:
            unrecorded = _record(request, record_grant)
            if unrecorded:
                where = "spec.modelSource.hfTokenSecretRef.name"
                verdict.problems.append(f"SecretNotApproved: {where}: {unrecorded}")
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
