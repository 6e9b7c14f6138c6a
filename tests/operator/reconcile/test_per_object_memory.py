"""What the operator keeps per SpecServer does not grow with what a tenant writes beside what a
pass reads (issue 25, finding 4): identical specs share one parsed model, memo keys are digests
(never a spec's text), and the cache keeps no other tool's copy of the spec."""

from __future__ import annotations

import copy
import json
from typing import Any

from specserver_advisor.models import MAX_INLINE_CONFIG_CHARS
from specserver_operator.core.passcache import PassCache
from specserver_operator.kube.informer import trimmed
from specserver_operator.reconcile import observe

BODY: dict[str, Any] = {
    "apiVersion": "specserver.io/v1alpha1",
    "kind": "SpecServer",
    "metadata": {"name": "a", "namespace": "t", "uid": "u-a", "generation": 1},
    "spec": {
        "model": {"path": "Qwen/Qwen3-8B"},
        "speculative": {"algorithm": "NGRAM"},
        "resources": {"gpuType": "H100"},
    },
}


def body(name: str, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(BODY)
    out["metadata"].update(name=name, uid=f"u-{name}")
    out["spec"].update(spec)
    return out


def test_identical_specs_share_one_parsed_model_and_prune_forgets_it() -> None:
    memo = PassCache()
    a, _ = observe.validated(body("a"), memo)
    b, _ = observe.validated(body("b"), memo)
    c, _ = observe.validated(body("c", replicas=2), memo)
    assert a is not None and b is not None and c is not None
    assert a.spec is b.spec and a.spec is not c.spec
    assert (a.metadata.name, b.metadata.name) == ("a", "b")
    memo.prune({("u-c", 1)})
    assert list(memo.specs) and all(spec is c.spec for spec in memo.specs.values())


def test_an_invalid_spec_still_names_the_field_from_spec() -> None:
    server, why = observe.validated(body("bad", replicas="many"), PassCache())
    assert server is None and why is not None and why.startswith("spec.replicas: ")


def test_the_cache_keeps_no_copy_of_the_spec_made_by_kubectl_or_kopf() -> None:
    text = json.dumps({"spec": {"x": "y" * 1000}})
    obj = body("a")
    obj["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": text,
        "specserver.io/last-handled-configuration": text,
        "specserver.io/pause-auto-speculation": "true",
    }
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    kept = trimmed("SpecServer", obj)
    assert kept["metadata"]["annotations"] == {"specserver.io/pause-auto-speculation": "true"}
    assert "managedFields" not in kept["metadata"]


def test_shared_results_are_keyed_by_a_digest_not_the_specs_text() -> None:
    from specserver_operator.core import desired

    memo = PassCache()
    config = json.dumps({"architectures": ["Qwen3ForCausalLM"], "pad": "x" * 1000})
    server, _ = observe.validated(body("a", modelSource={"inline": {"targetConfig": config}}), memo)
    assert server is not None
    desired._shared(memo, server, object(), "what", lambda: 1)  # type: ignore[arg-type]
    [key] = memo.shared
    assert len(key[0]) == 64 and len(config) < MAX_INLINE_CONFIG_CHARS
