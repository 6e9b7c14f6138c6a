"""What the linter works on: launches found in files, and the diagnostics rules return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specserver_advisor.models import SpecServerSpec
from specserver_advisor.sglang.flags import ParsedArgs

SEVERITIES = ("info", "warning", "error")


@dataclass(frozen=True)
class Position:
    """1-based line and column in a file."""

    line: int = 1
    column: int = 1


@dataclass
class Diagnostic:
    """One finding."""

    path: str
    line: int
    column: int
    code: str
    rule: str
    severity: str
    message: str
    fix: str
    #: Index of the launch the finding is about (set by the engine; scopes suppressions).
    origin: int | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class Workload:
    """Where a launch runs: the object, its pod spec (or compose service) and its container."""

    kind: str  # a Kubernetes kind, or "compose"
    obj: Any
    pod: Any
    container: Any


@dataclass
class Selecting:
    """A Service or PodMonitor in the launch's file: the pod labels it selects, where."""

    kind: str
    name: str
    namespace: str | None
    labels: dict[str, str]
    position: Position


@dataclass
class Group:
    """Where a launch runs in a LeaderWorkerSet group (``lwsgroup`` reads it)."""

    #: "leader", "worker", or "shared": no ``leaderTemplate``, so LWS runs the worker
    #: template as the leader too (it serves HTTP there, and runs on every worker).
    role: str
    #: ``leaderWorkerTemplate.size``: pods in a group (None when it is not a number).
    size: int | None
    name: str | None
    namespace: str | None
    #: The template's own pod labels (LWS adds its ``leaderworkerset.sigs.k8s.io/*`` ones).
    labels: dict[str, str]
    #: Whether ``--node-rank`` follows ``LWS_WORKER_INDEX`` (None: could not tell).
    rank_from_index: bool | None = None
    #: The Services and PodMonitors in the same file.
    selecting: list[Selecting] = field(default_factory=list)


@dataclass
class Launch:
    """An SGLang server launch or a benchmark command found in a file."""

    path: str
    kind: str  # "server" | "bench" | "specserver"
    args: list[str]
    positions: list[Position]  # one per argv item
    start: Position
    parsed: ParsedArgs
    env: dict[str, str] = field(default_factory=dict)
    env_positions: dict[str, Position] = field(default_factory=dict)
    in_container: bool = False
    gpu_type: str | None = None
    #: Lines covered (for suppressions on the object).
    first_line: int = 1
    last_line: int = 1
    #: Shell function calls that led to the launch: their lines are in its scope too.
    call_lines: list[int] = field(default_factory=list)
    document_suppressions: dict[str, str] = field(default_factory=dict)
    #: Shell variables (or command outputs) the launch uses that the file never sets.
    unresolved: dict[str, Position] = field(default_factory=dict)
    #: Such a variable -> the options whose value it supplies (it supplies no option names).
    unresolved_flags: dict[str, list[str]] = field(default_factory=dict)
    #: SGLang fields whose value comes from such a variable (not checked; numbers left out).
    unresolved_fields: set[str] = field(default_factory=set)
    #: Why the launch was not fully evaluated (a shell budget or argv limit reached), or None.
    incomplete: str | None = None
    #: The pod spec and container a workload launch runs in (for the pod-spec rules).
    workload: Workload | None = None
    #: Configs found for the context rules (target, draft), or why not.
    configs: dict[str, Any] = field(default_factory=dict)
    #: The wrapper module that hands the argv to SGLang (``argv.WRAPPERS``), or None.
    launcher: str | None = None
    #: Whether this process serves SGLang's HTTP API (not a Dynamo worker, not an LWS worker).
    serves_http: bool = True
    #: The ``sglang serve MODEL`` form (the first argument is the model path).
    positional: bool = False
    #: The argv items holding an unknown part, those of them naming their option, and the
    #: items after a dropped unknown word (``shell.forget_unresolved``), kept for a re-parse.
    held: tuple[set[int], set[int], set[int]] = field(default_factory=lambda: (set(), set(), set()))
    #: The ``--config`` file merged into the argv (``configfile``), and per argv item from it
    #: where it was written ("'key' of FILE, line N"); keys SGLang refuses, with its message.
    config_from: str | None = None
    config_keys: dict[int, str] = field(default_factory=dict)
    config_refused: list[str] = field(default_factory=list)
    config_at: Position | None = None
    #: Its ``--config`` file could not be read here: the flags it sets are unknown, so only the
    #: rules decided by names and the pod spec run (``engine.NAME_RULES``, POD*).
    config_unknown: bool = False
    #: Files a ConfigMap in the launch's own file holds: data key -> (text, line of its first
    #: line in the file, what to call it), where a ``--config`` path may point.
    embedded_files: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    #: The validated spec of a SpecServer launch (the operator renders from it).
    specserver: SpecServerSpec | None = None
    #: Its place in a LeaderWorkerSet group (None outside one).
    group: Group | None = None
    #: The form it was read from when that is not the file itself (``finder``: "notebook
    #: cell 7", "README.md fence at line 40"); findings name it.
    form: str | None = None

    def position_of(self, field_name: str) -> Position:
        """Where the flag that set ``field_name`` is (else the launch itself)."""
        index = self.parsed.positions.get(field_name)
        if index is not None and index < len(self.positions):
            return self.positions[index]
        return self.start


@dataclass
class Context:
    """Everything a rule may consult besides its launch."""

    launches: list[Launch]

    def speculative_servers(self) -> list[Launch]:
        return [
            la
            for la in self.launches
            if la.kind in ("server", "specserver") and la.parsed.get("speculative_algorithm")
        ]
