"""The one validation of a SpecServer: what the CRD schema cannot check, before any render (pure).

Every spec the API server accepts must get a status within one cycle: a value the schema lets
through but Kubernetes (or SGLang) would refuse, wrap or choke on is reported here as
``ConfigValid=False`` (reason ``InvalidSpec``) with the field's path, instead of a child the
API server rejects on every pass. ``parse`` (the models' validation, then ``spec_problems``)
is what the operator (``core.speccheck``: ConfigValid and the admission webhook) and ``lint``
(``lint.specservers``) both call, so lint passes exactly what the operator admits; each problem
is a string that starts with the field's path (``field_path`` reads it back).
``context_problems`` runs once the model config is known.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from specserver_advisor import models
from specserver_advisor.gpus import UnknownGpuError, lookup_gpu
from specserver_advisor.launch.enginefs import OWNED_ENV, WRITABLE_MOUNTS
from specserver_advisor.launch.expansion import references
from specserver_advisor.launch.multinode import topology_problems
from specserver_advisor.launch.names import child_name
from specserver_advisor.models import SpecServer, SpecServerSpec
from specserver_advisor.sglang import draftcontext
from specserver_advisor.sglang.flags import match_option
from specserver_advisor.structural import RULES, snake, violation

INT32_MAX = 2**31 - 1
MAX_ARG_CHARS = models.MAX_EXTRA_ARG_CHARS
#: Variables the operator sets itself (a second definition would be ambiguous): the hub's and
#: the engine's writable cache directories (enginefs.py).
RESERVED_ENV = OWNED_ENV
#: Of those, the ones spec.modelSource sets.
MODEL_SOURCE_ENV = ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_TOKEN")
#: Variables LeaderWorkerSet gives each pod of a group (its own win: a copy would be ignored),
#: and SGLang's override of the rendezvous the operator renders (--dist-init-addr).
MULTINODE_ENV = (
    "LWS_LEADER_ADDRESS",
    "LWS_GROUP_SIZE",
    "LWS_WORKER_INDEX",
    "SGLANG_DISTRIBUTED_INIT_METHOD_OVERRIDE",
)
#: Longest child base name of a multi-node SpecServer: its LeaderWorkerSet (``<base>-off``, 45)
#: names the worker StatefulSets ``<lws>-<group>``, whose controller-revision-hash label
#: (``<sts>-<10>``) must stay a 63-character label value, and the pods ``<lws>-<g>-<w>``,
#: whose hostname must stay a DNS label.
MAX_MULTINODE_BASE = 41
#: Paths a model volume may not be mounted over (the engine's own mounts, kernel file systems).
RESERVED_MOUNTS = ("/dev", "/proc", "/sys", "/etc", "/var/run/secrets", *WRITABLE_MOUNTS)

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][0-9]+)?")
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def qualified_name_problem(value: str) -> str | None:
    """Why ``value`` is not a Kubernetes qualified name (``[prefix/]name``), or None."""
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"prefix {prefix!r} is not a DNS subdomain"
    if not name or len(name) > 63 or not _NAME_PART.fullmatch(name):
        return f"name part {name!r} must be 1-63 alphanumerics, '-', '_' or '.'"
    return None


def _control(value: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in value)


def _dns_name(value: str) -> bool:
    return len(value) <= 253 and DNS_SUBDOMAIN.fullmatch(value) is not None


def _quantity(value: str) -> bool:
    return QUANTITY.fullmatch(value) is not None and any(c in "123456789" for c in value)


def _value_at(spec: object, path: tuple[str, ...]) -> object | None:
    """The model's value at the CRD ``path`` below ``spec`` (None when a level is unset)."""
    node: object | None = spec
    for key in path:
        node = getattr(node, snake(key), None)
        if node is None:
            return None
    return node


def structural_problems(spec: object) -> list[str]:
    """The table's rules (specserver_advisor.structural: also the CRD's CEL rules) broken."""
    out = []
    for rule in RULES:
        value = _value_at(spec, rule.path)
        if value is not None and (problem := violation(rule, value)):
            out.append(problem)
    return out


def parse(
    doc: dict[str, Any], model: Callable[[dict[str, Any]], SpecServer] | None = None
) -> tuple[SpecServer | None, list[str]]:
    """The SpecServer of ``doc`` (its ``status`` ignored) and every problem, each naming its
    field; the server is None when there is any. ``model`` builds the SpecServer (the operator
    passes one that shares the spec model of identical specs); default: the models' own."""
    build = model or SpecServer.model_validate
    try:
        server = build({k: v for k, v in doc.items() if k != "status"})
    except ValidationError as exc:
        return None, [
            f"{'.'.join(str(p) for p in err['loc']) or '(object)'}: {err['msg']}"
            for err in exc.errors()
        ]
    problems = spec_problems(server)
    return (None if problems else server), problems


_PATH = re.compile(r"(metadata|spec)(\.[A-Za-z0-9_]+|\[[^\]]*\])*")


