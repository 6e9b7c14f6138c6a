"""The operator's closed loop at the controller seam, shared by the operator's unit tests of
every layer: a SpecServer (``SPEC``), a fake of our own ``client.KubeClient`` (kopf's pattern:
it fails loudly on any call it does not implement), a signal cache that gives each read a new
sample, the overload and steady readings, and one ``cycle`` of ``controller.reconcile``.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from specserver_advisor.policy.model import Observation
from specserver_operator.core.hashes import HASH_ANNOTATION, applied_hash, object_hash
from specserver_operator.reconcile import controller

SPEC = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "x", "namespace": "llm", "uid": "u-1", "generation": 1},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "draft": {"path": "Tengyunw/qwen3_8b_eagle3"},
        "speculative": {"algorithm": "EAGLE3", "numSteps": 3, "eagleTopk": 1, "numDraftTokens": 4},
        "mode": "Auto",
        "engine": {"memFractionStatic": 0.85},
        "resources": {"gpuType": "L4"},
        "autoSpeculation": {
            "evaluationIntervalSeconds": 5,
            "disableAfterBreaches": 1,
            "minDwellSeconds": 0,
            "switchTimeoutSeconds": 60,
        },
    },
}


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386, as the API server applies a status merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeClient:
    """Our client seam: a Deployment store that becomes ready when told to."""

    def __init__(self) -> None:
        self.deployment: dict[str, Any] | None = None
        self.status: dict[str, Any] = {}
        self.writes = 0
        self.ready = True
        self.pods: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind != "Deployment" or not self.deployment:
            return None
        found = self.deployment["metadata"]["name"] == name
        return copy.deepcopy(self.deployment) if found else None

    def apply(
        self, obj: dict[str, Any], desired_hash: str | None = None, force: bool = False
    ) -> dict[str, Any] | None:
        if obj["kind"] != "Deployment":
            return None
        desired_hash = desired_hash or object_hash(obj)
        if not force and applied_hash(self.deployment) == desired_hash:
            return None
        self.writes += 1
        self.deployment = copy.deepcopy(obj)
        self.deployment["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = desired_hash
        self.deployment["metadata"]["generation"] = 1
        ready = 1 if self.ready else 0
        self.deployment["status"] = {
            "readyReplicas": ready,
            "updatedReplicas": 1,
            "observedGeneration": 1,
        }
        return copy.deepcopy(self.deployment)

    def patch_status(self, namespace: str, name: str, changes: dict[str, Any]) -> None:
        self.writes += 1
        merge_patch(self.status, changes)

    def list_autoscalers(self, namespace: str) -> list[tuple[str, str, str, str]]:
        return []

    def list_scheduling(
        self, namespace: str, names: list[str] | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The namespace's engine pods and FailedCreate events: ``pods`` / ``events`` as a test
        sets them."""
        return list(self.pods), list(self.events)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call {name}")


class Signals:
    """Our signal cache's seam: every read is a new sample (its own ``ts``, as each refresh of
    ``signals.SignalCache`` stamps its own), so every due pass evaluates it."""

    last_error = None
    held = False
    samples = itertools.count(1)

    def __init__(self, **obs: Any) -> None:
        self.obs = obs

    def get(self, namespace: str, name: str) -> Observation:
        return Observation(ts=float(next(self.samples)), **self.obs)


OVERLOAD = {
    "accept_length": 2.4,
    "ttft_p99_s": 20.0,
    "running": 13,
    "queued": 27,
    "output_tok_s": 300.0,
    "age_s": 2.0,
}
STEADY = {
    "accept_length": 2.7,
    "ttft_p99_s": 0.6,
    "running": 4,
    "queued": 0,
    "output_tok_s": 130.0,
    "age_s": 2.0,
}


def cycle(client: FakeClient, signals: Signals, t: float) -> controller.Outcome:
    body = copy.deepcopy(SPEC)
    body["status"] = copy.deepcopy(client.status)
    stamp = f"2026-01-01T00:{int(t) // 60 % 60:02d}:{int(t) % 60:02d}Z"
    return controller.reconcile(
        client,
        body,
        stamp,
        signals=signals,  # type: ignore[arg-type]
        now_ts=t,
    )


def mode(client: FakeClient) -> str:
    assert client.deployment is not None
    return str(client.deployment["metadata"]["labels"]["specserver.io/mode"])
