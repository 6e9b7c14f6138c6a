"""Admission review of a SpecServer: every problem at once, with the codes ConfigValid uses.

Called by the webhook server (service.py, server.py) for CREATE and UPDATE (an UPDATE
that leaves the spec as it was is admitted unreviewed: ``_metadata_only``); pure but
for the two callables it is given (a SubjectAccessReview, the grant record) and the one read
it may make (model configs from the admin's HF endpoint, within the review's deadline).
Problems:

1. ``speccheck.parse``: the models' validation and what the schema cannot check, every error
   with its field path (what ConfigValid reports as InvalidSpec);
2. ``speccheck.render_problems`` for each mode the spec can run: the operator's own render
   (``build_engine_config``), the context, the admin's pod policy (engine.env HF_TOKEN,
   hostPath, match-all tolerations), exactly as ConfigValid (without engine.memFractionStatic
   the render also decides memory: a fraction the operator would compute is not a problem, so
   the lint's SPEC016 defers to it). Model configs are the operator's chain as far as the
   webhook can follow it: inline; a ConfigMap is the operator's to read (its ConfigValid
   reports); the admin-allowed HF endpoint (for the API server's reviews only, within the
   deadline; a failure is a warning, ConfigValid reports it); the bundled catalog;
3. the advisor's lint rules for SpecServers (the CLI's catalogue) for codes not found yet,
   error severity; warning severity comes back as admission warnings (kubectl prints them);
4. the hfTokenSecretRef access check (secretreview.py); an allowed review that asked records
   a grant (``record_grant``, secretgrants.py): the operator renders the Secret only for a
   generation a grant approves.

Fail closed: ``answer_body`` turns any body that is not a bounded AdmissionReview, and any
exception while reviewing, into ``allowed: false`` naming the exception, never a traceback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor import bounded, findings
from specserver_advisor.launch.model import INVALID_MODEL_CONFIG, extra_args_refusal
from specserver_advisor.lint.model import Context
from specserver_advisor.lint.rules import RULES
from specserver_advisor.lint.rules.pod009_operator_refuses import CODE as OPERATOR_REFUSES
from specserver_advisor.lint.specservers import SpecServerError, launch_from_specserver
from specserver_advisor.loaders import configchain
from specserver_advisor.loaders.configchain import ConfigSourceError, ModelConfigs
from specserver_advisor.loaders.configs import bundled, fetch_from_endpoint
from specserver_advisor.models import Mode, SpecServerSpec
from specserver_operator.core import podpolicy, speccheck
from specserver_operator.reconcile import configsource
from specserver_operator.reconcile.configsource import HfSettings
from specserver_operator.webhook.secretreview import (
    AccessSettings,
    Caller,
    RecordGrant,
    ReviewAccess,
    secret_check,
)

__all__ = [
    "Caller",
    "ReviewAccess",
    "ReviewAnswer",
    "ReviewSettings",
    "admission_response",
    "answer_body",
    "refusal",
    "review_specserver",
    "review_uid",
]

MAX_BODY = 4 * 1024 * 1024
#: A review body is the object twice (object, oldObject) with its managedFields.
MAX_DEPTH = bounded.MAX_DEPTH
NOT_VERIFIED = Caller(False, "not verified")
#: Seconds a review has when its caller gives no deadline.
DEFAULT_DEADLINE_S = 8.0


@dataclass
class ReviewAnswer:
    """What the webhook answers."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class ReviewSettings:
    """The admin's settings a review needs: the operator's own (runsettings.Settings)."""

    pod_policy: podpolicy.PodPolicy = field(default_factory=podpolicy.PodPolicy)
    hf: HfSettings = field(default_factory=HfSettings)
    access: AccessSettings = field(default_factory=AccessSettings)

    @classmethod
    def from_env(cls) -> ReviewSettings:
        return cls(podpolicy.PodPolicy.from_env(), HfSettings.from_env(), AccessSettings.from_env())