def field_path(problem: str) -> tuple[str | int, ...]:
    """The field a problem names, as keys and list indexes (``spec.engine.env[0].name`` and
    the models' ``spec.engine.env.0.name`` -> ``("spec", "engine", "env", 0, "name")``); ()
    when it names none."""
    found = _PATH.match(problem)
    if found is None:
        return ()
    out: list[str | int] = []
    for part in re.findall(r"[A-Za-z0-9_]+|\[[^\]]*\]", found.group(0)):
        inner = part[1:-1] if part.startswith("[") else part
        out.append(int(inner) if inner.isdigit() else inner)
    return tuple(out)


#: The extended resource each vendor's device plugin advertises.
VENDOR_GPU_RESOURCE = {False: "nvidia.com/gpu", True: "amd.com/gpu"}


def _vendor_resource_problems(gpu_type: str, resource: str) -> list[str]:
    """A GPU resource in the other vendor's domain: the pod would never schedule.

    The CRD defaults ``gpuResourceName`` to ``nvidia.com/gpu`` (the API server writes it before
    the operator reads the spec, so an unset field cannot follow ``gpuType``): an AMD card
    (``rocm`` in the GPU table) needs ``amd.com/gpu``, AMD's device plugin's resource, spelled
    out. Names in neither vendor's domain (a renamed or shared resource) pass.
    """
    try:
        rocm = lookup_gpu(gpu_type).rocm
    except UnknownGpuError:
        return []
    domain = resource.split("/", 1)[0]
    wrong = VENDOR_GPU_RESOURCE[not rocm]
    if domain != wrong.split("/", 1)[0]:
        return []
    return [
        f"spec.resources.gpuResourceName: {resource!r} is {'NVIDIA' if rocm else 'AMD'}'s "
        f"device plugin resource, but gpuType {gpu_type!r} is an "
        f"{'AMD' if rocm else 'NVIDIA'} card: set gpuResourceName: {VENDOR_GPU_RESOURCE[rocm]}"
        f"{' (the field defaults to nvidia.com/gpu)' if rocm else ''}"
    ]


