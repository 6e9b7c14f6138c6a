"""Upgrade on the real stack: a SpecServer whose status an earlier version wrote (its
``policyState`` a JSON string, under that CRD) is rewritten structured by this operator once the
new CRD is installed; until then the typed schema refuses other writes of it."""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from test_operator_e2e import apply, example, get

from specserver_advisor.schema import crd as crdgen
from stack import KubeHandle, Operator, wait_for

pytestmark = pytest.mark.cluster


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
    kube: KubeHandle,
    namespace: str,
    previous_version: None,
    own_operator: Callable[..., Operator],
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
    probe = copy.deepcopy(doc)
    probe["metadata"]["name"] = "probe"
    apply(kube, namespace, probe)

    def status_patch(state: Any) -> subprocess.CompletedProcess[str]:
        body = json.dumps({"status": {"policyState": state}})
        return kube.kubectl(
            "patch", "sps", "probe", "-n", namespace, "--subresource=status",
            "--type=merge", "-p", body, check=False,
        )  # fmt: skip

    wait_for(lambda: status_patch({"mode": "On"}).returncode == 0, 30, "the new CRD in force")
    refused = status_patch({"mode": "Maybe"})  # an object is still validated
    assert refused.returncode != 0 and "Unsupported value" in refused.stderr, refused.stderr
    # Until the new operator's first pass, "upgraded" still holds the string: the CRD now
    # types policyState (issue 25: no preserve-unknown subtree a tenant could nest 3,000
    # levels deep). A spec edit is still accepted (CRD validation ratcheting, GA in 1.30: an
    # unchanged stored value is not judged again), the string kept as it was; a write of the
    # field itself is judged (the probe above), and the operator's own status write (which
    # replaces the string) migrates it.
    doc["spec"]["engine"]["maxRunningRequests"] = 24
    edit = kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc), check=False)
    assert edit.returncode == 0, edit.stderr
    assert isinstance(get(kube, "sps", namespace, "upgraded")["status"]["policyState"], str)  # type: ignore[index]
    op = own_operator()  # once the new CRD is in: the upgrade's order
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
    edit = kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc), check=False)
    assert edit.returncode == 0, edit.stderr  # migrated: the tenant's edit is accepted again