def review_configs(
    spec: SpecServerSpec, hf: HfSettings | None, deadline: float
) -> tuple[ModelConfigs | None, str | None]:
    """(the configs the operator would use, when the webhook can read them; a warning why
    not). ``hf`` None: no endpoint is asked (a caller that is not the API server)."""

    def configmap(spec: SpecServerSpec) -> configchain.Lookup:
        src = spec.model_source
        if src and src.config_map_name:
            raise ConfigSourceError("")  # the operator's to read: no configs here, no warning
        return configchain.Lookup(None)

    def fetch(endpoint: str, repo: str, rev: str | None, name: str, token: str | None) -> Any:
        left = deadline - time.monotonic()
        if left <= 0.5:
            raise ConfigSourceError("no time left in the review to fetch model configs")
        return fetch_from_endpoint(endpoint, repo, rev, name, token, timeout=left - 0.5)

    def endpoint(spec: SpecServerSpec) -> configchain.Lookup:
        if hf is None:
            return configchain.Lookup(None)
        return configchain.Lookup(*configsource.from_endpoint(spec, hf, fetch))

    catalog = configchain.references(lambda ref, _revision: bundled(ref), "bundled")
    sources = [configchain.inline, configmap, endpoint, catalog]
    try:
        return configchain.first_configs(spec, sources, ""), None
    except ConfigSourceError as exc:
        note = str(exc)
        if not note or note.startswith("no config for"):
            return None, None
        return None, f"model-config checks left to ConfigValid: {note}"


def _lint(
    doc: dict[str, Any],
    configs: ModelConfigs | None,
    verdict: ReviewAnswer,
    computes_memory: bool,
    seen: set[str],
) -> None:
    try:
        launch = launch_from_specserver("admission", doc)
    except SpecServerError as exc:
        verdict.problems.append(str(exc))
        return
    if configs is not None:
        if INVALID_MODEL_CONFIG in seen:
            return  # the render refused the configs' shape; no rule can judge such a config
        launch.configs.update({"target": configs.target, "draft": configs.draft})
    ctx = Context([launch])
    for module in RULES.values():
        if "specserver" not in module.APPLIES_TO or module.CODE == OPERATOR_REFUSES:
            continue  # POD009 is lint's copy of render_problems, which the review runs itself
        for d in module.check(launch, ctx):
            if d.code == findings.NO_KV_MEMORY and computes_memory:
                continue  # the operator's render decides (it may compute the fraction)
            if d.severity == "error" and d.code not in seen:
                verdict.problems.append(f"{d.code}: {d.message}")
                seen.add(d.code)
            elif d.severity == "warning":
                verdict.warnings.append(f"{d.code}: {d.message}")


def review_specserver(
    obj: dict[str, Any],
    settings: ReviewSettings | None = None,
    caller: Caller = NOT_VERIFIED,
    deadline: float | None = None,
) -> ReviewAnswer:
    """Every reason to refuse this SpecServer (and warnings to show), at once."""
    settings = ReviewSettings() if settings is None else settings
    deadline = time.monotonic() + DEFAULT_DEADLINE_S if deadline is None else deadline
    verdict = ReviewAnswer()
    doc = {k: v for k, v in obj.items() if k != "status"}
    server, problems = speccheck.parse(doc)
    if server is None:
        verdict.problems += problems
        return verdict
    trusted = caller.authenticated or settings.access.trust_unauthenticated
    configs, note = review_configs(server.spec, settings.hf if trusted else None, deadline)
    if note:
        verdict.warnings.append(note)
    seen: set[str] = set()
    if configs is None:
        # No model config here (a ConfigMap, an endpoint that failed): what needs none still is.
        refused = extra_args_refusal(server.spec)
        if refused:
            seen.add(refused[0])
            verdict.problems.append(f"{refused[0]}: {refused[1]}")
    modes = {Mode.ENABLED: [True], Mode.DISABLED: [False], Mode.AUTO: [True, False]}
    runs: list[bool | None] = list(modes[server.spec.mode]) if configs is not None else [None]
    for speculative in runs:
        cfg = None
        if configs is not None and speculative is not None:
            cfg = speccheck.render(server, configs, speculative)
        off = "" if speculative is not False else " (with speculation off)"
        for reason, message in speccheck.render_problems(server, cfg, settings.pod_policy):
            if reason not in seen:
                seen.add(reason)
                verdict.problems.append(f"{reason}: {message}{off}")
    _lint(doc, configs, verdict, server.spec.engine.mem_fraction_static is None, seen)
    return verdict


#: How much of a body's head review_uid (and webhookserver's namespace) look at.
HEAD_BYTES = 4096
_UID = re.compile(rb'"uid"\s*:\s*"([A-Za-z0-9._:-]{1,128})"')


