"""``plan --from FILE``: the exact launch a file describes, planned as it will run.

Reads a SpecServer (settled through ``launchlint.build_engine_config``, as the operator
renders it), a Deployment/Pod/StatefulSet/LeaderWorkerSet, a docker-compose service, a shell
script or an SGLang ``--config`` YAML (their SGLang server command, found by the linter's
readers). The other CLI options (``--gpu``, ``--concurrency``, further SGLang flags) apply on
top. I/O: reads the file and the model configs; everything else is the pure planner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specserver_advisor.bounded import InputLimitError
from specserver_advisor.errors import UsageError
from specserver_advisor.gpus import Gpu, UnknownGpuError, lookup_gpu
from specserver_advisor.launch import validation
from specserver_advisor.launch.args import argv_of, draftless_error, spec_env, specserver_args
from specserver_advisor.launch.model import Configs, EngineConfig, plan_argv, plan_launch
from specserver_advisor.launch.multinode import as_leader
from specserver_advisor.lint.configsource import merge_configs
from specserver_advisor.lint.engine import MAX_BYTES, decode, is_yaml
from specserver_advisor.lint.launchlint import build_engine_config
from specserver_advisor.lint.model import Launch
from specserver_advisor.lint.shell.evaluate import from_shell
from specserver_advisor.lint.shell.words import ShellSyntaxError
from specserver_advisor.lint.sources import InputError, from_yaml
from specserver_advisor.loaders.reading import read_bytes
from specserver_advisor.models import Mode, SpecServerSpec
from specserver_advisor.perf.plan import DEFAULT_CONCURRENCY, Plan
from specserver_advisor.policy.model import PolicyContext
from specserver_advisor.sglang.configcheck import LoadedConfig
from specserver_advisor.sglang.flags import parse_server_argv


@dataclass
class Planned:
    """A plan with the launch it was made for."""

    plan: Plan | None
    argv: list[str]
    gpu: Gpu
    env: dict[str, str] = field(default_factory=dict)
    #: The SpecServer planned (None for a plain launch).
    spec: SpecServerSpec | None = None
    #: Why the launch cannot start before any plan (the operator's refusal, a draftless EAGLE).
    refused: str | None = None
    #: The operator's engine config for a SpecServer.
    engine: EngineConfig | None = None
    #: What the operator's auto-speculation policy starts from (a SpecServer in mode Auto).
    policy: PolicyContext | None = None
    #: The model configs it was planned with (``plan --search-shape`` plans again with them).
    configs: Any = field(default=None, compare=False, repr=False)

    @property
    def flags(self) -> dict[str, Any]:
        """The launch's flags as SGLang parses them (``sglang serve MODEL`` form included)."""
        positional = bool(self.argv) and not self.argv[0].startswith("-")
        return parse_server_argv(self.argv, positional_model=positional).values


def read_file(path: Path) -> tuple[list[Launch], list[Any]]:
    """Server launches and SpecServer documents in one file (UsageError when unreadable)."""
    name = str(path)
    try:
        raw = read_bytes(path, name, max_bytes=MAX_BYTES)
    except InputLimitError as exc:
        raise UsageError(str(exc)) from exc
    text, problems = decode(name, raw)
    if text is None:
        raise UsageError(f"{path}: {problems[0].message if problems else 'unreadable'}")
    try:
        if is_yaml(name, text):
            launches, docs = from_yaml(name, text)
        else:
            launches, docs = from_shell(name, text), []
    except ShellSyntaxError as exc:
        raise UsageError(
            f"{path}:{exc.line}:{exc.column}: cannot parse shell script: {exc}"
        ) from exc
    except InputError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    except (RecursionError, ValueError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path}: cannot interpret this file: {exc}") from exc
    merge_configs(launches, name)  # a --config file is part of the launch, as for lint
    return [la for la in launches if la.kind == "server" and not _lws_worker(la)], docs


def _lws_template(la: Launch) -> tuple[dict[str, Any], Any] | None:
    """(``leaderWorkerTemplate``, the launch's pod spec) of a LeaderWorkerSet's launch."""
    w = la.workload
    if w is None or w.kind != "LeaderWorkerSet" or not isinstance(w.obj, dict):
        return None
    spec = w.obj.get("spec")
    tmpl = spec.get("leaderWorkerTemplate") if isinstance(spec, dict) else None
    return (tmpl, w.pod) if isinstance(tmpl, dict) else None


def _lws_worker(la: Launch) -> bool:
    """A LeaderWorkerSet worker's launch: the leader's launch at another node rank, planned as
    the group (its leader). With no ``leaderTemplate`` the worker template is the leader's too."""
    found = _lws_template(la)
    if found is None:
        return False
    tmpl, pod = found
    worker, leader = tmpl.get("workerTemplate"), tmpl.get("leaderTemplate")
    return isinstance(leader, dict) and isinstance(worker, dict) and worker.get("spec") is pod