def spec_problems(server: SpecServer) -> list[str]:
    """Every problem of ``server`` the schema let through, each naming its field."""
    spec, out = server.spec, list[str]()
    if spec.speculative.draft_context_from_target:
        algorithm = spec.speculative.algorithm.value
        refused = draftcontext.refusal(algorithm, spec.draft is not None, False, None)
        if refused:
            out.append(refused)
    refs = [("spec.model", spec.model)] + ([("spec.draft", spec.draft)] if spec.draft else [])
    for where, model in refs:
        for field, value in (("path", model.path), ("revision", model.revision)):
            if value is not None and (len(value) > MAX_ARG_CHARS or _control(value)):
                out.append(f"{where}.{field}: too long or contains control characters")
    out += structural_problems(spec)
    res = spec.resources
    out += topology_problems(spec)
    base = child_name(server.metadata.name or "")
    if res.nodes > 1 and len(base) > MAX_MULTINODE_BASE:
        out.append(
            f"metadata.name: {len(base)} characters is too long for a multi-node SpecServer "
            f"(at most {MAX_MULTINODE_BASE}): its LeaderWorkerSet's StatefulSets and pods would "
            "get names Kubernetes refuses"
        )
    problem = qualified_name_problem(res.gpu_resource_name)
    if problem or "/" not in res.gpu_resource_name:
        out.append(
            f"spec.resources.gpuResourceName: {res.gpu_resource_name!r} is not an extended "
            f"resource name (domain/name){': ' + problem if problem else ''}"
        )
    out += _vendor_resource_problems(res.gpu_type, res.gpu_resource_name)
    for field, value in (("cpu", res.cpu), ("memory", res.memory)):
        if value is not None and not _quantity(value):
            out.append(f"spec.resources.{field}: {value!r} is not a Kubernetes quantity")
    for key, value in res.node_selector.items():
        problem = qualified_name_problem(key)
        if problem:
            out.append(f"spec.resources.nodeSelector: key {key!r}: {problem}")
        if len(value) > 63 or not LABEL_VALUE.fullmatch(value):
            out.append(f"spec.resources.nodeSelector[{key}]: {value!r} is not a label value")
    for i, tol in enumerate(res.tolerations):
        path = f"spec.resources.tolerations[{i}]"
        if tol.key and (problem := qualified_name_problem(tol.key)):
            out.append(f"{path}.key: {problem}")
        if tol.operator is not None and tol.operator not in TOLERATION_OPERATORS:
            out.append(f"{path}.operator: {tol.operator!r} is not Exists or Equal")
        if tol.effect and tol.effect not in TAINT_EFFECTS:
            out.append(f"{path}.effect: {tol.effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
        if tol.value and (len(tol.value) > 63 or not LABEL_VALUE.fullmatch(tol.value)):
            out.append(f"{path}.value: {tol.value!r} is not a label value")
        if tol.toleration_seconds is not None and abs(tol.toleration_seconds) > 2**63 - 1:
            out.append(f"{path}.tolerationSeconds: out of range")
    engine = spec.engine
    for i, arg in enumerate(engine.extra_args):
        if len(arg) > MAX_ARG_CHARS or "\x00" in arg:
            out.append(f"spec.engine.extraArgs[{i}]: too long or contains NUL")
        else:
            out += _reference_problems(f"spec.engine.extraArgs[{i}]", arg)
    seen: set[str] = set()
    for i, env in enumerate(engine.env):
        path = f"spec.engine.env[{i}].name"
        if not ENV_NAME.fullmatch(env.name):
            out.append(f"{path}: {env.name!r} is not a valid environment variable name")
        elif env.name in RESERVED_ENV:
            why = (
                "use spec.modelSource"
                if env.name in MODEL_SOURCE_ENV
                else "the engine's writable cache directories, docs/engine.md"
            )
            out.append(f"{path}: {env.name} is set by the operator ({why})")
        elif env.name in MULTINODE_ENV and res.nodes > 1:
            out.append(
                f"{path}: {env.name} is set by LeaderWorkerSet and the operator for a "
                "multi-node group (--node-rank, --dist-init-addr)"
            )
        elif env.name in seen:
            out.append(f"{path}: {env.name} is given twice")
        seen.add(env.name)
        out += _reference_problems(f"spec.engine.env[{i}].value", env.value)
    s = spec.speculative
    out += _choice_problems("spec.speculative.draftKvCacheDtype", s.draft_kv_cache_dtype)
    src = spec.model_source
    if src is not None:
        if src.config_map_name is not None and not _dns_name(src.config_map_name):
            out.append(f"spec.modelSource.configMapName: {src.config_map_name!r} is not a name")
        ref = src.hf_token_secret_ref
        if ref is not None and not _dns_name(ref.name):
            out.append(f"spec.modelSource.hfTokenSecretRef.name: {ref.name!r} is not a name")
        if ref is not None and not re.fullmatch(r"[-._a-zA-Z0-9]+", ref.key):
            out.append(f"spec.modelSource.hfTokenSecretRef.key: {ref.key!r} is not a key")
        vol = src.volume
        if vol is not None:
            out += _volume_problems(vol.mount_path, vol.persistent_volume_claim_name, vol.host_path)
    return out


#: Spec fields rendered as the value of an SGLang flag that takes one of fixed choices.
CHOICE_FLAGS = {"spec.speculative.draftKvCacheDtype": "--speculative-draft-kv-cache-dtype"}


def _reference_problems(path: str, value: str) -> list[str]:
    """A Kubernetes ``$(VAR)`` reference in a string the engine receives: the kubelet would
    expand it after admission, so what was judged would not be what runs (a value of one flag
    becoming another flag: ``$(SMUGGLED)`` with ``SMUGGLED=--trust-remote-code``). The operator
    renders spec text escaped (expansion.py) and refuses references, saying so."""
    names = references(value)
    if not names:
        return []
    shown = names[0] if len(names[0]) <= 40 else names[0][:37] + "..."
    ref = f"$({shown})"
    return [
        f"{path}: {ref!r} is a Kubernetes variable reference, which the kubelet would "
        "expand after admission; spec text reaches the engine as written, so give the value "
        "itself"
    ]


def _choice_problems(path: str, value: str | None) -> list[str]:
    """Why ``value`` is not one SGLang accepts for ``path``'s flag (its own choices)."""
    flag = match_option(CHOICE_FLAGS[path])[0]
    choices = flag.choices if flag is not None else None
    if value is None or not choices or value in choices:
        return []
    return [f"{path}: {value[:64]!r} is not one of {', '.join(choices)}"]


def _volume_problems(mount: str, claim: str | None, host: str | None) -> list[str]:
    out = []
    path = "spec.modelSource.volume"
    clean = posixpath.normpath(mount) if mount else ""
    if not mount.startswith("/") or clean != mount.rstrip("/") or clean == "/" or ":" in mount:
        out.append(f"{path}.mountPath: {mount!r} must be a plain absolute path")
    elif any(clean == r or clean.startswith(r + "/") for r in RESERVED_MOUNTS):
        out.append(
            f"{path}.mountPath: {mount} is reserved (the engine's /dev/shm, its writable "
            "home and /tmp, or a system path)"
        )
    if claim is not None and not _dns_name(claim):
        out.append(f"{path}.persistentVolumeClaimName: {claim!r} is not a name")
    if host is not None and (not host.startswith("/") or posixpath.normpath(host) != host):
        out.append(f"{path}.hostPath: {host!r} must be a plain absolute path")
    return out


def context_problems(server: SpecServer, model_context: int | None) -> list[str]:
    """Expected tokens against the context the engine will have (spec, else the model's)."""
    return spec_context_problems(server.spec, model_context)


def spec_context_problems(spec: SpecServerSpec, model_context: int | None) -> list[str]:
    """``context_problems`` of a spec (``lint`` judges a spec, not a whole object)."""
    engine = spec.engine
    context = engine.context_length or model_context
    if not context:
        return []
    total = engine.expected_input_tokens + engine.expected_output_tokens
    if total > context:
        return [
            f"spec.engine.expectedInputTokens + expectedOutputTokens: {total} tokens do not fit "
            f"the {context}-token context"
        ]
    return []
