"""The SpecServer API (specserver.io/v1alpha1) as pydantic models.

The single source of truth for the CRD (``schema/crd.py`` turns these into
``crds/specserver.yaml``), for the operator, and for the advisor's lint rules.
Pure data: no Kubernetes client, no I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from specserver_advisor import bounded

GROUP = "specserver.io"
VERSION = "v1alpha1"
KIND = "SpecServer"
PLURAL = "specservers"
SINGULAR = "specserver"
SHORT_NAMES = ["sps"]
API_VERSION = f"{GROUP}/{VERSION}"
DEFAULT_IMAGE = "lmsysorg/sglang:v0.5.23-runtime"
MAX_LEDGER_ENTRIES = 50
#: Load bands the policy state keeps (the newest; a band is concurrency x accept length, so a
#: real engine visits a few dozen), switch times (the last hour's), notes and conditions.
MAX_POLICY_BANDS = 256
MAX_SWITCH_TIMES = 256
MAX_NOTES = 64
MAX_CONDITIONS = 32
#: spec.engine.extraArgs: items, and characters per item. Checked by the model (and the CRD
#: schema) before any item is parsed as a flag, so a review's argv work is bounded up front.
MAX_EXTRA_ARGS = 256
MAX_EXTRA_ARG_CHARS = 4096
#: Kubernetes object names (DNS-1123 subdomain); checked here and again in the operator's paths.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: URLs the operator or the engine may be pointed at: http(s) only.
HTTP_URL = r"^https?://[^\s]+$"


class ApiModel(BaseModel):
    """Base: camelCase on the wire, unknown fields refused, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=False,
        protected_namespaces=(),
    )


class Algorithm(StrEnum):
    """Speculative algorithms that SGLang 0.5.23 ships."""

    EAGLE = "EAGLE"
    EAGLE3 = "EAGLE3"
    NEXTN = "NEXTN"
    STANDALONE = "STANDALONE"
    NGRAM = "NGRAM"
    DFLASH = "DFLASH"
    DSPARK = "DSPARK"
    UNO = "UNO"


class Mode(StrEnum):
    """Who decides whether speculation runs.

    Not ``On``/``Off``: YAML 1.1 (what kubectl reads) turns a bare ``On``/``Off`` into a
    boolean, so every hand-written manifest would have had to quote them.
    """

    ENABLED = "Enabled"
    DISABLED = "Disabled"
    AUTO = "Auto"


# The values v1alpha1 used before Enabled/Disabled, and the booleans YAML 1.1 makes of them.
RENAMED_MODES: dict[object, Mode] = {
    "On": Mode.ENABLED,
    "Off": Mode.DISABLED,
    True: Mode.ENABLED,
    False: Mode.DISABLED,
}


class SpeculationState(StrEnum):
    """Whether the engine currently runs with speculative flags."""

    ON = "On"
    OFF = "Off"


class NgramMatchType(StrEnum):
    """NGRAM candidate matching."""

    BFS = "BFS"
    PROB = "PROB"


class MaxRunningRequestsSource(StrEnum):
    """Where the effective --max-running-requests came from."""

    SPEC = "Spec"
    COMPUTED = "Computed"


class MemFractionStaticSource(StrEnum):
    """Where the effective --mem-fraction-static came from."""

    SPEC = "Spec"
    HEURISTIC = "Heuristic"
    COMPUTED = "Computed"


class SwitchStrategy(StrEnum):
    """How the engine is restarted when speculation is switched."""

    RECREATE = "Recreate"
    ROLLING_UPDATE = "RollingUpdate"
    BLUE_GREEN = "BlueGreen"


class BlockedSwitchFallback(StrEnum):
    """What a switch whose new engine never got its GPUs does at its deadline."""

    CANCEL = "Cancel"
    RECREATE = "Recreate"


class ConditionStatus(StrEnum):
    """Kubernetes condition status values."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


# ----------------------------------------------------------------------------- spec


class ModelRef(ApiModel):
    """Where a model's weights and configs live."""

    path: str = Field(
        min_length=1,
        description=(
            "Hugging Face repo id (e.g. Qwen/Qwen3-8B) or an absolute path inside the model "
            "volume. Passed to SGLang as --model-path (or --speculative-draft-model-path)."
        ),
    )
    revision: str | None = Field(
        default=None,
        description="Repo revision (branch, tag or commit). SGLang uses 'main' when unset.",
    )


