"""SGLang launch -> the SpecServer spec that renders it: ``plan``'s snippet, the reverse of
``launch.args.render_spec``.

The launch is read as SGLang parses it (``parse_server_argv``: ``--flag value``, ``--flag=value``,
abbreviations, a merged ``--config`` file, values the file's environment filled in), never by
matching flag spellings: each spec field is the parsed value of the flag it renders, and every
other flag is carried in ``engine.extraArgs`` as SGLang's canonical spelling with the items it was
given. What a SpecServer cannot or may not carry is left out with a note saying why: the
operator's own flags (host, metrics, rendezvous), credentials (``secrets``: a value is never
copied), the variables the operator sets (``validation.RESERVED_ENV``), flags that rewrite what
the operator validated (``args.ARG_SOURCES``). In mode Auto the cap is left to the operator,
which computes one per engine (a fixed ``maxRunningRequests`` binds both, so the Off engine could
never run the larger batch that switching speculation off is for). Pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.launch.args import ARG_SOURCES, OWNED
from specserver_advisor.launch.secrets import SECRET_FLAGS, is_secret_env
from specserver_advisor.launch.validation import MULTINODE_ENV, RESERVED_ENV, VENDOR_GPU_RESOURCE
from specserver_advisor.perf.plan import Plan
from specserver_advisor.sglang.flags import parse_server_argv
from specserver_advisor.sglang.flagtable import cli_name, flag_table, option_strings

#: Shape flags by algorithm family, and their spec keys.
SHAPE_KEYS = {
    "speculative_num_steps": "numSteps",
    "speculative_eagle_topk": "eagleTopk",
    "speculative_num_draft_tokens": "numDraftTokens",
}
#: Speculative flags the spec has a field for (besides the shape), and its key.
SPECULATIVE_KEYS = {
    "speculative_accept_threshold_single": "acceptThresholdSingle",
    "speculative_accept_threshold_acc": "acceptThresholdAcc",
    "speculative_draft_kv_cache_dtype": "draftKvCacheDtype",
}
NGRAM_KEYS = {
    "speculative_ngram_min_bfs_breadth": "minBfsBreadth",
    "speculative_ngram_max_bfs_breadth": "maxBfsBreadth",
    "speculative_ngram_match_type": "matchType",
    "speculative_ngram_max_trie_depth": "maxTrieDepth",
    "speculative_ngram_capacity": "capacity",
}
#: Fields read into a spec field of their own (not carried in extraArgs).
READ = {
    "model_path",
    "revision",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_adaptive",
    "tp_size",
    "nnodes",
    "context_length",
    "mem_fraction_static",
    "max_running_requests",
    "port",
    *SHAPE_KEYS,
    *SPECULATIVE_KEYS,
    *NGRAM_KEYS,
}
#: Flags the operator renders itself, the same for every SpecServer: dropped without a note.
RENDERED = {"host", "enable_metrics", "node_rank", "dist_init_addr"}


@dataclass
class Snippet:
    """A SpecServer ``spec`` (camelCase, as written in YAML) and what it leaves out, why."""

    spec: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def shape_fields(algorithm: str | None) -> tuple[str, ...]:
    """The shape flags the operator renders for an algorithm (NGRAM and DFLASH: tokens only)."""
    if algorithm in ("NGRAM", "DFLASH", "DSPARK"):
        return ("speculative_num_draft_tokens",)
    return tuple(SHAPE_KEYS)


def spec_of_launch(
    argv: list[str], env: dict[str, str], plan: Plan, gpu_name: str, auto: bool = True
) -> Snippet:
    """The spec whose render is this launch (``argv``: the ``--model-path`` form, as planned;
    ``plan``: its plan). ``auto``: a speculative launch becomes mode Auto (else Enabled)."""
    parsed = parse_server_argv(argv)
    values, r = parsed.values, plan.resolution
    notes: list[str] = []
    spec: dict[str, Any] = {"model": _ref(values, "model_path", "revision")}
    if r.speculative:
        draft = values.get("speculative_draft_model_path")
        if draft:
            spec["draft"] = _ref(
                values, "speculative_draft_model_path", "speculative_draft_model_revision"
            )
        written = values.get("speculative_algorithm") or r.algorithm
        s: dict[str, Any] = {"algorithm": written}
        for name in shape_fields(r.algorithm):
            if r.get(name) is not None:
                s[SHAPE_KEYS[name]] = r.get(name)
        if values.get("speculative_adaptive"):
            s["adaptive"] = True
        s.update({key: values[n] for n, key in SPECULATIVE_KEYS.items() if values.get(n)})
        if r.algorithm == "NGRAM":
            ngram = {key: values[n] for n, key in NGRAM_KEYS.items() if values.get(n) is not None}
            if ngram:
                s["ngram"] = ngram
        spec["speculative"] = s
        spec["mode"] = "Auto" if auto else "Enabled"
    else:  # the field is required; NGRAM needs no draft, and mode Disabled never runs it
        spec["speculative"] = {"algorithm": "NGRAM"}
        spec["mode"] = "Disabled"
    engine: dict[str, Any] = {}
    if values.get("context_length") is not None:
        engine["contextLength"] = values["context_length"]
    engine["memFractionStatic"] = plan.mem.settings.mem_fraction_static
    cap = values.get("max_running_requests")
    if cap is not None and spec["mode"] == "Auto":
        notes.append(
            f"--max-running-requests {cap} is left out: in mode Auto the operator computes a "
            "cap for each engine (one engine.maxRunningRequests would bind both, and the engine "
            "without speculation could never run the larger batch it is switched to for)"
        )
    elif cap is not None:
        engine["maxRunningRequests"] = cap
    if values.get("port") is not None:
        engine["port"] = values["port"]
    extra, left_out = _extra_args(argv, parsed.spans, values, r.speculative)
    notes += left_out
    if extra:
        engine["extraArgs"] = extra
    kept, env_notes = _env(env, plan.scenario.nnodes)
    notes += env_notes
    if kept:
        engine["env"] = [{"name": k, "value": v} for k, v in kept.items()]
    spec["engine"] = engine
    resources: dict[str, Any] = {"gpus": plan.scenario.tp_size}
    if plan.scenario.nnodes > 1:
        resources["nodes"] = plan.scenario.nnodes
    resources["gpuType"] = gpu_name
    if plan.scenario.gpu.rocm:
        # The CRD's default is NVIDIA's device plugin resource (validation refuses it here).
        resources["gpuResourceName"] = VENDOR_GPU_RESOURCE[True]
    spec["resources"] = resources
    return Snippet(spec, notes)


def _ref(values: dict[str, Any], path: str, revision: str) -> dict[str, Any]:
    out: dict[str, Any] = {"path": str(values.get(path) or "")}
    if values.get(revision):
        out["revision"] = str(values[revision])
    return out


def _extra_args(
    argv: list[str],
    spans: dict[str, tuple[int, int]],
    values: dict[str, Any],
    speculative: bool,
) -> tuple[list[str], list[str]]:
    """The flags carried in ``engine.extraArgs`` (canonical spelling, in argv order), and a
    note for each flag left out."""
    out: list[tuple[int, list[str]]] = []
    notes: list[str] = []
    table = flag_table()
    for name, (start, end) in spans.items():
        if name in READ or name in RENDERED or name not in values:
            continue
        cli = cli_name(name) if name in table else name
        if name in SECRET_FLAGS:
            notes.append(
                f"{cli} is left out: it holds a credential, and a SpecServer's fields are "
                "not secret (give it to the engine from a Secret)"
            )
            continue
        if cli in ARG_SOURCES or name in OWNED:
            notes.append(f"{cli} is left out: the operator refuses it in extraArgs")
            continue
        if name.startswith("speculative_"):
            if speculative:
                notes.append(f"{cli} is left out: a SpecServer has no field for it")
            continue
        out.append((start, _canonical(argv[start:end], cli)))
    return [item for _, items in sorted(out) for item in items], notes


def _canonical(items: list[str], cli: str) -> list[str]:
    """An option's items with its full name (an abbreviation spelled out; ``--no-x`` kept)."""
    option, eq, inline = items[0].partition("=")
    spellings = option_strings()
    if option in spellings:
        head = option
    else:  # an abbreviation: the one option string it is a prefix of (``--no-x`` forms too)
        head = next((o for o in spellings if o.startswith(option)), cli)
    return [f"{head}={inline}" if eq else head, *items[1:]]


