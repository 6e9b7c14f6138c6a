"""SpecServer -> SGLang argv: the one rendering, each flag with the spec field that set it.

``render_spec`` is the only place a SpecServer becomes SGLang flags: the flags the launch model
settles itself (the memory fraction, the cap, the resolved draft shape: ``SETTLED``) are slots
that ``fill`` completes, so ``launch.settle`` renders a spec once and fills it as it settles.
``specserver_args`` is the render filled in one call (``lint`` on SpecServers, ``plan --from``'s
refused launches). ``owned_in_extra`` refuses extraArgs that would set what the operator owns,
and ``draftless_error`` a draft-model algorithm without a draft on a target without MTP layers.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specserver_advisor.launch.multinode import multinode_args
from specserver_advisor.models import Algorithm, SpecServerSpec
from specserver_advisor.sglang import configvalues, drafts
from specserver_advisor.sglang.drafts import has_mtp_layers
from specserver_advisor.sglang.flags import match_option
from specserver_advisor.sglang.resolve import Resolution
from specserver_advisor.sglang.speculative_tables import MTP_TARGETS

#: Fields the operator renders itself; extraArgs may not set them (spec field to use instead).
OWNED = {
    "max_running_requests": "engine.maxRunningRequests",
    "host": "(always 0.0.0.0)",
    "port": "engine.port",
    "enable_metrics": "(always on)",
    "model_path": "model.path",
    "tp_size": "resources.gpus",
    "context_length": "engine.contextLength",
    "mem_fraction_static": "engine.memFractionStatic",
    "revision": "model.revision",
    "nnodes": "resources.nodes",
    "node_rank": "(from LeaderWorkerSet: $(LWS_WORKER_INDEX))",
    "dist_init_addr": "(the LeaderWorkerSet leader: $(LWS_LEADER_ADDRESS))",
}
#: Algorithms that load a draft model: without one, only a target with MTP layers can run them.
NEEDS_DRAFT = drafts.NEEDS_DRAFT


@dataclass(frozen=True)
class Arg:
    """One rendered flag: its value (None for a switch) and the spec field that set it."""

    flag: str
    value: str | None
    source: str  # "model", "engine", "speculative", "draft", "resources", "engine.extraArgs.K"
    #: The field this flag's value is settled in (one of ``SETTLED``; "": the spec's alone). A
    #: slot's ``value`` is the spec's own, None when the spec leaves it (then ``fill`` decides).
    slot: str = ""


#: The flags whose values the launch model settles (``launch.settle``), not the spec alone.
FRACTION, CAP = "mem_fraction_static", "max_running_requests"
SHAPE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
SETTLED = (FRACTION, CAP, *SHAPE)
_SHAPE_FLAGS = (
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
)


def is_mtp_target(target_config: dict[str, Any] | None) -> bool:
    """Whether the target carries its own MTP layers (NEXTN and friends need no draft)."""
    arch = configvalues.architecture(target_config)
    return arch in MTP_TARGETS and has_mtp_layers(target_config) is not False


def draftless_error(
    algorithm: str | None, has_draft: bool, target_config: dict[str, Any] | None
) -> str | None:
    """Why a draft-model algorithm without a draft cannot run on this target (None: it can)."""
    if algorithm not in NEEDS_DRAFT or has_draft or is_mtp_target(target_config):
        return None
    arch = configvalues.architecture(target_config)
    return (
        f"{algorithm} on a {arch or 'non-MTP'} target needs a draft (spec.draft, or "
        "--speculative-draft-model-path): the target has no MTP layers, so SGLang would load "
        "the target checkpoint itself as the draft"
    )


def spec_env(spec: SpecServerSpec) -> dict[str, str]:
    """The engine environment the spec sets."""
    return {v.name: v.value for v in spec.engine.env}


def specserver_args(
    spec: SpecServerSpec,
    speculative: bool,
    mtp_target: bool = False,
    resolution: Resolution | None = None,
    max_running_requests: int | None = None,
    mem_fraction: float | None = None,
    model_override: str | None = None,
) -> list[Arg]:
    """The SGLang flags a SpecServer renders to, in order, each with the field that set it.

    ``resolution``: SGLang's resolved view, whose auto-chosen shape is then rendered explicitly
    (None: the spec's own values). ``max_running_requests``: the cap to render (None: none).
    ``mem_fraction``: the operator's computed fraction when the spec gives none.
    ``model_override``: ``--json-model-override-args`` (speculating only): the target's own
    context for the draft, ``speculative.draftContextFromTarget`` (``launch.draft_override``).
    """
    return fill(
        render_spec(spec, speculative, mtp_target, model_override),
        settled_values(spec, resolution, max_running_requests, mem_fraction),
    )


def settled_values(
    spec: SpecServerSpec,
    resolution: Resolution | None = None,
    max_running_requests: int | None = None,
    mem_fraction: float | None = None,
) -> dict[str, Any]:
    """What ``fill`` puts in the slots: the cap when given, the fraction when the spec gives
    none, and the resolution's draft shape (a shape value it leaves unset is left out)."""
    out: dict[str, Any] = {}
    if max_running_requests is not None:
        out[CAP] = max_running_requests
    if mem_fraction is not None and not spec.engine.mem_fraction_static:
        out[FRACTION] = mem_fraction
    if resolution is not None:
        out.update({name: resolution.get(name) for name in SHAPE})
    return out


def render_spec(
    spec: SpecServerSpec,
    speculative: bool,
    mtp_target: bool = False,
    model_override: str | None = None,
) -> list[Arg]:
    """The SpecServer's flags in order, the ones in ``SETTLED`` as slots (``fill``);
    ``model_override`` as in ``specserver_args``."""
    out: list[Arg] = []

    def add(flag: str, value: Any, source: str, slot: str = "") -> None:
        if value is not None or slot:
            out.append(
                Arg(flag, None if value is True or value is None else str(value), source, slot)
            )

    e = spec.engine
    add("--model-path", spec.model.path, "model")
    add("--revision", spec.model.revision or None, "model")
    add("--host", "0.0.0.0", "engine")
    add("--port", e.port, "engine")
    add("--enable-metrics", True, "engine")
    add("--tp-size", spec.resources.gpus, "resources")
    for flag, value in multinode_args(spec.resources.nodes):
        add(flag, value, "resources")
    add("--context-length", e.context_length or None, "engine")
    add("--mem-fraction-static", e.mem_fraction_static or None, "engine", FRACTION)
    add("--max-running-requests", None, "engine", CAP)
    if speculative:
        out += _speculative_args(spec, mtp_target)
        add("--json-model-override-args", model_override, "speculative")
    for k, item in enumerate(e.extra_args):
        out.append(Arg(item, None, f"engine.extraArgs.{k}"))
    return out


def fill(args: list[Arg], settled: Mapping[str, Any]) -> list[Arg]:
    """``args`` with each slot ``settled`` names set to that value (None: left out); a slot it
    does not name keeps the spec's value, and is left out when the spec has none."""
    out: list[Arg] = []
    for a in args:
        if not a.slot:
            out.append(a)
            continue
        value = settled.get(a.slot, a.value)
        if value is not None:
            out.append(Arg(a.flag, str(value), a.source))
    return out


def argv_of(args: list[Arg]) -> list[str]:
    """Flatten ``specserver_args`` into argv (extraArgs items stay single tokens; a slot left
    unfilled is left out)."""
    argv: list[str] = []
    for a in fill(args, {}):
        argv.append(a.flag)
        if a.value is not None:
            argv.append(a.value)
    return argv


def _speculative_args(spec: SpecServerSpec, mtp_target: bool) -> list[Arg]:
    s = spec.speculative
    out = [Arg("--speculative-algorithm", s.algorithm.value, "speculative")]
    if spec.draft and not mtp_target:
        out.append(Arg("--speculative-draft-model-path", spec.draft.path, "draft"))
        if spec.draft.revision:
            out.append(Arg("--speculative-draft-model-revision", spec.draft.revision, "draft"))
    steps, topk, ndt = s.num_steps, s.eagle_topk, s.num_draft_tokens
    pairs: list[tuple[str, Any]]
    if s.algorithm == Algorithm.NGRAM:
        n = s.ngram
        pairs = [
            ("--speculative-num-draft-tokens", ndt),
            ("--speculative-ngram-min-bfs-breadth", n.min_bfs_breadth if n else None),
            ("--speculative-ngram-max-bfs-breadth", n.max_bfs_breadth if n else None),
            ("--speculative-ngram-match-type", n.match_type.value if n and n.match_type else None),
            ("--speculative-ngram-max-trie-depth", n.max_trie_depth if n else None),
            ("--speculative-ngram-capacity", n.capacity if n else None),
        ]
    elif s.algorithm in (Algorithm.DFLASH, Algorithm.DSPARK):
        pairs = [("--speculative-num-draft-tokens", ndt)]
    else:
        pairs = [
            ("--speculative-num-steps", steps),
            ("--speculative-eagle-topk", topk),
            ("--speculative-num-draft-tokens", ndt),
        ]
    pairs += [
        ("--speculative-accept-threshold-single", s.accept_threshold_single or 1.0),
        ("--speculative-accept-threshold-acc", s.accept_threshold_acc or 1.0),
        ("--speculative-draft-kv-cache-dtype", s.draft_kv_cache_dtype),
    ]
    slots = dict(zip(_SHAPE_FLAGS, SHAPE, strict=True))
    for f, v in pairs:
        if f in slots:
            out.append(Arg(f, None if v is None else str(v), "speculative", slots[f]))
        elif v is not None:
            out.append(Arg(f, str(v), "speculative"))
    if s.adaptive:
        out.append(Arg("--speculative-adaptive", None, "speculative"))
    return out


#: Flags that make SGLang read arguments or the model config from somewhere the operator never
#: checks: a ``--config`` YAML is merged into the argv before the CLI's own flags, so it could set
#: every owned flag the operator leaves unset; ``--json-model-override-args`` rewrites the model
#: config after the operator validated it (architecture, context length, rope scaling: the
#: draft/target context check and memory sizing would judge a different model). Refused like
#: owned flags, in any spelling argparse accepts (docs/security.md).
ARG_SOURCES = {
    "--config": "reads engine arguments from a file",
    "--decrypted-config-file": "replaces the model config the operator validated",
    "--decrypted-draft-config-file": "replaces the draft config the operator validated",
    "--json-model-override-args": "rewrites the model config the operator validated",
}


def _arg_source(option: str) -> str | None:
    """The arg-source flag ``option`` spells (exactly or as an argparse prefix), if any."""
    flag, _ = match_option(option)
    return flag.cli if flag is not None and flag.cli in ARG_SOURCES else None


def owned_in_extra(extra: list[str]) -> str | None:
    """Why extraArgs may not carry a flag the spec owns (None when it carries none)."""
    for item in extra:
        if not item.startswith("--"):
            continue
        source = _arg_source(item.split("=", 1)[0])
        if source:
            return (
                f"extraArgs may not set {source} (it {ARG_SOURCES[source]}, behind the "
                "operator's back; give the settings as spec fields or plain extraArgs)"
            )
        flag, _ = match_option(item.split("=", 1)[0])
        if flag is None:
            continue
        if flag.field in OWNED or flag.field.startswith("speculative_"):
            use = OWNED.get(flag.field, "spec.speculative")
            return f"extraArgs may not set {flag.cli} (the operator renders it; use {use})"
    return None