class NgramOptions(ApiModel):
    """NGRAM speculation options (only read when algorithm is NGRAM)."""

    min_bfs_breadth: int | None = Field(
        default=None, ge=1, description="--speculative-ngram-min-bfs-breadth (SGLang default 1)."
    )
    max_bfs_breadth: int | None = Field(
        default=None,
        ge=1,
        description=(
            "--speculative-ngram-max-bfs-breadth (SGLang default 10). SGLang forces eagleTopk "
            "to this value for NGRAM."
        ),
    )
    match_type: NgramMatchType | None = Field(
        default=None, description="--speculative-ngram-match-type: BFS (default) or PROB."
    )
    max_trie_depth: int | None = Field(
        default=None, ge=1, description="--speculative-ngram-max-trie-depth (SGLang default 18)."
    )
    capacity: int | None = Field(
        default=None, ge=1, description="--speculative-ngram-capacity (SGLang default 10000000)."
    )


#: Positive candidate steps of SGLang 0.5.23's default adaptive config (the union is 0,1,3,5,7).
ADAPTIVE_STEPS = (1, 3, 5, 7)


class Speculative(ApiModel):
    """The speculative-decoding shape. Every value is rendered as an explicit flag."""

    algorithm: Algorithm = Field(
        description=(
            "--speculative-algorithm. NEXTN is resolved to EAGLE by SGLang; MTP targets "
            "(DeepSeek-V3, GLM-4.5, ...) need no draft path."
        ),
    )
    num_steps: int | None = Field(
        default=None,
        ge=1,
        description=(
            "--speculative-num-steps: draft steps per verify. When unset SGLang auto-chooses by "
            "target architecture; eagleTopk and numDraftTokens may only be set together with it."
        ),
    )
    eagle_topk: int | None = Field(
        default=None, ge=1, description="--speculative-eagle-topk: branching per draft step."
    )
    num_draft_tokens: int | None = Field(
        default=None,
        ge=1,
        description=(
            "--speculative-num-draft-tokens: tokens verified per step. With eagleTopk 1 SGLang "
            "rewrites it to numSteps + 1."
        ),
    )
    adaptive: bool = Field(
        default=False,
        description=(
            "--speculative-adaptive: SGLang picks the draft steps per batch-size tier at runtime "
            "(0 to 7; the draft stays loaded, so its KV memory is not given back). EAGLE/EAGLE3 "
            "with eagleTopk 1 only; numSteps, when set, must be 1, 3, 5 or 7. In mode Auto this "
            "is the inner level: SGLang adapts the steps of the engine with speculation "
            "enabled, the policy decides whether the draft is loaded at all."
        ),
    )
    accept_threshold_single: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "--speculative-accept-threshold-single (default 1.0). Below 1.0 output is no longer "
            "identical to the target's greedy output."
        ),
    )
    accept_threshold_acc: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="--speculative-accept-threshold-acc (default 1.0). Below 1.0 is lossy.",
    )
    draft_kv_cache_dtype: str | None = Field(
        default=None,
        description=(
            "--speculative-draft-kv-cache-dtype (auto, fp8_e5m2, fp8_e4m3, bf16). Defaults to "
            "the target's --kv-cache-dtype."
        ),
    )
    ngram: NgramOptions | None = Field(
        default=None, description="NGRAM options; ignored for other algorithms."
    )
    draft_context_from_target: bool = Field(
        default=False,
        description=(
            "Give the draft the target's own rope scaling and max_position_embeddings: the "
            "operator reads them from the target's config and renders them as "
            "--json-model-override-args, which SGLang 0.5.23 applies to the draft and the "
            "target alike (for the target they are its own values, a no-op). The fix for a "
            "draft config trained at a shorter context than the target (SPEC002, SPEC014). "
            "Needs a separate draft (spec.draft); the operator owns the flag, extraArgs may not "
            "set it."
        ),
    )

    @field_validator("adaptive")
    @classmethod
    def _adaptive_supported(cls, value: bool, info: ValidationInfo) -> bool:
        """SGLang 0.5.23 silently runs fixed steps otherwise; refuse it here with the reason."""
        if not value:
            return value
        algo, topk, steps = (info.data.get(k) for k in ("algorithm", "eagle_topk", "num_steps"))
        if algo not in (Algorithm.EAGLE, Algorithm.EAGLE3):
            raise ValueError(f"adaptive needs algorithm EAGLE or EAGLE3, not {algo}")
        if topk not in (None, 1):
            raise ValueError(f"adaptive needs eagleTopk 1, not {topk}")
        if steps is not None and steps not in ADAPTIVE_STEPS:
            raise ValueError(
                f"adaptive accepts numSteps {', '.join(map(str, ADAPTIVE_STEPS))}, not {steps}"
            )
        return value


class SecretKeyRef(ApiModel):
    """A key of a Secret in the SpecServer's namespace."""

    name: str = Field(
        min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN, description="Secret name."
    )
    key: str = Field(
        default="token",
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
        description="Key inside the Secret.",
    )