def _env(env: dict[str, str], nnodes: int) -> tuple[dict[str, str], list[str]]:
    """The variables the spec may carry, and a note for each left out (no value printed)."""
    kept: dict[str, str] = {}
    notes: list[str] = []
    for name, value in env.items():
        shown = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name) else json.dumps(name)
        if name == "HF_TOKEN":
            notes.append(
                "HF_TOKEN is left out: the operator sets it from a Secret "
                "(spec.modelSource.hfTokenSecretRef)"
            )
        elif name in RESERVED_ENV:
            notes.append(f"{shown} is left out: the operator sets it (spec.modelSource)")
        elif is_secret_env(name):
            notes.append(
                f"{shown} is left out: it looks like a credential, and a SpecServer's env "
                "is not secret"
            )
        elif name in MULTINODE_ENV and nnodes > 1:
            notes.append(f"{shown} is left out: LeaderWorkerSet and the operator set it")
        else:
            kept[name] = value
    return kept, notes


_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
#: Words YAML 1.1 reads as booleans or null (a plain string spelled so must be quoted).
_YAML_WORDS = re.compile(r"true|false|yes|no|o(n|ff)|null|y|n|~", re.IGNORECASE)


def flow(value: Any) -> str:
    """``value`` as a one-line YAML flow node (a string plain when YAML reads it back as the
    same string, else JSON-quoted, which YAML reads too)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, str):
        plain = _PLAIN.fullmatch(value) and not _YAML_WORDS.fullmatch(value)
        return value if plain else json.dumps(value)
    return json.dumps(value)


def snippet_lines(snippet: Snippet) -> list[str]:
    """The spec as YAML, one field a line, and the notes as comments after it."""
    lines = ["spec:"] + [f"  {key}: {flow(value)}" for key, value in snippet.spec.items()]
    return lines + [f"# {note}" for note in snippet.notes]
