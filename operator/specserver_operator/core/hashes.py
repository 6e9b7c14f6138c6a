"""Content hashes of the children the operator applies (pure): what desired state compares and
the client stamps on every write (``HASH_ANNOTATION``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

HASH_ANNOTATION = "specserver.io/applied-hash"


def object_hash(obj: dict[str, Any]) -> str:
    """Content hash of a desired object (without the hash annotation itself)."""
    clean = json.loads(json.dumps(obj))
    clean.get("metadata", {}).get("annotations", {}).pop(HASH_ANNOTATION, None)
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]


def applied_hash(obj: dict[str, Any] | None) -> str | None:
    """The content hash this operator stamped on a child when it wrote it."""
    return ((obj or {}).get("metadata", {}).get("annotations") or {}).get(HASH_ANNOTATION)