class ModelVolume(ApiModel):
    """The volume that holds model weights or the Hugging Face cache."""

    persistent_volume_claim_name: str | None = Field(
        default=None,
        max_length=253,
        pattern=DNS1123_SUBDOMAIN,
        description="PVC holding weights or an HF cache, mounted read-only.",
    )
    host_path: str | None = Field(
        default=None,
        description=(
            "Node path holding weights or an HF cache (single-node setups); refused unless the "
            "cluster admin allows hostPath volumes (docs/security.md)."
        ),
    )
    mount_path: str = Field(
        default="/models", description="Where the volume is mounted in the engine container."
    )
    hf_cache: bool = Field(
        default=True,
        description="The volume is an HF cache (HF_HOME points at it); false for plain model dirs.",
    )


#: Characters of one inline config.json (the JSON text): real configs are a few KB (long
#: per-layer lists in quantized ones add tens of KB), so this leaves a wide margin while bounding
#: what one SpecServer costs the API server and the operator (docs/operator.md, "Inline model
#: configs").
MAX_INLINE_CONFIG_CHARS = 256 * 1024
#: Containers inside containers of an inline config (real configs nest 3 or 4 deep).
MAX_INLINE_CONFIG_DEPTH = 32
#: What the previous form (an object under target/draft) now says (the API server prunes it).
LEGACY_INLINE = (
    "the previous form (the config as an object) is no longer read (the API server keeps it "
    "only as {{}}): give the config.json as JSON text in spec.modelSource.inline.{new}, e.g. "
    "{new}: '{{\"architectures\": [...], ...}}'"
)


