"""SpecServer documents the scripts and the cluster tests share (scripts import it as a sibling;
tests/cluster/specdocs.py loads it with conftest.load_script)."""

from __future__ import annotations

from typing import Any


def eagle3_auto(name: str, namespace: str | None = None, **auto: Any) -> dict[str, Any]:
    """Qwen3-8B with its EAGLE3 draft (3 steps, top-k 1, 4 draft tokens) on one L4, mode Auto,
    evaluated every 5 s; ``auto`` adds to (or overrides) ``spec.autoSpeculation``."""
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": "SpecServer",
        "metadata": metadata,
        "spec": {
            "model": {"path": "Qwen/Qwen3-8B"},
            "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
            "speculative": {
                "algorithm": "EAGLE3",
                "numSteps": 3,
                "eagleTopk": 1,
                "numDraftTokens": 4,
            },
            "mode": "Auto",
            "engine": {"memFractionStatic": 0.85},
            "resources": {"gpus": 1, "gpuType": "L4"},
            "autoSpeculation": {"evaluationIntervalSeconds": 5, **auto},
        },
    }
