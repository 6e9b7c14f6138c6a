"""spec.modelSource.inline: each config is JSON text, bounded in length and depth; the previous
free-form object is refused naming the new field (issue 25)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from specserver_advisor.loaders import configchain
from specserver_advisor.models import MAX_INLINE_CONFIG_CHARS, InlineConfigs, SpecServerSpec

SPEC = {
    "model": {"path": "Qwen/Qwen3-8B"},
    "speculative": {"algorithm": "NGRAM"},
    "resources": {"gpuType": "H100"},
}


def refusal(inline: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as err:
        SpecServerSpec.model_validate({**SPEC, "modelSource": {"inline": inline}})
    return str(err.value)


def test_configs_given_as_json_text_are_what_the_chain_reads() -> None:
    target = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 4096}
    spec = SpecServerSpec.model_validate(
        {**SPEC, "modelSource": {"inline": {"targetConfig": json.dumps(target)}}}
    )
    found = configchain.inline(spec).configs
    assert found is not None and (found.target, found.draft, found.source) == (
        target,
        None,
        "inline",
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 3000 + "]" * 3000, "nested more than 32 levels deep"),
        ('{"a": ' * 900 + "1" + "}" * 900, "nested more than 32 levels deep"),
        ("[1, 2]", "expected a JSON object, got list"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_text_is_refused_naming_the_field(text: str, why: str) -> None:
    message = refusal({"targetConfig": text})
    assert f"spec.modelSource.inline.targetConfig: {why}" in message


def test_text_over_the_limit_is_refused_before_it_is_parsed() -> None:
    message = refusal({"draftConfig": " " * (MAX_INLINE_CONFIG_CHARS + 1)})
    assert "draftConfig" in message and str(MAX_INLINE_CONFIG_CHARS) in message


@pytest.mark.parametrize("old", [{"architectures": ["X"]}, {}])
def test_the_previous_object_form_is_refused_naming_the_new_field(old: dict[str, object]) -> None:
    # {} is what the API server keeps of it (the schema prunes the object's content).
    message = refusal({"target": old})
    assert "no longer read" in message and "spec.modelSource.inline.targetConfig" in message
    assert "draftConfig" in refusal({"draft": old})


def test_the_models_bound_matches_the_schema() -> None:
    field = InlineConfigs.model_fields["target_config"]
    assert any(getattr(m, "max_length", None) == MAX_INLINE_CONFIG_CHARS for m in field.metadata)
