"""One spelling per thing: the policy's reasons and the speculation mode's spellings live in
the advisor's policy model (``Reason``, ``SpecMode``) and nowhere else in the code.

A reason written as a literal in the operator (or a second module of the advisor) is the
same word spelled twice: renamed in one place, the other silently stops matching (an event
filter, a ledger entry, a cancel rule). The same holds for the mode's spellings (``On``/
``Off`` in status, ``on``/``off`` for labels and the policy, ``enable``/``disable``/``keep``
for actions): every conversion goes through ``SpecMode``.
"""

from __future__ import annotations

import ast

from specserver_advisor.policy.model import Reason, SpecMode
from stack import REPO

CODE = [
    REPO / "advisor" / "specserver_advisor",
    REPO / "operator" / "specserver_operator",
    REPO / "engine-image" / "specserver_engine",
]
#: The module that spells them (``Reason``, ``SpecMode``), by its path in the package.
HOME = "policy/model.py"
#: The plan and its front ends: the plan's output has a prediction per mode, keyed on/off.
PLAN_FILES = ("perf/plan.py", "perf/autocontext.py", "cli/plan")
#: Where the mode's words are spelled, and why they may be (by path in the package).
MODE_WORDS = {"on", "off", "On", "Off", "enable", "disable", "keep"}
MODE_WORDS_ALLOWED = {
    # the API's own enum (SpeculationState) and the previous spec.mode values
    "models.py",
    # the calibration's measured arms (a prediction per mode; the plan's front ends, every
    # ``cli/plan*.py``, spell its on/off output keys: PLAN_FILES)
    "perf/calibration.py",
    # fleetsim's arm names (on, off, on_adaptive, auto, ...), not modes
    "replay/fleetsim.py",
    # the webhook probe's answer ("off": no webhook), the simulated engine's banner
    "handlers.py",
    "sim/simulate.py",
}


def literals(words: set[str]) -> list[str]:
    """``path:line word`` for each string constant in the code that is one of ``words``."""
    found = []
    for root in CODE:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel == HOME:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and node.value in words:
                    found.append(f"{rel}:{node.lineno} {node.value}")
    return found


def test_no_policy_reason_is_spelled_outside_the_policy_model() -> None:
    assert literals({r.value for r in Reason}) == []


def test_the_mode_is_spelled_only_by_specmode() -> None:
    assert SpecMode.parse("On") is SpecMode.ON and SpecMode.parse("off") is SpecMode.OFF
    assert SpecMode.ON.status == "On" and SpecMode.from_status("Off") is SpecMode.OFF
    assert SpecMode.of(True) is SpecMode.ON and not SpecMode.OFF.speculative
    assert SpecMode.from_action(SpecMode.OFF.action) is SpecMode.OFF
    assert SpecMode.forced_by("Enabled") is SpecMode.ON and SpecMode.forced_by("Auto") is None
    stray = [
        hit
        for hit in literals(MODE_WORDS)
        if hit.split(":")[0] not in MODE_WORDS_ALLOWED and not hit.startswith(PLAN_FILES)
    ]
    assert stray == []


def test_an_allowed_file_is_still_there() -> None:
    """The allow-list names files that exist (a renamed file is checked, not skipped)."""
    names = {p.relative_to(root).as_posix() for root in CODE for p in root.rglob("*.py")}
    assert sorted(MODE_WORDS_ALLOWED - names) == []
