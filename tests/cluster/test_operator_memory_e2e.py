"""The operator's memory on the real stack does not follow how large tenants make their specs
(issue 25, finding 4): 8 SpecServers with the largest inline configs the schema allows, and 8
more in the probe's shape (a 1.6 MB free-form inline config of 90,000 keys each, which took the
operator from 79 MB to 280 MB and over its limit on every restart), keep the operator process
under the memory limit of ``manifests/operator.yaml``, while running and across a restart."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from test_operator_e2e import condition, example, get
from test_operator_faults_e2e import named

from specserver_advisor.models import MAX_INLINE_CONFIG_CHARS
from stack import REPO, KubeHandle, Operator, load_config, wait_for

pytestmark = pytest.mark.cluster

COUNT = 8
UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def memory_limit() -> int:
    """Bytes: the operator container's memory limit in manifests/operator.yaml."""
    for doc in yaml.safe_load_all((REPO / "manifests" / "operator.yaml").read_text()):
        if (doc or {}).get("kind") == "Deployment":
            [container] = doc["spec"]["template"]["spec"]["containers"]
            text = str(container["resources"]["limits"]["memory"])
            unit = text[-2:]
            return int(text[:-2]) * UNITS[unit] if unit in UNITS else int(text)
    raise AssertionError("no Deployment in manifests/operator.yaml")


def padded(config: dict[str, Any], chars: int) -> str:
    """``config`` as JSON text of just under ``chars`` characters (filler keys at the top): the
    most filler keys that fit, found by bisection (a few dumps, not one per key)."""

    def dumped(count: int) -> str:
        return json.dumps({**config, **{f"x{i:07d}": i for i in range(count)}})

    low, high = 0, max(1, chars // 8)  # each filler key takes more than 8 characters
    while low < high:
        mid = (low + high + 1) // 2
        if len(dumped(mid)) <= chars:
            low = mid
        else:
            high = mid - 1
    return dumped(low)


def largest_allowed(name: str) -> str:
    """A SpecServer whose two inline configs are as long as the schema allows (as JSON)."""
    doc = named(example(), name)
    doc["spec"]["modelSource"] = {
        "inline": {
            "targetConfig": padded(load_config("qwen3-8b"), MAX_INLINE_CONFIG_CHARS),
            "draftConfig": padded(load_config("qwen3-8b-eagle3"), MAX_INLINE_CONFIG_CHARS),
        }
    }
    return json.dumps(doc)


def probe_shape(name: str) -> str:
    """The probe's SpecServer: a free-form inline config of 90,000 keys (~1.6 MB)."""
    doc = named(example(), name)
    target = dict(load_config("qwen3-8b"), **{f"k{i:06d}": "v" * 8 for i in range(90_000)})
    doc["spec"]["modelSource"] = {"inline": {"target": target}}
    return json.dumps(doc)


def rss(op: Operator) -> tuple[int, int]:
    """(VmRSS, VmHWM) of the operator process, bytes."""
    assert op.proc is not None
    fields = {}
    with open(f"/proc/{op.proc.pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(rest.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def all_reconciled(kube: KubeHandle, namespace: str, names: list[str]) -> bool:
    """Every one of ``names`` has a status for its generation and a ConfigValid condition."""
    listed = kube.kubectl("get", "sps", "-n", namespace, "-o", "json").stdout
    seen = {}
    for obj in json.loads(listed)["items"]:
        status = obj.get("status") or {}
        current = status.get("observedGeneration") == obj["metadata"]["generation"]
        seen[obj["metadata"]["name"]] = current and condition(obj, "ConfigValid") is not None
    return all(seen.get(name) for name in names)


def test_the_largest_specs_tenants_can_write_keep_the_operator_under_its_limit(
    kube: KubeHandle, namespace: str, own_operator: Callable[..., Operator]
) -> None:
    # An operator of its own: its memory is measured from its start, with only these objects.
    operator = own_operator()
    limit = memory_limit()
    _, started = rss(operator)
    names = []
    for k in range(COUNT):
        for name, body in ((f"large-{k}", largest_allowed(f"large-{k}")),
                           (f"probe-{k}", probe_shape(f"probe-{k}"))):  # fmt: skip
            # --validate=false: the probe wrote through the API, not through kubectl's checks
            kube.kubectl("create", "--validate=false", "-n", namespace, "-f", "-", input=body)
            names.append(name)
    stored = get(kube, "sps", namespace, "probe-0")
    assert stored is not None and stored["spec"]["modelSource"]["inline"] == {"target": {}}
    wait_for(lambda: all_reconciled(kube, namespace, names), 180, "a status on every SpecServer")
    large = get(kube, "sps", namespace, "large-0")
    assert large is not None and condition(large, "ConfigValid")["reason"] != "InvalidSpec"  # type: ignore[index]
    now, peak = rss(operator)
    operator.stop()
    operator.start()  # a restart: the initial LISTs and the first cycle over all of them
    wait_for(lambda: all_reconciled(kube, namespace, names), 120, "statuses after the restart")
    operator.wait_cycles(2)  # two more whole cycles over all of them
    after, restart_peak = rss(operator)
    print(
        f"operator RSS: {started / 2**20:.1f} MiB at start; {now / 2**20:.1f} MiB (peak "
        f"{peak / 2**20:.1f}) with {len(names)} SpecServers; after a restart {after / 2**20:.1f} "
        f"MiB (peak {restart_peak / 2**20:.1f}); limit {limit / 2**20:.0f} MiB"
    )
    assert peak < limit and restart_peak < limit