def review_uid(body: bytes) -> str:
    """request.uid of an AdmissionReview from the API server (the first key of its request,
    after apiVersion and kind), read from the head of its body without parsing it, for an answer
    made before the review parsed it ("" when not there)."""
    found = _UID.search(body, 0, HEAD_BYTES)
    return found.group(1).decode() if found else ""


def refusal(uid: str, message: str, code: int = 422) -> dict[str, Any]:
    """An AdmissionReview answer refusing request ``uid`` with ``message``."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": uid,
            "allowed": False,
            "status": {"code": code, "reason": "Invalid", "message": message[:4000]},
        },
    }


def _metadata_only(request: dict[str, Any]) -> bool:
    """An UPDATE that leaves the spec as it was (labels, annotations, finalizers)."""
    old, obj = request.get("oldObject"), request.get("object")
    return (
        request.get("operation") == "UPDATE"
        and isinstance(old, dict)
        and isinstance(obj, dict)
        and "spec" in obj
        and old.get("spec") == obj.get("spec")
    )


def admission_response(
    review: dict[str, Any],
    review_access: ReviewAccess | None = None,
    caller: Caller = NOT_VERIFIED,
    settings: ReviewSettings | None = None,
    record_grant: RecordGrant | None = None,
    deadline: float | None = None,
) -> dict[str, Any]:
    """The AdmissionReview (admission.k8s.io/v1) answer to one request.

    ``review_access`` answers SubjectAccessReviews; without it the hfTokenSecretRef check is
    not made (only the webhook server, which has API access, can make it). ``record_grant`` is
    called once the whole verdict is allowed, when a SubjectAccessReview allowed the Secret and
    the request is not a dry run.
    """
    settings = ReviewSettings() if settings is None else settings
    request = review.get("request")
    if not isinstance(request, dict):
        raise ValueError("the AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str):
        raise ValueError("request.uid is not a string")
    obj = request.get("object")
    grant = None
    if request.get("operation") not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        verdict = ReviewAnswer()
    elif _metadata_only(request):
        # The spec was admitted before (or is ConfigValid's to report): refusing a label or a
        # finalizer's removal because a rule changed since would only leave the object stuck
        # (a foreground delete never ends); nothing new reaches the pod.
        verdict = ReviewAnswer()
    else:
        verdict = review_specserver(obj, settings, caller, deadline)
        if review_access is not None:
            problem, grant = secret_check(request, review_access, caller, settings.access)
            if problem:
                verdict.problems.append(f"SecretNotReadable: {problem}")
    if not verdict.allowed:
        answer = refusal(uid, f"{len(verdict.problems)} problem(s): " + "; ".join(verdict.problems))
    else:
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True},
        }
        if grant is not None and record_grant is not None and request.get("dryRun") is not True:
            try:
                record_grant(
                    grant.namespace,
                    grant.name,
                    grant.uid,
                    grant.generation,
                    grant.secret,
                    grant.user,
                )
            except Exception as exc:  # an API error: refuse rather than admit what won't render
                answer = refusal(
                    uid,
                    "1 problem(s): SecretNotApproved: spec.modelSource.hfTokenSecretRef.name: "
                    f"the approval could not be recorded ({type(exc).__name__}: "
                    f"{str(exc)[:200]}); try again",
                )
    if verdict.warnings:
        answer["response"]["warnings"] = verdict.warnings[:20]
    return answer


def answer_body(
    body: bytes,
    respond: Callable[[dict[str, Any]], dict[str, Any]],
    seen: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``respond``'s answer to the AdmissionReview in ``body``; fail closed: a body that is not
    a bounded JSON AdmissionReview (``loaders.bounded``), and any exception while reviewing,
    is ``allowed: false`` naming it. ``seen["uid"]``: the request's uid once it is known."""
    uid = review_uid(body)  # for a body that does not parse: uid "" is a failed call (Ignore)
    try:
        review = bounded.json_object(
            body, "the AdmissionReview body", max_bytes=MAX_BODY, max_depth=MAX_DEPTH
        )
        request = review.get("request")
        if isinstance(request, dict) and isinstance(request.get("uid"), str):
            uid = request["uid"]
            if seen is not None:
                seen["uid"] = uid
        return respond(review)
    except Exception as exc:  # fail closed, naming the exception
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return refusal(uid, f"the review failed, so it is refused ({reason})")
