"""Why a new engine workload is not Ready (pure data). STAND-IN for part A's module (kinds43):
the contract's names only; replaced by A's on merge."""

from __future__ import annotations

from dataclasses import dataclass

UNSCHEDULABLE = "Unschedulable"
QUOTA_EXCEEDED = "QuotaExceeded"
NOT_ADMITTED = "NotAdmitted"
IMAGE_PULL = "ImagePullBackOff"
CRASH_LOOP = "CrashLoopBackOff"
SCARCE = frozenset({UNSCHEDULABLE, QUOTA_EXCEEDED, NOT_ADMITTED})


@dataclass(frozen=True)
class Blocked:
    """Why ``workload`` is not Ready: a reason above and the cause's own words."""

    reason: str
    message: str
    workload: str

    @property
    def scarce(self) -> bool:
        """A GPU-scarcity cause (freeing GPUs first can help)."""
        return self.reason in SCARCE
