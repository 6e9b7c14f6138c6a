"""POD005 hf-cache-emptydir.

What it does:
    Flags a launch that downloads its model from the Hugging Face Hub (a repo id, not a local
    path) into a cache directory backed by an ``emptyDir`` volume.
Why it matters:
    An emptyDir is deleted with the pod: every restart, reschedule or rollout downloads the
    weights again (tens to hundreds of GB), which is slow, costly and rate-limited.
Example (fails):
    HF_HOME=/models with volume models: {emptyDir: {}} and --model-path Qwen/Qwen3-8B
Use instead:
    a PersistentVolumeClaim (or a node-local hostPath cache) mounted at the HF cache
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position, hf_cache_dir, volume_at
from specserver_advisor.lint.podspec import server_workload as workload_of
from specserver_advisor.lint.rules._base import diag

CODE = "POD005"
NAME = "hf-cache-emptydir"
SEVERITY = "warning"
SUMMARY = "The Hugging Face cache is an emptyDir: the model downloads again on every restart."
FIX = "Back the HF cache with a PersistentVolumeClaim or a node-local volume."
APPLIES_TO = ("server",)


def _hub_repo(ref: object) -> bool:
    text = str(ref or "")
    return text.count("/") == 1 and not text.startswith((".", "/", "~", "$"))


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = workload_of(launch)
    if w is None or w.kind == "compose" or "model_path" in launch.unresolved_fields:
        return []
    if not _hub_repo(launch.parsed.values.get("model_path")):
        return []
    cache = hf_cache_dir(w)
    found = volume_at(w, cache)
    if found is None or "emptyDir" not in found[0]:
        return []
    volume, _ = found
    return [
        diag(
            sys.modules[__name__],
            launch,
            container_position(launch, "volumeMounts"),
            f"the HF cache {cache} is the emptyDir volume {volume.get('name')!r}: "
            f"{launch.parsed.values.get('model_path')} downloads again on every restart",
        )
    ]
