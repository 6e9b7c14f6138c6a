"""The shell evaluator's budget for one file: steps, arguments and string size, spent by every
construct rather than capped per construct.

``shell.from_shell`` makes one per file (``sources`` shares it between the commands of one
YAML file) and hands it to the tokenizer and the evaluator. Loops, nested loops, recursion,
``if`` chains and world copies spend steps; words and expanded fields spend arguments; every
value built spends its size. When one runs out the budget records why (``spent``), once, and
the evaluator goes on in a cheap mode (one world, each loop body once, each function entered
once) so that launches after the costly part are still found and their decided flags checked;
the cheap mode has a reserve of the same size, and when that is gone too the evaluation stops.
The launches from such a file carry the reason, reported as ``INFO004``. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Per file. A launch script of a few hundred lines spends well under a thousandth of these;
#: a file that spends them all finishes in about a second
#: (see tests/advisor/lint/test_shell_budget).
MAX_STEPS = 200_000
MAX_WORDS = 50_000
MAX_CHARS = 4_000_000
#: Arguments linted per launch line; SGLang launches have a few dozen.
MAX_ARGS = 4_096
#: Launches linted per file (a rendered chart or a docs page holds a few dozen); a file with
#: more has the rest not read, and its last launch linted says so (INFO004): each launch
#: costs a fraction of a millisecond to find and check, 5,000 Pods in one file seconds.
MAX_FILE_LAUNCHES = 500
CAPPED = f"the file holds more than {MAX_FILE_LAUNCHES} launches (those after were not read)"
#: The size one variable's value may reach (in ``chars`` units: its text plus ``PIECE_COST``
#: per piece); a larger one is stored as unknown.
MAX_VALUE = 262_144
#: Steps one launch found costs (it is parsed and every rule runs on it).
FOUND_COST = 500
#: ``if``/``for``/``{`` nesting the parser reads, ``${V:-${W:-...}}`` nesting the tokenizer reads.
MAX_NESTING = 100
MAX_EXPANSION_NESTING = 8

UNITS = {"steps": MAX_STEPS, "words": MAX_WORDS, "chars": MAX_CHARS}
#: What the INFO says for each limit reached.
WHAT = {
    "steps": f"the file spent its budget of {MAX_STEPS:,} evaluation steps (loops, branches, "
    "function calls)",
    "words": f"the file spent its budget of {MAX_WORDS:,} shell words and arguments",
    "chars": f"the file spent its budget of {MAX_CHARS:,} characters of variable values",
    "nesting": f"blocks and function calls nest deeper than {MAX_NESTING} levels (the deeper "
    "ones were skipped)",
    "value": f"a variable's value grew past {MAX_VALUE:,} characters (it is unknown from there)",
    "file words": f"the file has more than {MAX_WORDS:,} shell words (those after were not read)",
    "file expansions": f"the file has more than {MAX_WORDS:,} expansions and quoted strings "
    "(`$`, backquotes, quotes; those after were not read)",
}
#: Names an unknown piece that stands for a value over budget (INFO004 reports it, not INFO002).
OVER = "over budget: "
#: What one expanded piece costs in ``chars`` besides its text (its tuple and position).
PIECE_COST = 32


class Exhausted(Exception):
    """Raised inside the evaluator when the cheap mode's reserve is spent too: stop."""


@dataclass
class Budget:
    """What is left of one file's budget, and why it ran out (None while it has not)."""

    left: dict[str, int] = field(default_factory=lambda: dict(UNITS))
    spent: str | None = None
    #: Set when the reserve is gone as well: the rest of the file was not evaluated.
    stopped: bool = False

    @property
    def cheap(self) -> bool:
        """Whether the evaluator should take the cheap path (the budget ran out once)."""
        return self.spent is not None

    def spend(self, unit: str, amount: int = 1) -> bool:
        """Spend ``amount``; False when it did not fit (the first time switches to the
        reserve; the second raises ``Exhausted``)."""
        left = self.left[unit] - amount
        if left >= 0:
            self.left[unit] = left
            return True
        if self.spent is None:
            self.spent = unit
            self.left = dict(UNITS)
            return False
        self.stopped = True
        raise Exhausted(unit)

    def note(self, reason: str) -> None:
        """Record a limit reached outside the three units (``nesting``, ``file words``): the
        evaluation goes on in the cheap mode."""
        if self.spent is None:
            self.spent = reason

    def reason(self) -> str | None:
        """What the INFO says: which limit was reached and what that means for the launch."""
        if self.spent is None:
            return None
        what = WHAT.get(self.spent, self.spent)
        if self.stopped:
            return f"{what}; the rest of the file was not evaluated"
        return f"{what}; from there on it was evaluated along one path (one value per loop)"


def world_cost(variables: int) -> int:
    """Steps a world copy costs: one, plus its size (a copy of a dict is cheap per entry)."""
    return 1 + variables // 256


def key_cost(key: tuple[object, ...]) -> int:
    """Steps a world's identity (``World.key``: every value's text, sorted) cost to build."""
    variables = key[0]
    assert isinstance(variables, tuple)
    size = 0
    for _, text in variables:
        size += len(text) if isinstance(text, str) else sum(len(t) for t in text)
    return 1 + len(variables) + size // 256