def group_size(la: Launch) -> int | None:
    """The pods of a LeaderWorkerSet group this launch leads (``leaderWorkerTemplate.size``,
    LeaderWorkerSet's default 1), what ``$(LWS_GROUP_SIZE)`` holds; None for any other kind."""
    found = _lws_template(la)
    if found is None:
        return None
    size = found[0].get("size", 1)
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def group_mismatch(values: dict[str, Any], size: int) -> str:
    """The note for a leader whose ``--nnodes`` is not the group's size."""
    given = values.get("nnodes")
    return (
        f"--nnodes {given if given is not None else '1 (unset)'} but the LeaderWorkerSet group "
        f"has {size} pods (leaderWorkerTemplate.size): SGLang waits for --nnodes nodes, LWS "
        "starts size pods; set --nnodes $(LWS_GROUP_SIZE)"
    )


def gpu_named(name: str | None, where: str) -> Gpu:
    if not name:
        raise UsageError(f"{where}: no GPU type; give --gpu")
    try:
        return lookup_gpu(name)
    except UnknownGpuError as exc:
        raise UsageError(str(exc)) from exc


def specserver_from(doc: Any, path: Path) -> SpecServerSpec:
    """The spec the operator would admit (its own validation, ``launch.validation.parse``), or
    a UsageError naming the field of its first problem."""
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: invalid SpecServer: not a mapping")
    server, problems = validation.parse(doc)
    if server is None:
        raise UsageError(f"{path}: invalid SpecServer: {problems[0] if problems else '?'}")
    return server.spec


def plan_specserver(
    spec: SpecServerSpec,
    configs: Any,
    gpu_name: str | None,
    extra: list[str],
    accept_length: float | None,
    concurrency: list[int],
    prompt_mix: tuple[tuple[int, float], ...] = (),
) -> Planned:
    """Plan a SpecServer as the operator renders it (speculation on unless mode is Disabled),
    at the spec's expected request lengths or the prompt lengths ``prompt_mix``."""
    if gpu_name:
        spec = spec.model_copy(
            update={"resources": spec.resources.model_copy(update={"gpu_type": gpu_name})}
        )
    if extra:
        engine = spec.engine.model_copy(update={"extra_args": [*spec.engine.extra_args, *extra]})
        spec = spec.model_copy(update={"engine": engine})
    gpu = gpu_named(spec.resources.gpu_type, "spec.resources.gpuType")
    speculative = spec.mode != Mode.DISABLED
    cfg = build_engine_config(spec, configs, speculative)
    # A refused spec has no rendered argv: the spec's own flags are shown.
    argv = cfg.args or argv_of(specserver_args(spec, speculative))
    out = Planned(cfg.plan, argv, gpu, spec_env(spec), spec, engine=cfg, configs=configs)
    if not cfg.valid and cfg.plan is None:
        out.refused = f"{cfg.reason}: {cfg.message}"
    if cfg.valid:
        if spec.mode == Mode.AUTO:
            out.policy = cfg.policy
        if (list(concurrency), accept_length, prompt_mix) != (DEFAULT_CONCURRENCY, None, ()):
            # The rendered launch, cap included, at the asked concurrency and accept length
            # (the settled plan is the operator's, at its defaults).
            # The leader's view of a multi-node launch, as the launch model judges it.
            leader = as_leader(argv, spec.resources.nodes)
            out.plan = plan_launch(
                spec, configs, gpu, leader, spec_env(spec), concurrency, accept_length, prompt_mix
            )
    return out


#: The fields a plan reads a model config for (the unset variable that gives one is named).
MODEL_FIELDS = ("model_path", "speculative_draft_model_path")


def unset_variables(launch: Launch, where: Path) -> str | None:
    """Why a launch cannot be planned from its file: a model path comes from a variable the
    file never sets (the linter's INFO002), named rather than looked up as a model."""
    from specserver_advisor.sglang.flags import match_option
    from specserver_advisor.sglang.flagtable import cli_name

    for name in MODEL_FIELDS:
        if name not in launch.unresolved_fields:
            continue
        by_option = [
            var
            for var, options in launch.unresolved_flags.items()
            if any(getattr(match_option(o)[0], "field", None) == name for o in options)
        ]
        names = by_option or list(launch.unresolved)
        shown = ", ".join(n if n.startswith(("{", "$")) else f"${n}" for n in names) or "?"
        first = names[0] if names and names[0].isidentifier() else "VAR"
        return (
            f"{where}: {cli_name(name)} comes from {shown}, which the file never sets: set it "
            f"in the file or give a default (${{{first}:-org/model}}) to plan this launch"
        )
    return None


def plan_values(
    values: dict[str, Any],
    argv: list[str],
    env: dict[str, str],
    target: LoadedConfig,
    draft: LoadedConfig | None,
    gpu: Gpu,
    options: dict[str, Any],
) -> Planned:
    """Plan a plain server launch: its parsed flags ``values`` (``argv`` as written)."""
    refused = draftless_error(
        values.get("speculative_algorithm"),
        bool(values.get("speculative_draft_model_path")) or draft is not None,
        target.config,
    )
    if refused:
        return Planned(None, argv, gpu, env, refused=refused)
    configs = Configs.loaded(target, draft)
    plan = plan_argv(values, env, configs, gpu, **options)
    return Planned(plan, argv, gpu, env, configs=configs)
