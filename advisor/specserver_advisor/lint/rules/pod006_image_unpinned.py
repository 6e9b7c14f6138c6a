"""POD006 image-unpinned.

What it does:
    Flags an engine image without a tag or with ``:latest`` (a digest pins it). A compose
    service with ``build:`` builds that image locally (its tag names the build): not flagged.
Why it matters:
    SGLang changes flags, defaults and speculative behaviour between releases; an unpinned
    image runs a different SGLang after the next pull than the one these rules (0.5.23) and
    your benchmarks checked.
Example (fails):
    image: lmsysorg/sglang:latest
Use instead:
    image: lmsysorg/sglang:v0.5.23-cu129 (or @sha256:...)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import container_position
from specserver_advisor.lint.rules._base import diag

CODE = "POD006"
NAME = "image-unpinned"
SEVERITY = "warning"
SUMMARY = "The engine image has no tag or the tag latest: the SGLang version drifts."
FIX = "Pin the image to a release tag or a digest."
APPLIES_TO = ("server",)


def unpinned(image: str) -> bool:
    """No tag (after the last path segment) or the tag latest; digests are pinned."""
    if "@" in image or "$" in image or "{{" in image:
        return False
    last = image.rsplit("/", 1)[-1]
    return ":" not in last or last.rsplit(":", 1)[1] == "latest"


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = launch.workload
    if w is None or not isinstance(w.container, dict):
        return []
    if w.kind == "compose" and w.container.get("build") is not None:
        return []  # compose builds this image here and tags it: nothing is pulled
    image = w.container.get("image")
    if not isinstance(image, str) or not image or not unpinned(image):
        return []
    return [
        diag(
            sys.modules[__name__],
            launch,
            container_position(launch, "image"),
            f"image {image} is not pinned to a version",
        )
    ]
