"""Valid, short child names from any SpecServer name (pure).

A SpecServer name is a DNS subdomain (up to 253 characters, dots allowed, may start with a
digit), but its children need more: a Service name is a DNS-1035 label (63 characters, starts
with a letter, no dots), BlueGreen appends ``-on``/``-off``, and the name is also a label
value (63 characters). A name that already fits is used as it is (existing children keep their
names); any other is shortened and made valid, with a hash of the full name so two long names
never share children.
"""

from __future__ import annotations

import hashlib
import re

#: Longest base name: a Service name (63) less the longest suffix ("-off"; "-lws" as long).
MAX_BASE = 59
_LABEL_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def child_name(name: str) -> str:
    """The base name of a SpecServer's Deployments and Service (and its name label value)."""
    if len(name) <= MAX_BASE and _LABEL_1035.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    stem = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    stem = re.sub(r"^[^a-z]+", "", stem)  # starts with a letter
    stem = stem[: MAX_BASE - len(digest) - 1].rstrip("-")
    return f"{stem}-{digest}" if stem else f"sps-{digest}"


def lws_name(base: str) -> str:
    """A multi-node SpecServer's LeaderWorkerSet under Recreate/RollingUpdate (``base``: its
    ``child_name``): ``<base>-lws``, never the Service's name (LeaderWorkerSet's controller
    creates a headless Service named after the LeaderWorkerSet)."""
    return f"{base}-lws"