class InlineConfigs(ApiModel):
    """Model configs given inline, for clusters where the operator cannot reach a hub.

    Each config is the text of its config.json (a JSON string bounded in length, parsed with a
    depth limit), never a free-form object: nothing a tenant writes here makes the API server,
    kopf or the operator decode an unbounded structure."""

    target_config: str | None = Field(
        default=None,
        max_length=MAX_INLINE_CONFIG_CHARS,
        description=(
            "The target's config.json as JSON text (a YAML block scalar: targetConfig: |), "
            f"at most {MAX_INLINE_CONFIG_CHARS} characters and {MAX_INLINE_CONFIG_DEPTH} "
            "levels deep."
        ),
    )
    draft_config: str | None = Field(
        default=None,
        max_length=MAX_INLINE_CONFIG_CHARS,
        description="The draft's config.json as JSON text (same limits as targetConfig).",
    )
    target: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra={"x-specserver-pruned": True},
        description=(
            "Removed: the previous form of targetConfig (an object). The API server prunes its "
            "content; a SpecServer that still has it gets ConfigValid=False naming targetConfig."
        ),
    )
    draft: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra={"x-specserver-pruned": True},
        description="Removed: the previous form of draftConfig (see target).",
    )
    target_weight_bytes: int | None = Field(
        default=None, ge=0, description="total_size from the target's model.safetensors.index.json."
    )
    draft_weight_bytes: int | None = Field(
        default=None, ge=0, description="total_size from the draft's model.safetensors.index.json."
    )

    @field_validator("target", "draft")
    @classmethod
    def _refuse_previous_form(cls, value: Any, info: ValidationInfo) -> Any:
        """The old free-form objects: never read, refused with the new field's name."""
        if value is not None:
            raise ValueError(LEGACY_INLINE.format(new=f"{info.field_name}Config"))
        return value

    @field_validator("target_config", "draft_config")
    @classmethod
    def _bounded_json(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Parsed once here (a JSON object, bounded in size and depth), so ConfigValid and the
        webhook refuse the same text with the same message; kept as the text."""
        if value is not None:
            inline_config(value, to_camel(info.field_name or ""))
        return value

    def configs(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """(target, draft) configs parsed from their text (None where not given)."""
        return (
            None
            if self.target_config is None
            else inline_config(self.target_config, "targetConfig"),
            None if self.draft_config is None else inline_config(self.draft_config, "draftConfig"),
        )


def inline_config(text: str, field: str) -> dict[str, Any]:
    """One inline config.json parsed within its limits; ValueError naming the field."""
    return bounded.json_object(
        text,
        f"spec.modelSource.inline.{field}",
        max_bytes=4 * MAX_INLINE_CONFIG_CHARS,  # the character limit is the real one
        max_depth=MAX_INLINE_CONFIG_DEPTH,
    )


class ModelSource(ApiModel):
    """How the engine reaches model files and how the operator reads model configs."""

    volume: ModelVolume | None = Field(
        default=None, description="Volume with weights or an HF cache; none means download."
    )
    hf_endpoint: str | None = Field(
        default=None,
        pattern=HTTP_URL,
        description=(
            "HF-compatible base URL (HF_ENDPOINT) for the engine, e.g. an internal mirror; the "
            "operator itself reads configs from it only when the admin allow-listed it."
        ),
    )
    hf_token_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description=(
            "HF token for the engine pod, injected as HF_TOKEN through secretKeyRef (a Secret "
            "in this namespace); the operator never reads it."
        ),
    )
    config_map_name: str | None = Field(
        default=None,
        max_length=253,
        pattern=DNS1123_SUBDOMAIN,
        description=(
            "ConfigMap with keys target-config.json, draft-config.json and optionally "
            "target-index.json/draft-index.json; the operator validates against these."
        ),
    )
    inline: InlineConfigs | None = Field(
        default=None, description="Configs given inline (highest precedence)."
    )


class EnvVar(ApiModel):
    """A plain environment variable for the engine container."""

    name: str = Field(min_length=1, description="Variable name.")
    value: str = Field(default="", description="Variable value.")


class Engine(ApiModel):
    """The SGLang engine container."""

    image: str = Field(default=DEFAULT_IMAGE, description="Engine image (SGLang 0.5.23 based).")
    context_length: int | None = Field(
        default=None, ge=1, description="--context-length; unset means derived from the config."
    )
    max_running_requests: int | None = Field(
        default=None,
        ge=1,
        description=(
            "--max-running-requests. When absent the operator computes it from the KV pool "
            "(SGLang itself would silently reset it to 48 with speculation on)."
        ),
    )
    mem_fraction_static: float | None = Field(
        default=None, gt=0, lt=1, description="--mem-fraction-static; unset: SGLang's heuristic."
    )
    port: int = Field(default=30000, ge=1, le=65535, description="HTTP port of the engine.")
    extra_args: list[Annotated[str, Field(max_length=MAX_EXTRA_ARG_CHARS)]] = Field(
        default_factory=list,
        max_length=MAX_EXTRA_ARGS,
        description=(
            "Further SGLang flags, one argv item each (never a shell string). Flags the "
            "operator owns (--max-running-requests, --speculative-*, --host, --port, "
            "--enable-metrics) are refused here."
        ),
    )
    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")
    startup_timeout_seconds: int = Field(
        default=1800, ge=30, description="How long model loading may take before the pod restarts."
    )
    expected_input_tokens: int = Field(
        default=512,
        ge=1,
        description="Typical prompt length; sizes the computed --max-running-requests.",
    )
    expected_output_tokens: int = Field(
        default=128,
        ge=1,
        description="Typical answer length; sizes the computed --max-running-requests.",
    )


class Toleration(ApiModel):
    """A pod toleration (same fields as core/v1 Toleration)."""

    key: str | None = Field(default=None, description="Taint key.")
    operator: str | None = Field(default=None, description="Exists or Equal.")
    value: str | None = Field(default=None, description="Taint value.")
    effect: str | None = Field(default=None, description="NoSchedule, PreferNoSchedule, NoExecute.")
    toleration_seconds: int | None = Field(default=None, description="For NoExecute taints.")


class Resources(ApiModel):
    """Accelerators and placement."""

    gpus: int = Field(
        default=1,
        ge=1,
        description="GPUs per replica, over all its nodes (also --tp-size).",
    )
    nodes: int = Field(
        default=1,
        ge=1,
        le=64,
        description=(
            "Nodes one replica spans. 1: one Deployment pod holds all the GPUs. More: a "
            "LeaderWorkerSet group of this many pods, gpus / nodes GPUs each, one tensor-parallel "
            "group across them (--nnodes, --node-rank and --dist-init-addr from LeaderWorkerSet's "
            "environment); gpus must be a multiple of nodes."
        ),
    )
    gpu_type: str = Field(
        description=(
            "GPU model used for planning, e.g. L4, A10G, L40S, L20, RTX-4090, RTX-5090, "
            "RTX-PRO-6000, A100-80G, A800, H100, H100-PCIE, H800, H200, B200, B300, GB200, GB300, "
            "MI300X, MI325X, MI350X, MI355X. "
            "Selects memory, bandwidth and compute in the advisor's tables."
        ),
    )
    gpu_resource_name: str = Field(
        default="nvidia.com/gpu",
        description=(
            "Extended resource name requested for the GPUs: nvidia.com/gpu (the default) for "
            "NVIDIA cards, amd.com/gpu for AMD Instinct (MI300X, MI325X, MI350X, MI355X), which "
            "must be set: an AMD gpuType with an nvidia.com resource is refused."
        ),
    )
    cpu: str | None = Field(default=None, description="CPU request and limit (e.g. '8').")
    memory: str | None = Field(default=None, description="Memory request and limit (e.g. 64Gi).")
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels the engine pods must match."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Tolerations for GPU node taints."
    )


#: A DNS-1123 label (a Kueue LocalQueue's name).
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class Scheduling(ApiModel):
    """Where the engine waits its turn for GPUs: Kueue's queue and priority, rendered as the
    labels Kueue reads on the Deployment or LeaderWorkerSet (and on its pod templates)."""

    queue_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=DNS1123_LABEL,
        description=(
            "Kueue LocalQueue (in the SpecServer's namespace) the engine workloads are queued "
            "in: the label kueue.x-k8s.io/queue-name. Kueue refuses a change of that label on "
            "an existing workload, so a change applies to the next workload the operator "
            "creates (a switch's standby, a resources.nodes change, a recreate)."
        ),
    )
    priority_class_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=DNS1123_SUBDOMAIN,
        description=(
            "Kueue WorkloadPriorityClass of the engine workloads: the label "
            "kueue.x-k8s.io/priority-class (a label value: at most 63 characters)."
        ),
    )


class AutoSpeculation(ApiModel):
    """Auto mode: when the operator switches speculation on or off from live metrics.

    Speculation is switched off fast and on slowly: ``disableAfterBreaches`` consecutive bad
    evaluations turn it off, ``enableAfterPasses`` consecutive good ones turn it back on, with a
    dead band around the crossover, a minimum dwell after every switch (a switch restarts the
    engine) and a switch budget per hour.
    """

    prometheus_url: str | None = Field(
        default=None,
        pattern=HTTP_URL,
        description=(
            "Prometheus base URL; unset uses the operator-wide default. Queried only when the "
            "cluster admin allow-listed it (SPECSERVER_PROMETHEUS_ALLOWED_URLS)."
        ),
    )
    dry_run: bool = Field(
        default=False, description="Compute and record decisions without switching the engine."
    )
    evaluation_interval_seconds: int = Field(
        default=30, ge=5, description="How often the policy is evaluated."
    )
    switch_strategy: SwitchStrategy = Field(
        default=SwitchStrategy.RECREATE,
        description=(
            "How a switch restarts the engine: Recreate (one GPU, downtime), RollingUpdate "
            "(a surge pod when a spare GPU exists, no downtime), BlueGreen (a standby "
            "Deployment <name>-on or <name>-off starts in the new mode; the Service moves to it "
            "only once it is Ready, then the old one is scaled to zero; needs the GPUs of both "
            "for the duration of a switch). A switch whose new engine is not Ready by its "
            "deadline (switchTimeoutSeconds) is cancelled, the old engine serving on, or falls "
            "back to Recreate (blockedSwitchFallback)."
        ),
    )
    max_surge: int | None = Field(
        default=None,
        ge=0,
        le=1,
        description=(
            "RollingUpdate only: surge pods (one node) or LeaderWorkerSet groups (across nodes) "
            "a switch may start next to the old ones, 0 or 1: 1 needs a spare replica's GPUs "
            "(a spare group is a whole set of nodes). Unset: 1 for a Deployment, 0 for a "
            "LeaderWorkerSet (a switch then restarts each group in place, with downtime)."
        ),
    )
    switch_timeout_seconds: int | None = Field(
        default=None,
        ge=30,
        description=(
            "Deadline for a switch's new engine (or a resources.nodes change) to become Ready, "
            "counted from the switch's start; past it the switch is cancelled (the old engine "
            "keeps serving) or falls back (blockedSwitchFallback). Unset: derived from the "
            "advisor's modelled start-up of the new engine (pod start, weight load per node, "
            "CUDA-graph capture, multi-node rendezvous) plus slack for an image pull or a node "
            "the cluster autoscaler adds: twice the start-up, at least 600s and at most 1800s "
            "of slack, 3600s in all at most unless the start-up alone needs more "
            "(docs/advisor.md). Set it above the time your "
            "cluster takes to provision a GPU node when it autoscales."
        ),
    )
    blocked_switch_fallback: BlockedSwitchFallback = Field(
        default=BlockedSwitchFallback.CANCEL,
        description=(
            "What a switch whose new engine is not Ready by the deadline does. Cancel (default): "
            "the new engine is removed and the old one keeps serving with no downtime; Auto "
            "backs off before trying that switch again (first the deadline, doubling per "
            "consecutive blocked attempt, at most an hour). Recreate: free the GPUs first (stop "
            "the old engine, then start the new one in their place), taking a restart's "
            "downtime; only when the hourly switch budget allows it, else Cancel. Choose "
            "Recreate where the switch matters more than minutes without serving and the "
            "cluster has no spare GPUs for a BlueGreen or RollingUpdate standby."
        ),
    )
    ttft_p99_slo_seconds: float = Field(
        default=5.0,
        gt=0,
        description="TTFT P99 objective; breaching it while requests queue turns speculation off.",
    )
    tpot_slo_milliseconds: float = Field(
        default=200.0, gt=0, description="Time-per-output-token objective (used for goodput)."
    )
    accept_length_floor: float | None = Field(
        default=None,
        ge=1,
        description=(
            "Accept length below which speculation is switched off. Default: the accept length "
            "at which the performance model says speculation stops paying at low load, +5%."
        ),
    )
    disable_after_breaches: int = Field(
        default=6,
        ge=1,
        description=(
            "Consecutive breaching evaluations before switching off; half of it (rounded up) "
            "when the switch strategy keeps the old mode serving (BlueGreen, RollingUpdate)."
        ),
    )
    enable_after_passes: int = Field(
        default=12, ge=1, description="Consecutive good evaluations before switching on."
    )
    dead_band: float = Field(
        default=0.15,
        ge=0,
        lt=1,
        description=(
            "Fraction around the crossover concurrency inside which nothing switches: off above "
            "crossover x (1 + deadBand), on below crossover x (1 - deadBand)."
        ),
    )
    min_dwell_seconds: int = Field(
        default=600, ge=0, description="Minimum time in a mode after a switch."
    )
    max_switches_per_hour: int = Field(
        default=4, ge=1, description="Switch budget over any rolling hour."
    )
    stale_after_seconds: int = Field(
        default=120, ge=1, description="Metrics older than this hold the current mode."
    )
    queue_growth_evaluations: int = Field(
        default=3, ge=1, description="Evaluations a growing queue must persist to count."
    )
    relearn_after_seconds: int = Field(
        default=7200,
        ge=60,
        description=(
            "Measured per-band comparisons older than this are ignored (acceptance drifts and "
            "cannot be seen while speculation is off), which lets exploration re-measure."
        ),
    )
    explore: bool = Field(
        default=True,
        description=(
            "Try the other mode in a load band seen in only one mode (within the switch budget)."
        ),
    )


class SpecServerSpec(ApiModel):
    """Desired state of a speculative-decoding SGLang deployment."""

    model: ModelRef = Field(description="The target model.")
    draft: ModelRef | None = Field(
        default=None,
        description=(
            "The draft model or head. Required for EAGLE/EAGLE3 on non-MTP targets, STANDALONE "
            "and DFLASH; omitted for MTP targets (NEXTN), NGRAM and UNO."
        ),
    )
    speculative: Speculative = Field(description="Speculative-decoding algorithm and shape.")
    mode: Mode = Field(
        default=Mode.AUTO,
        description=(
            "Enabled: always speculate. Disabled: never. Auto: the operator decides from metrics."
        ),
    )
    engine: Engine = Field(default_factory=Engine, description="Engine container settings.")
    resources: Resources = Field(description="GPUs and placement.")
    replicas: int = Field(default=1, ge=0, description="Engine replicas.")
    model_source: ModelSource | None = Field(
        default=None, description="How model files and configs are reached."
    )
    auto_speculation: AutoSpeculation | None = Field(
        default=None, description="Policy for mode Auto."
    )
    scheduling: Scheduling | None = Field(
        default=None,
        description="Queueing for GPUs: the Kueue LocalQueue and WorkloadPriorityClass.",
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _refuse_renamed_mode(cls, value: object) -> object:
        """Name the new values when a manifest still says On/Off (or YAML made it a boolean)."""
        if isinstance(value, bool):
            new = RENAMED_MODES[value]
            raise ValueError(
                f"got the boolean {str(value).lower()} (YAML 1.1 reads a bare On/Off/yes/no as a "
                f"boolean); use {new.value}, or one of Enabled, Disabled, Auto"
            )
        if isinstance(value, str) and value in RENAMED_MODES:
            new = RENAMED_MODES[value]
            raise ValueError(
                f"{value!r} was renamed to {new.value!r}; use one of Enabled, Disabled, Auto"
            )
        return value


# ----------------------------------------------------------------------------- status


class Condition(ApiModel):
    """A Kubernetes API-convention condition."""

    type: str = Field(description="Condition type: Ready, ConfigValid, Progressing, ...")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, description="The spec generation this condition was computed from."
    )
    last_transition_time: str = Field(
        description="RFC 3339 time the status last flipped (unchanged when only reason changes)."
    )
    reason: str = Field(description="CamelCase machine-readable reason.")
    message: str = Field(default="", description="Human-readable detail.")


class ObservedMetrics(ApiModel):
    """The newest metrics the operator read for this SpecServer."""

    observed_at: str | None = Field(default=None, description="RFC 3339 time of the reading.")
    accept_length: float | None = Field(
        default=None, description="Mean accepted tokens per verify step (incl. bonus token)."
    )
    ttft_p99_seconds: float | None = Field(default=None, description="P99 time to first token.")
    tpot_p50_milliseconds: float | None = Field(default=None, description="Median time per token.")
    running_requests: float | None = Field(default=None, description="Requests decoding now.")
    queued_requests: float | None = Field(default=None, description="Requests waiting.")
    output_tokens_per_second: float | None = Field(default=None, description="Output throughput.")
    spec_num_steps: float | None = Field(
        default=None,
        description=(
            "The most draft steps SGLang reported over the signal window "
            "(sglang:spec_num_steps): 0 on an adaptive On engine is its zero-step tier."
        ),
    )


class DecisionRecord(ApiModel):
    """One entry of the bounded decision ledger."""

    time: str = Field(description="RFC 3339 time of the decision.")
    action: str = Field(description="keep, enable or disable.")
    reason: str = Field(description="CamelCase reason code.")
    mode: SpeculationState = Field(description="Speculation state after the decision.")
    message: str = Field(default="", description="Inputs and thresholds compared.")


class ResolvedEngine(ApiModel):
    """What SGLang will really run with (auto-chosen values included)."""

    algorithm: str | None = Field(default=None, description="Resolved algorithm (NEXTN -> EAGLE).")
    num_steps: int | None = Field(default=None, description="Resolved --speculative-num-steps.")
    eagle_topk: int | None = Field(default=None, description="Resolved --speculative-eagle-topk.")
    num_draft_tokens: int | None = Field(
        default=None, description="Resolved --speculative-num-draft-tokens."
    )
    context_length: int | None = Field(default=None, description="Effective context length.")
    kv_pool_tokens: int | None = Field(default=None, description="Predicted KV pool in tokens.")
    notes: list[str] = Field(
        default_factory=list, max_length=MAX_NOTES, description="How values were chosen."
    )


class SwitchKind(StrEnum):
    """What a switch changes: the speculation state (Auto), or ``resources.nodes`` between one
    and several (a Deployment replaced by a LeaderWorkerSet, or back)."""

    SPECULATION = "Speculation"
    NODES_CHANGE = "NodesChange"


class SwitchInProgress(ApiModel):
    """A switch between speculation on and off, or between one node and several (an engine
    restart): written before the engine is touched, so a restarted operator resumes it."""

    target: SpeculationState = Field(description="The speculation state being rolled out.")
    previous: SpeculationState = Field(description="The state to roll back to on failure.")
    started_at: str = Field(description="RFC 3339 time the switch started.")
    reason: str = Field(description="The decision's reason code.")
    kind: SwitchKind | None = Field(
        default=None,
        description="Speculation (unset: the same) or NodesChange (resources.nodes 1 <-> N).",
    )
    deadline: str | None = Field(
        default=None,
        description=(
            "RFC 3339 time by which the new engine must be Ready, fixed when the switch starts "
            "(and again when it falls back): past it the switch is cancelled and the old engine "
            "kept serving, or retried as Recreate (autoSpeculation.blockedSwitchFallback)."
        ),
    )
    fallback: Literal["Recreate"] | None = Field(
        default=None,
        description=(
            "Recreate: the switch was blocked at its deadline for want of GPUs and is retried "
            "freeing the old engine's GPUs first (with downtime)."
        ),
    )
    fallback_at: str | None = Field(
        default=None, description="RFC 3339 time the switch fell back to Recreate."
    )
    from_nodes: int | None = Field(
        default=None, ge=1, description="NodesChange: the nodes per replica it leaves."
    )
    to_nodes: int | None = Field(
        default=None, ge=1, description="NodesChange: the nodes per replica it places."
    )
    generation: int | None = Field(
        default=None, description="NodesChange: the SpecServer generation it rolls out."
    )
    held_until: str | None = Field(
        default=None,
        description=(
            "NodesChange cancelled at its deadline: RFC 3339 time until which the old workload "
            "keeps serving and the change is not retried (a new generation retries at once)."
        ),
    )
    attempts: int | None = Field(
        default=None,
        ge=1,
        description="NodesChange: consecutive attempts cancelled at their deadline.",
    )


class PolicyBandScore(ApiModel):
    """What one speculation state delivered in one load band (learned by the policy)."""

    score: float = Field(
        description="Output tokens/s delivered (a moving average, scaled down past the TTFT SLO)."
    )
    # Not "n": YAML 1.1 (the API server's reader) takes a bare n for false.
    samples: int = Field(default=0, ge=0, description="Samples behind the score.")
    at: float | None = Field(default=None, description="Unix time of the newest sample.")


class AutoPolicyState(ApiModel):
    """What the auto-speculation policy remembers between evaluations (so a restart resumes).

    The advisor's ``policy.PolicyState`` in the API's camelCase; the operator converts between
    the two (``policystate.py``)."""

    mode: SpeculationState = Field(description="The speculation state the policy holds.")
    mode_since: float = Field(default=0.0, description="Unix time the state began.")
    last_switch: float | None = Field(default=None, description="Unix time of the last switch.")
    switch_times: list[float] = Field(
        default_factory=list,
        max_length=MAX_SWITCH_TIMES,
        description="Unix times of recent switches (the switch budget).",
    )
    disable_breaches: int = Field(default=0, ge=0, description="Consecutive disable breaches.")
    enable_passes: int = Field(default=0, ge=0, description="Consecutive enable passes.")
    queue_growth: int = Field(default=0, ge=0, description="Consecutive growing queues.")
    last_queued: float | None = Field(default=None, description="Queued requests last read.")
    last_accept: float | None = Field(default=None, description="Accept length last read.")
    exploring: bool = Field(
        default=False, description="The last switch was an exploration (not held by dwell)."
    )
    last_band: str | None = Field(
        default=None, max_length=64, description="Load band of the last evaluation."
    )
    band_streak: int = Field(default=0, ge=0, description="Evaluations the band has held.")
    bands: dict[str, Annotated[dict[str, PolicyBandScore], Field(max_length=2)]] = Field(
        default_factory=dict,
        max_length=MAX_POLICY_BANDS,
        description=(
            f"Load band -> speculation state (on/off) -> what it delivered there (the newest "
            f"{MAX_POLICY_BANDS} bands)."
        ),
    )
    bands_saved_at: float | None = Field(
        default=None, description="Unix time the band scores were last stored."
    )
    blocked_until: float | None = Field(
        default=None,
        description=(
            "Unix time until which Auto does not retry the switch to blockedMode (a switch "
            "whose new engine never got its GPUs was cancelled at its deadline)."
        ),
    )
    blocked_attempts: int = Field(
        default=0,
        ge=0,
        description="Consecutive blocked switches to blockedMode (the back-off doubles each).",
    )
    blocked_mode: SpeculationState | None = Field(
        default=None, description="The speculation state the blocked switch was to."
    )


class SpecServerStatus(ApiModel):
    """Observed state, written by the operator through the status subresource."""

    observed_generation: int | None = Field(
        default=None, description="metadata.generation the status reflects."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=MAX_CONDITIONS,
        description=(
            "Ready, ConfigValid, Progressing, SpeculationActive; in mode Auto MetricsAvailable "
            "and EngineZeroSteps (True: SGLang's adaptive tier ran zero draft steps, the engine "
            "acted and Auto does not score those readings); AutoscalerPresent."
        ),
    )
    speculation_mode: SpeculationState | None = Field(
        default=None,
        description=(
            "What runs: On (the engine has the speculative flags) or Off. spec.mode says what "
            "is asked (Enabled, Disabled, Auto)."
        ),
    )
    speculation_mode_since: str | None = Field(
        default=None, description="RFC 3339 time the current speculation state began."
    )
    max_running_requests: int | None = Field(
        default=None, description="The --max-running-requests rendered for the engine."
    )
    max_running_requests_source: MaxRunningRequestsSource | None = Field(
        default=None, description="Spec (given) or Computed (from the KV pool)."
    )
    max_running_requests_reason: str | None = Field(
        default=None, description="Why the value was chosen."
    )
    mem_fraction_static: float | None = Field(
        default=None, description="The --mem-fraction-static SGLang runs with (predicted)."
    )
    mem_fraction_static_source: MemFractionStaticSource | None = Field(
        default=None,
        description=(
            "Spec (given), Heuristic (SGLang's own, not rendered) or Computed (rendered by the "
            "operator because the heuristic leaves no KV cache)."
        ),
    )
    mem_fraction_static_reason: str | None = Field(
        default=None, description="Why the value was chosen."
    )
    resolved: ResolvedEngine | None = Field(default=None, description="Resolved engine config.")
    last_metrics: ObservedMetrics | None = Field(default=None, description="Newest metrics.")
    decisions: list[DecisionRecord] = Field(
        default_factory=list,
        max_length=MAX_LEDGER_ENTRIES,
        description=f"The newest {MAX_LEDGER_ENTRIES} speculation decisions, oldest first.",
    )
    policy_state: AutoPolicyState | None = Field(
        default=None,
        description="The auto-speculation policy's state (kept so a restart resumes).",
    )
    switch: SwitchInProgress | None = Field(
        default=None,
        description=(
            "A switch (speculation, or resources.nodes) that has started and not yet finished."
        ),
    )
    last_decision_reason: str | None = Field(
        default=None, description="Reason code of the newest policy evaluation."
    )


class ObjectMeta(BaseModel):
    """The subset of metadata the advisor reads."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    namespace: str | None = None
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    generation: int | None = None


class SpecServer(ApiModel):
    """A SpecServer object as stored by the API server."""

    api_version: str = Field(default=API_VERSION, description="specserver.io/v1alpha1.")
    kind: str = Field(default=KIND, description="SpecServer.")
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Standard metadata.")
    spec: SpecServerSpec = Field(description="Desired state.")
    status: SpecServerStatus | None = Field(default=None, description="Observed state.")
