"""Generate the SpecServer CustomResourceDefinition from the pydantic models.

Called by ``python -m specserver_advisor.schema.crd`` (writes ``crds/specserver.yaml`` and the
JSON Schema of ``jsonschema.py``) and by the drift test. Pydantic's JSON Schema is not a
structural CRD schema, so ``structural`` inlines ``$ref``, turns ``anyOf [X, null]`` into an
optional ``X`` (nulls are pruned), and gives every level an explicit type.

Nothing is free-form: a field without a schema (``dict[str, Any]``) is a SchemaError, never
``x-kubernetes-preserve-unknown-fields`` (a tenant could store a value nested thousands of
levels deep, which kopf's and the operator's JSON decoders cannot read). A removed field kept
so the API server prunes what old manifests still send is marked ``x-specserver-pruned``: an
object with no properties, whose content the API server drops on every write and read.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from specserver_advisor import models
from specserver_advisor.schema import jsonschema as jsonschemagen
from specserver_advisor.structural import RULES

_PY_TO_OPENAPI = {
    "integer": "integer",
    "number": "number",
    "string": "string",
    "boolean": "boolean",
    "object": "object",
    "array": "array",
}

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {
        "name": "Mode",
        "type": "string",
        "jsonPath": ".status.speculationMode",
        "description": "Whether the engine runs with speculation now.",
    },
    {
        "name": "Accept",
        "type": "number",
        "jsonPath": ".status.lastMetrics.acceptLength",
        "description": "Mean accept length (tokens per verify step).",
    },
    {
        "name": "TTFT-P99",
        "type": "number",
        "jsonPath": ".status.lastMetrics.ttftP99Seconds",
        "description": "P99 time to first token, seconds.",
    },
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        "description": "Ready condition.",
    },
    {
        "name": "Reason",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        "description": "Ready's reason: the first real cause (a rule code such as SPEC016).",
    },
    {
        "name": "Algorithm",
        "type": "string",
        "priority": 1,
        "jsonPath": ".spec.speculative.algorithm",
        "description": "Speculative algorithm.",
    },
    {
        "name": "GPU",
        "type": "string",
        "priority": 1,
        "jsonPath": ".spec.resources.gpuType",
        "description": "GPU type.",
    },
    {
        "name": "Cap",
        "type": "integer",
        "priority": 1,
        "jsonPath": ".status.maxRunningRequests",
        "description": "The --max-running-requests rendered.",
    },
    {
        "name": "Cap-Source",
        "type": "string",
        "priority": 1,
        "jsonPath": ".status.maxRunningRequestsSource",
        "description": "Spec (given) or Computed (from the KV pool).",
    },
    {
        "name": "Message",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
        "description": "Ready's message: the cause, written for the SpecServer's author.",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


#: JSON-Schema marker of a removed field (models.InlineConfigs.target): pruned to {}.
PRUNED = "x-specserver-pruned"


class SchemaError(ValueError):
    """The pydantic schema contains something the converter cannot express."""


def structural(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Convert one pydantic JSON-Schema node into a structural OpenAPI v3 node.

    Args:
        schema: a node of ``Model.model_json_schema(by_alias=True)``.
        defs: the ``$defs`` table of the root schema, for ``$ref`` inlining.

    Returns:
        A new node: explicit ``type`` at every level, null unions reduced to their type.
    """
    defs = defs if defs is not None else schema.get("$defs", {})
    node = copy.deepcopy(schema)
    if node.get(PRUNED):
        # Removed: the API server keeps at most {} (pruned), the models refuse even that.
        return {"type": "object", "description": node.get("description", ""), "maxProperties": 0}
    if "$ref" in node:
        ref = node.pop("$ref").rsplit("/", 1)[-1]
        target = dict(defs[ref])
        # Field-level description wins over the referenced model's docstring.
        target.update({k: v for k, v in node.items() if k in ("description", "default")})
        node = target
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if len(options) != 1:
            raise SchemaError(f"cannot express a union of {len(options)} types structurally")
        inner = structural(options[0], defs)
        if "description" in node:
            inner["description"] = node["description"]
        if node.get("default") is not None:
            inner["default"] = node["default"]
        # ``X | None`` fields are optional, not nullable: OpenAPI v2 (what kubectl explain
        # reads) cannot express nullable and the apiserver then publishes no type at all.
        # Without ``nullable`` the apiserver prunes an explicit null, which is what we want.
        return inner
    out: dict[str, Any] = {}
    kind = node.get("type")
    if kind is None:
        if "enum" in node:
            kind = "string"
        elif "properties" in node:
            kind = "object"
        else:
            raise SchemaError(f"a node without a type ({node.get('description', node)!r})")
    if kind not in _PY_TO_OPENAPI:
        raise SchemaError(f"unsupported JSON-Schema type {kind!r}")
    out["type"] = kind
    if "description" in node:
        out["description"] = node["description"]
    for key in (
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "format",
        "pattern",
    ):
        if key in node:
            out[key] = node[key]
    # JSON Schema 2020 exclusive bounds are numbers; OpenAPI v3.0 uses booleans.
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in out and not isinstance(out[bound], bool):
            out[flag] = out.pop(bound)
            out[bound] = True
    if node.get("default") not in (None, [], {}, ""):
        out["default"] = node["default"]
    if kind == "object":
        props = node.get("properties")
        if props:
            out["properties"] = {k: structural(v, defs) for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(node.get("additionalProperties"), dict):
            extra = node["additionalProperties"]
            if not extra:
                raise SchemaError(f"a map of untyped values ({node.get('description', node)!r})")
            out["additionalProperties"] = structural(extra, defs)
        else:
            raise SchemaError(f"a free-form object ({node.get('description', node)!r})")
    if kind == "array":
        out["items"] = structural(node.get("items", {}), defs)
    return out


def _status_schema() -> dict[str, Any]:
    schema = models.SpecServerStatus.model_json_schema(by_alias=True, mode="serialization")
    node = structural(schema)
    conditions = node["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    return node


def with_rules(spec_schema: dict[str, Any]) -> dict[str, Any]:
    """``spec_schema`` with each rule of the structural table (specserver_advisor.structural)
    as a CEL ``x-kubernetes-validations`` entry on its field, so the API server itself
    enforces it (with or without the webhook)."""
    out = copy.deepcopy(spec_schema)
    for rule in RULES:
        node = out
        for key in rule.path:
            if "properties" not in node or key not in node["properties"]:
                raise SchemaError(f"the structural rule on {rule.field} names no CRD field")
            node = node["properties"][key]
        node.setdefault("x-kubernetes-validations", []).append(rule.cel())
    return out


def build_crd() -> dict[str, Any]:
    """Build the CRD object (a plain dict ready to be dumped as YAML)."""
    spec_schema = with_rules(structural(models.SpecServerSpec.model_json_schema(by_alias=True)))
    root = {
        "type": "object",
        "description": "SpecServer serves an LLM with SGLang speculative decoding.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "specserver.io/v1alpha1."},
            "kind": {"type": "string", "description": "SpecServer."},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": _status_schema(),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{models.PLURAL}.{models.GROUP}"},
        "spec": {
            "group": models.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": models.KIND,
                "plural": models.PLURAL,
                "singular": models.SINGULAR,
                "shortNames": list(models.SHORT_NAMES),
                "categories": ["all", "llm"],
            },
            "versions": [
                {
                    "name": models.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def render_crd_yaml() -> str:
    """The exact text of ``crds/specserver.yaml``."""
    # PyYAML writes YAML 1.1, as kubectl reads it: strings such as On/Off (status values) come
    # out quoted (a YAML 1.2 writer would leave them bare, and kubectl would read booleans).
    header = (
        "# Generated by `python -m specserver_advisor.schema.crd` from specserver_advisor.models.\n"
        "# Do not edit by hand: tests/advisor/schema/test_crd.py fails on drift.\n"
    )
    return header + yaml.safe_dump(build_crd(), sort_keys=False, width=4096)


def main(argv: list[str] | None = None) -> int:
    """Write (or ``--check``) the generated CRD and JSON Schema files."""
    parser = argparse.ArgumentParser(prog="python -m specserver_advisor.schema.crd")
    parser.add_argument("--output", default="crds/specserver.yaml", type=Path)
    parser.add_argument("--schema-output", default=jsonschemagen.SCHEMA_PATH, type=Path)
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args(argv)
    wanted = {
        args.output: render_crd_yaml(),
        args.schema_output: jsonschemagen.render_json_schema(build_crd()),
    }
    stale = [p for p, text in wanted.items() if (p.read_text() if p.exists() else "") != text]
    if args.check:
        for path in stale:
            print(f"{path} is stale; run python -m specserver_advisor.schema.crd", file=sys.stderr)
        return 1 if stale else 0
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
