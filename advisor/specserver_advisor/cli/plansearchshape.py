"""The shapes ``plan --search-shape`` tries: the bound, the candidates, acceptance per shape.

Called by ``cli.plansearch``. Pure. The search is bounded: ``STEPS`` x ``TOPKS`` x
``TREE_TOKENS`` (chains take steps + 1 tokens, as SGLang forces), under ``MAX_CANDIDATES`` plans
in all, never more draft tokens than SGLang's tree builder can select.

Acceptance per shape follows the plan's prior rule (``perf.treeaccept``: a per-depth keep
probability, a tree's misses falling as ``1 / sqrt(width)``, its depth x width bounded by the
drafted nodes one verify checks, ``draft tokens - 1``), anchored on the given launch's accept
length (measured with ``--accept-length``, else the prior).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from specserver_advisor.launch.tospec import shape_fields
from specserver_advisor.perf import adaptive, treeaccept
from specserver_advisor.perf.plan import Plan

STEPS = tuple(range(1, 9))
TOPKS = (1, 2, 4, 8)
#: Draft tokens tried for trees (topk > 1), within what SGLang's tree builder can select.
TREE_TOKENS = (2, 4, 8, 16, 32, 64)
#: Draft tokens tried for token-only algorithms (NGRAM, DFLASH, DSPARK).
TOKEN_ONLY = (2, 4, 8, 12, 16, 24, 32)
MAX_CANDIDATES = 200
#: The flag names of a shape, as SGLang parses them.
FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


@dataclass(frozen=True)
class Shape:
    """One speculative shape; ``steps``/``topk`` are None for token-only algorithms."""

    steps: int | None
    topk: int | None
    draft_tokens: int
    adaptive: bool = False

    @property
    def label(self) -> str:
        if self.steps is None:
            return f"draft tokens {self.draft_tokens}"
        text = f"({self.steps},{self.topk},{self.draft_tokens})"
        return text + (" adaptive" if self.adaptive else "")

    def flags(self) -> list[str]:
        """The SGLang flags that set this shape."""
        out = []
        for name, value in zip(FIELDS, (self.steps, self.topk, self.draft_tokens), strict=True):
            if value is not None:
                out += [f"--{name.replace('_', '-')}", str(value)]
        return out + (["--speculative-adaptive"] if self.adaptive else [])

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "topk": self.topk,
            "draft_tokens": self.draft_tokens,
            "adaptive": self.adaptive,
        }


def bound_text() -> str:
    return (
        f"steps {STEPS[0]}..{STEPS[-1]}, topk {','.join(map(str, TOPKS))}, draft tokens "
        f"steps+1 for chains and {','.join(map(str, TREE_TOKENS))} for trees; adaptive on/off "
        f"for {'/'.join(adaptive.SUPPORTED_ALGORITHMS)}; at most {MAX_CANDIDATES} plans"
    )


def tree_capacity(steps: int, topk: int) -> int:
    """The most draft tokens SGLang's tree builder can pick: the root plus the top
    ``num_draft_tokens - 1`` of ``topk + (steps - 1) * topk**2`` scored candidates
    (``organize_draft_results``); more fail its ``torch.topk`` at the first decode."""
    return 1 + topk + (steps - 1) * topk * topk


def candidates(algorithm: str) -> Iterator[Shape]:
    """The bounded candidate shapes for an algorithm (before SGLang's resolution)."""
    if shape_fields(algorithm) == ("speculative_num_draft_tokens",):
        yield from (Shape(None, None, n) for n in TOKEN_ONLY)
        return
    for steps in STEPS:
        yield Shape(steps, 1, steps + 1)
        if algorithm in adaptive.SUPPORTED_ALGORITHMS and steps in adaptive.candidate_union():
            yield Shape(steps, 1, steps + 1, adaptive=True)
        for topk in TOPKS[1:]:
            for tokens in sorted({*TREE_TOKENS, steps + 1}):
                if tokens <= tree_capacity(steps, topk):
                    yield Shape(steps, topk, tokens)


def given_shape(plan: Plan) -> Shape | None:
    r = plan.resolution
    if not r.speculative:
        return None
    ndt = int(r.get("speculative_num_draft_tokens") or 1)
    if shape_fields(r.algorithm) == ("speculative_num_draft_tokens",):
        return Shape(None, None, ndt)
    return Shape(
        int(r.get("speculative_num_steps") or 0),
        int(r.get("speculative_eagle_topk") or 1),
        ndt,
        bool(r.get("speculative_adaptive")),
    )


def _depth_width(shape: Shape) -> tuple[int, int]:
    """Draft depth and tree width: token-only algorithms draft a chain of tokens - 1."""
    if shape.steps is None:
        return max(0, shape.draft_tokens - 1), 1
    return shape.steps, max(1, shape.topk or 1)


def keep_probability(accept: float, shape: Shape) -> float:
    """The chain keep probability behind an accept length at a shape (the prior's rule)."""
    depth, width = _depth_width(shape)
    if depth < 1:
        return 0.0
    return treeaccept.chain_keep(accept, depth, width, shape.draft_tokens)


def accept_at(q: float, shape: Shape) -> float:
    """Expected accept length of ``shape`` for chain keep probability ``q``
    (``treeaccept.tree_accept``: the best allocation of the verified nodes)."""
    steps, topk = _depth_width(shape)
    return treeaccept.tree_accept(q, steps, topk, shape.draft_tokens)


def with_shape(values: dict[str, Any], shape: Shape) -> dict[str, Any]:
    """Parsed flags ``values`` with their shape replaced by ``shape``'s."""
    out = {k: v for k, v in values.items() if k not in (*FIELDS, "speculative_adaptive")}
    for name, value in zip(FIELDS, (shape.steps, shape.topk, shape.draft_tokens), strict=True):
        if value is not None:
            out[name] = value
    if shape.adaptive:
        out["speculative_adaptive"] = True
    return out


def argv_with(argv: list[str], shape: Shape) -> list[str]:
    """``argv`` with its shape flags replaced by ``shape``'s."""
    drop = {f"--{n.replace('_', '-')}" for n in FIELDS}
    out: list[str] = []
    k = 0
    while k < len(argv):
        token = argv[k]
        if token.split("=", 1)[0] in drop:
            k += 1 if "=" in token else 2
            continue
        if token == "--speculative-adaptive":
            k += 1
            continue
        out.append(token)
        k += 1
    return out + shape.flags()
