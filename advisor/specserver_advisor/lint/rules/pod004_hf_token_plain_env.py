"""POD004 hf-token-plain-env.

What it does:
    Flags a Hugging Face token (``HF_TOKEN``, ``HUGGING_FACE_HUB_TOKEN``, ...) given as a
    literal ``value`` in a container's env (compose: a literal in ``environment``).
Why it matters:
    The token is then in the manifest, in Git, and readable by anyone who can read the
    Deployment; it grants access to gated and private models.
Example (fails):
    env: [{name: HF_TOKEN, value: hf_abc123}]
Use instead:
    env: [{name: HF_TOKEN, valueFrom: {secretKeyRef: {name: hf-token, key: token}}}]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from specserver_advisor.lint.model import Context, Diagnostic, Launch
from specserver_advisor.lint.podspec import TOKEN_VARS, env_value, interpolated
from specserver_advisor.lint.rules._base import diag

CODE = "POD004"
NAME = "hf-token-plain-env"
SEVERITY = "error"
SUMMARY = "A Hugging Face token written into the manifest as a plain env value."
FIX = "Read the token from a Secret (valueFrom.secretKeyRef; compose: an env_file or ${VAR})."
APPLIES_TO = ("server",)


def check(launch: Launch, ctx: Context) -> Iterable[Diagnostic]:
    w = launch.workload
    if w is None:
        return []
    out = []
    for name in TOKEN_VARS:
        value, literal = env_value(w, name)
        if literal and value and not interpolated(value):
            out.append(
                diag(
                    sys.modules[__name__],
                    launch,
                    launch.env_positions.get(name, launch.start),
                    f"{name} is a plain value in the manifest",
                )
            )
    return out
