"""The SpecServer manifest as a standalone JSON Schema (draft-07), derived from the CRD's schema.

Written next to the CRD by ``python -m specserver_advisor.schema.crd`` so editors
(yaml-language-server) and offline validators (kubeconform, check-jsonschema) can check
manifests without a cluster; ``tests/advisor/schema/test_crd.py`` fails on drift. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from specserver_advisor import models

#: Where the schema lives in the repository, in the CRDs-catalog layout kubeconform reads:
#: ``-schema-location 'crds/schemas/{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json'``.
SCHEMA_PATH = f"crds/schemas/{models.GROUP}/{models.KIND.lower()}_{models.VERSION}.json"
DRAFT = "http://json-schema.org/draft-07/schema#"


def from_openapi(node: dict[str, Any]) -> dict[str, Any]:
    """Convert one structural OpenAPI v3 (CRD) node into a JSON Schema draft-07 node.

    Objects with declared properties refuse unknown keys (the apiserver would silently prune
    them, and the models refuse them); ``x-kubernetes-preserve-unknown-fields`` objects stay
    open; OpenAPI's boolean exclusive bounds become draft-07 numbers.

    Args:
        node: a node of the CRD's ``openAPIV3Schema``.

    Returns:
        A new JSON Schema node.
    """
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("exclusiveMinimum", "exclusiveMaximum"):
            continue
        if key == "properties":
            out[key] = {name: from_openapi(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = from_openapi(value)
        else:
            out[key] = value
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if node.get(bound) is True and plain in out:
            out[bound] = out.pop(plain)
    if (
        node.get("type") == "object"
        and "properties" in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def build_json_schema(crd: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a SpecServer manifest, from the CRD ``crdgen.build_crd`` returns."""
    version = crd["spec"]["versions"][0]
    root = from_openapi(version["schema"]["openAPIV3Schema"])
    root["properties"]["apiVersion"]["enum"] = [models.API_VERSION]
    root["properties"]["kind"]["enum"] = [models.KIND]
    # metadata is the apiserver's ObjectMeta, not ours to restrict.
    root["properties"]["metadata"] = {"type": "object", "description": "Standard metadata."}
    root["required"] = ["apiVersion", "kind", "spec"]
    return {
        "$schema": DRAFT,
        "title": f"{models.KIND} ({models.API_VERSION})",
        **root,
    }


def render_json_schema(crd: dict[str, Any]) -> str:
    """The exact text of the schema file."""
    return json.dumps(build_json_schema(crd), indent=2, sort_keys=False) + "\n"
