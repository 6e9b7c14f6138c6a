"""Secret-looking values of a launch, and the same launch with them masked (pure).

What ``plan`` and ``lint`` print (a launch's flags, its environment, a SpecServer snippet, a
finding's message, JSON) never carries a secret's value: an environment variable whose name
looks like a credential (``HF_TOKEN``, ``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``*PASSWORD*``)
and SGLang's credential flags (``--api-key``, ``--admin-api-key``, ``--ssl-keyfile-password``,
in any spelling argparse accepts: ``--api-key=X``, ``--api-k X``) are shown as ``MASK``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from specserver_advisor.sglang.flags import match_option

#: What a secret's value is printed as.
MASK = "<redacted>"
#: Environment variable names that hold credentials.
SECRET_ENV = re.compile(r"HF_TOKEN|.*_TOKEN|.*_KEY|.*_SECRET|.*PASSWORD.*", re.IGNORECASE)
#: SGLang 0.5.23 server flags (by field) whose value is a credential.
SECRET_FLAGS = frozenset({"api_key", "admin_api_key", "ssl_keyfile_password"})


def is_secret_env(name: str) -> bool:
    """Whether the environment variable ``name`` looks like it holds a credential."""
    return SECRET_ENV.fullmatch(name) is not None


def secret_flag(token: str) -> bool:
    """Whether the option ``token`` (``--api-key``, ``--api-key=X``, an abbreviation) sets a
    credential flag."""
    if not token.startswith("--"):
        return False
    flag, _ = match_option(token.split("=", 1)[0])
    return flag is not None and flag.field in SECRET_FLAGS


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with every secret-looking variable's value masked."""
    return {k: MASK if is_secret_env(k) and v else v for k, v in env.items()}


def mask_argv(argv: Iterable[str]) -> list[str]:
    """``argv`` with the value of every credential flag masked (both spellings)."""
    out: list[str] = []
    hide_next = False
    for token in argv:
        if hide_next and not token.startswith("--"):
            out.append(MASK)
            hide_next = False
            continue
        hide_next = False
        if secret_flag(token):
            if "=" in token:
                out.append(token.split("=", 1)[0] + "=" + MASK)
                continue
            hide_next = True
        out.append(token)
    return out


def mask_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Parsed flags (field -> value) with the credential flags' values masked."""
    return {k: MASK if k in SECRET_FLAGS and v is not None else v for k, v in values.items()}


def secret_values(env: Mapping[str, str], values: Mapping[str, Any]) -> set[str]:
    """The secret values a launch carries (its secret-looking env, its credential flags)."""
    found = {v for k, v in env.items() if is_secret_env(k) and v}
    found |= {str(v) for k, v in values.items() if k in SECRET_FLAGS and v}
    return found


#: Shorter values are not searched for in text (a 1-character "secret" is no secret, and
#: masking every "1" would garble the message).
MIN_SCRUBBED = 4


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret value masked (longest first)."""
    for value in sorted(set(secrets), key=len, reverse=True):
        if len(value) >= MIN_SCRUBBED:
            text = text.replace(value, MASK)
    return text
