"""The CRD is generated from the pydantic models: drift test and converter unit tests."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel, Field, ValidationError

from specserver_advisor import models
from specserver_advisor.schema import crd as crdgen
from specserver_advisor.schema import jsonschema as jsonschemagen
from stack import REPO


def test_crd_file_matches_the_models() -> None:
    current = (REPO / "crds" / "specserver.yaml").read_text()
    assert current == crdgen.render_crd_yaml(), (
        "crds/specserver.yaml is stale: run python -m specserver_advisor.schema.crd"
    )


def test_check_mode_reports_drift(tmp_path: Any) -> None:
    stale = tmp_path / "crd.yaml"
    stale.write_text("old\n")
    assert crdgen.main(["--output", str(stale), "--check"]) == 1
    assert crdgen.main(["--output", str(stale)]) == 0
    assert crdgen.main(["--output", str(stale), "--check"]) == 0


class _Inner(BaseModel):
    """Inner doc."""

    count: int = Field(default=3, ge=1, description="how many")


class _Outer(BaseModel):
    inner: _Inner | None = Field(default=None, description="field doc wins")
    mode: models.Mode = Field(default=models.Mode.AUTO, description="mode doc")
    labels: dict[str, str] = Field(default_factory=dict, description="labels")
    ratio: float = Field(default=0.5, gt=0, le=1, description="ratio")


def test_structural_inlines_refs_and_drops_null_unions() -> None:
    node = crdgen.structural(_Outer.model_json_schema())
    inner = node["properties"]["inner"]
    assert inner["type"] == "object"
    assert inner["description"] == "field doc wins"
    assert inner["properties"]["count"] == {
        "type": "integer",
        "description": "how many",
        "minimum": 1,
        "default": 3,
    }
    assert "nullable" not in inner and "$ref" not in str(node) and "anyOf" not in str(node)


def test_structural_carries_enums_defaults_maps_and_bounds() -> None:
    props = crdgen.structural(_Outer.model_json_schema())["properties"]
    assert props["mode"]["enum"] == ["Enabled", "Disabled", "Auto"]
    assert props["mode"]["default"] == "Auto"
    assert props["labels"]["additionalProperties"] == {"type": "string"}
    assert props["ratio"]["minimum"] == 0 and props["ratio"]["exclusiveMinimum"] is True
    assert props["ratio"]["maximum"] == 1


class _Free(BaseModel):
    free: dict[str, Any] | None = Field(default=None, description="anything")


class _Untyped(BaseModel):
    values: dict[str, Any] = Field(default_factory=dict, description="untyped values")


@pytest.mark.parametrize("model", [_Free, _Untyped])
def test_a_free_form_field_is_refused_not_preserved(model: type[BaseModel]) -> None:
    # Issue 25: a preserve-unknown-fields subtree let a tenant store a value nested 3,000
    # levels deep, which ended kopf's watch (RecursionError) and with it the operator.
    with pytest.raises(crdgen.SchemaError, match=r"free-form|untyped"):
        crdgen.structural(model.model_json_schema())


def test_no_node_of_the_crd_keeps_unknown_fields_and_every_collection_is_bounded() -> None:
    text = crdgen.render_crd_yaml()
    assert "x-kubernetes-preserve-unknown-fields" not in text
    root = crdgen.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    inline = root["properties"]["spec"]["properties"]["modelSource"]["properties"]["inline"]
    for name in ("targetConfig", "draftConfig"):
        node = inline["properties"][name]
        assert (node["type"], node["maxLength"]) == ("string", models.MAX_INLINE_CONFIG_CHARS)
    for name in ("target", "draft"):  # the previous form: pruned to {} by the API server
        assert inline["properties"][name] == {
            "type": "object",
            "description": inline["properties"][name]["description"],
            "maxProperties": 0,
        }
    policy = root["properties"]["status"]["properties"]["policyState"]
    assert policy["type"] == "object"
    bands = policy["properties"]["bands"]
    assert bands["maxProperties"] == models.MAX_POLICY_BANDS
    assert bands["additionalProperties"]["maxProperties"] == 2
    assert policy["properties"]["switchTimes"]["maxItems"] == models.MAX_SWITCH_TIMES


def test_every_level_has_a_type_and_every_spec_field_a_description() -> None:
    crd = crdgen.build_crd()
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def walk(node: dict[str, Any], path: str, is_field: bool = True) -> None:
        assert "type" in node, f"{path} has no type"
        if is_field:
            assert node.get("description"), f"{path} has no description"
        for key, child in node.get("properties", {}).items():
            walk(child, f"{path}.{key}")
        if "items" in node:
            walk(node["items"], f"{path}[]", is_field=node["items"]["type"] == "object")

    walk(root["properties"]["spec"], ".spec")
    walk(root["properties"]["status"], ".status")


def test_status_conditions_are_a_map_list_keyed_by_type() -> None:
    crd = crdgen.build_crd()
    version = crd["spec"]["versions"][0]
    conditions = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
        "conditions"
    ]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert version["subresources"] == {"status": {}}
    names = [c["name"] for c in version["additionalPrinterColumns"]]
    assert names[:5] == ["Mode", "Accept", "TTFT-P99", "Ready", "Reason"] and names[-1] == "Age"
    wide = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert wide["Reason"] == '.status.conditions[?(@.type=="Ready")].reason'
    assert wide["Algorithm"] == ".spec.speculative.algorithm"
    assert wide["GPU"] == ".spec.resources.gpuType"
    assert wide["Cap"] == ".status.maxRunningRequests"
    assert wide["Cap-Source"] == ".status.maxRunningRequestsSource"


def test_yaml_quotes_on_and_off_for_kubectl() -> None:
    # status.speculationMode keeps On/Off (written by the operator as JSON, never by hand).
    text = crdgen.render_crd_yaml()
    assert "- 'On'" in text and "- 'Off'" in text


def test_spec_mode_values_cannot_be_yaml_booleans() -> None:
    crd = crdgen.build_crd()
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    values = spec["properties"]["mode"]["enum"]
    assert values == ["Enabled", "Disabled", "Auto"]
    # YAML 1.1 (kubectl) reads these bare; none of them may come back as anything but itself.
    assert [yaml.safe_load(f"v: {v}")["v"] for v in values] == values


def _spec(mode: Any) -> dict[str, Any]:
    return {
        "spec": {
            "model": {"path": "Qwen/Qwen3-8B"},
            "speculative": {"algorithm": "NGRAM"},
            "resources": {"gpus": 1, "gpuType": "L4"},
            "mode": mode,
        }
    }


@pytest.mark.parametrize(
    ("old", "new"),
    [("On", "'Enabled'"), ("Off", "'Disabled'"), (True, "use Enabled"), (False, "use Disabled")],
)
def test_old_mode_values_are_refused_naming_the_new_ones(old: Any, new: str) -> None:
    with pytest.raises(ValidationError) as err:
        models.SpecServer.model_validate(_spec(old))
    (only,) = err.value.errors()
    assert only["loc"] == ("spec", "mode")
    assert new in only["msg"] and "Enabled, Disabled, Auto" in only["msg"]


def test_bare_yaml_off_is_refused_with_the_yaml_reason() -> None:
    doc = yaml.safe_load("spec:\n  mode: Off\n")
    with pytest.raises(ValidationError, match=r"YAML 1\.1 reads a bare On/Off"):
        models.SpecServer.model_validate(_spec(doc["spec"]["mode"]))


@pytest.mark.parametrize("mode", ["Enabled", "Disabled", "Auto"])
def test_new_mode_values_are_accepted(mode: str) -> None:
    assert models.SpecServer.model_validate(_spec(mode)).spec.mode.value == mode


@pytest.mark.parametrize(
    "path", sorted((REPO / "manifests" / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_examples_validate_against_the_models(path: Any) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        server = models.SpecServer.model_validate(doc)
        assert server.spec.resources.gpu_type


# ----------------------------------------------------------------------------- JSON Schema


def _json_schema() -> dict[str, Any]:
    return json.loads((REPO / jsonschemagen.SCHEMA_PATH).read_text())


def test_json_schema_file_matches_the_models() -> None:
    current = (REPO / jsonschemagen.SCHEMA_PATH).read_text()
    assert current == jsonschemagen.render_json_schema(crdgen.build_crd()), (
        f"{jsonschemagen.SCHEMA_PATH} is stale: run python -m specserver_advisor.schema.crd"
    )


def test_check_mode_reports_a_stale_json_schema(tmp_path: Any) -> None:
    crd, schema = tmp_path / "crd.yaml", tmp_path / "s" / "schema.json"
    argv = ["--output", str(crd), "--schema-output", str(schema)]
    assert crdgen.main(argv) == 0
    assert crdgen.main([*argv, "--check"]) == 0
    schema.write_text("{}\n")
    assert crdgen.main([*argv, "--check"]) == 1


def test_json_schema_is_a_valid_draft7_schema() -> None:
    jsonschema.Draft7Validator.check_schema(_json_schema())


@pytest.mark.parametrize(
    "path", sorted((REPO / "manifests" / "examples").glob("*.yaml")), ids=lambda p: p.name
)
def test_examples_validate_against_the_json_schema(path: Any) -> None:
    validator = jsonschema.Draft7Validator(_json_schema())
    for doc in yaml.safe_load_all(path.read_text()):
        assert not [e.message for e in validator.iter_errors(doc)]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("mode: Off", "False is not of type 'string'"),
        ("mode: On", "True is not of type 'string'"),
        ("mode: Sometimes", "'Sometimes' is not one of"),
        ("replicas: -1", "-1 is less than the minimum of 0"),
        ("modle: {path: x}", "'modle' was unexpected"),
    ],
)
def test_json_schema_refuses_what_the_api_refuses(text: str, needle: str) -> None:
    doc = yaml.safe_load((REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml").read_text())
    key, value = next(iter(yaml.safe_load(text).items()))
    doc["spec"][key] = value
    errors = [e.message for e in jsonschema.Draft7Validator(_json_schema()).iter_errors(doc)]
    assert any(needle in e for e in errors), errors


def test_exclusive_bounds_become_draft7_numbers() -> None:
    node = jsonschemagen.from_openapi(
        {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1}
    )
    assert node == {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    v = jsonschema.Draft7Validator(node)
    assert not v.is_valid(0) and v.is_valid(0.5) and v.is_valid(1)


def test_no_property_name_reads_as_a_boolean_in_yaml_1_1() -> None:
    """The API server reads CRD YAML as YAML 1.1, where a bare y/n/yes/no/on/off is a boolean:
    a property named so would become "false" in the schema, its value pruned on every write
    (a band score's ``n`` did: 94 status writes a cycle at steady state)."""
    booleans = {"y", "n", "yes", "no", "on", "off", "true", "false"}
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in (node.get("properties") or {}).items():
                if str(key).lower() in booleans:
                    found.append(f"{path}.{key}")
                walk(value, f"{path}.{key}")
            for key in ("items", "additionalProperties"):
                walk(node.get(key), path)

    for version in crdgen.build_crd()["spec"]["versions"]:
        walk(version["schema"]["openAPIV3Schema"], version["name"])
    assert not found, f"property names YAML 1.1 reads as booleans: {found}"
