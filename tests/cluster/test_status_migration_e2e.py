"""Upgrade on the real stack: a SpecServer whose status the previous version wrote (its
``policyState`` a JSON string, under the previous CRD) is rewritten structured by this operator
once the new CRD is installed."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from test_operator_e2e import Operator, apply, example, get, wait_for

from conftest import KubeHandle
from specserver_advisor import crdgen


def previous_crd() -> dict[str, Any]:
    """This CRD as the previous version shipped it: ``status.policyState`` a string."""
    crd = copy.deepcopy(crdgen.build_crd())
    for version in crd["spec"]["versions"]:
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        status["properties"]["policyState"] = {"type": "string"}
    return crd


def install(kube: KubeHandle, crd: dict[str, Any]) -> None:
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(crd))


@pytest.fixture
def previous_version(kube: KubeHandle) -> Iterator[None]:
    install(kube, previous_crd())
    try:
        yield
    finally:
        install(kube, crdgen.build_crd())


def test_a_policy_state_the_previous_version_wrote_as_json_is_rewritten_structured(
    kube: KubeHandle, namespace: str, previous_version: None
) -> None:
    doc = example()
    doc["metadata"]["name"] = "upgraded"
    apply(kube, namespace, doc)
    recent = [round(time.time()) - 600.0, round(time.time()) - 300.0]  # within the switch budget
    legacy = {"mode": "on", "mode_since": recent[1], "switch_times": recent, "exploring": True}
    patch = {"status": {"policyState": json.dumps(legacy), "lastDecisionReason": "NoSeries"}}

    def written_as_string() -> bool:  # the previous schema is in force once this is accepted
        done = kube.kubectl(
            "patch", "sps", "upgraded", "-n", namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps(patch), check=False,
        )  # fmt: skip
        return done.returncode == 0

    wait_for(written_as_string, 30, "the previous CRD to accept a string policyState")
    install(kube, crdgen.build_crd())  # the upgrade: new CRD, then the new operator
    op = Operator(kube)
    op.start()
    try:

        def structured() -> dict[str, Any] | None:
            state = ((get(kube, "sps", namespace, "upgraded") or {}).get("status") or {}).get(
                "policyState"
            )
            return state if isinstance(state, dict) else None

        state = wait_for(structured, 60, "policyState rewritten as an object")
    finally:
        op.stop()
    assert state["mode"] == "On"
    assert state["switchTimes"] == recent and state["modeSince"] == recent[1]
