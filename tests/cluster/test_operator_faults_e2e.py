"""Operator core on the real stack (apiserver + controller-manager, the operator as a process):
one tenant's malformed or hostile SpecServer neither stops nor slows the others, every accepted
spec gets a status, hand edits of children are repaired, and of two operators one leads. The
shared operator (tests/cluster/conftest.py) allows this module's tarpit and dripping endpoint."""

from __future__ import annotations

import copy
import json
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_operator_e2e import apply, condition, engine_args, example, get

from loopbacktcp import Drip, Tarpit
from stack import (
    DRIP_PORT,
    TARPIT_PORT,
    KubeHandle,
    Operator,
    counted,
    events,
    http_ok,
    load_config,
    wait_for,
)

pytestmark = pytest.mark.cluster


def wait_condition(
    kube: KubeHandle,
    namespace: str,
    name: str,
    type_: str,
    ok: Callable[[dict[str, Any]], bool],
    timeout: float,
    what: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Wait until SpecServer ``name`` has a ``type_`` condition that ``ok`` accepts; both."""
    return wait_for(  # type: ignore[no-any-return]
        lambda: (
            (o := get(kube, "sps", namespace, name))
            and (c := condition(o, type_))
            and ok(c)
            and (o, c)
        ),
        timeout,
        what,
    )


def named(doc: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["metadata"]["name"] = name
    return out


def recreated_after_delete(kube: KubeHandle, ns: str, name: str, timeout: float) -> None:
    first = wait_for(lambda: get(kube, "deployment", ns, name), 60, f"Deployment {name}")
    kube.kubectl("delete", "deployment", name, "-n", ns, "--wait=true")
    wait_for(
        lambda: (
            (d := get(kube, "deployment", ns, name))
            and d["metadata"]["uid"] != first["metadata"]["uid"]
        ),
        timeout,
        f"Deployment {name} re-created by the cycle",
    )


def test_a_malformed_specserver_does_not_stop_another(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    bad = named(example(), "malformed")
    target = dict(load_config("qwen3-8b"), hidden_size="big")
    bad["spec"]["modelSource"] = {
        "inline": {
            "targetConfig": json.dumps(target),
            "draftConfig": json.dumps(load_config("qwen3-8b-eagle3")),
        }
    }
    # Issue 31: a value of the wrong type where the model shape is read (a KeyError before).
    wrong_type = named(bad, "malformed-arch")
    wrong_type["spec"]["modelSource"]["inline"]["targetConfig"] = json.dumps(
        {**load_config("qwen3-8b"), "architectures": {"Qwen3ForCausalLM": 1}}
    )
    apply(kube, namespace, bad)
    apply(kube, namespace, wrong_type)
    apply(kube, namespace, example())
    recreated_after_delete(kube, namespace, "qwen3-8b", 30)
    for name, key, says in [
        ("malformed", "hidden_size", "big"),
        ("malformed-arch", "architectures", "expected a list of strings"),
    ]:
        sps, cv = wait_condition(
            kube,
            namespace,
            name,
            "ConfigValid",
            lambda c: c["status"] == "False",
            30,
            f"a status on the malformed SpecServer {name}",
        )
        assert cv["reason"] == "InvalidModelConfig", cv
        assert key in cv["message"] and says in cv["message"], cv["message"]
        assert sps["status"]["observedGeneration"] == sps["metadata"]["generation"]
        assert get(kube, "deployment", namespace, name) is None
    assert operator.metric("specserver_cycles_total") > 0


HOSTILE: list[tuple[str, str, Any, str]] = [
    # (name, spec path, value, field the condition must name)
    ("cpu-lots", "resources.cpu", "lots", "spec.resources.cpu"),
    ("env-bad-name", "engine.env", [{"name": "FOO=BAR", "value": "x"}], "spec.engine.env[0]"),
    ("env-hf-token", "engine.env", [{"name": "HF_TOKEN", "value": "x"}], "spec.engine.env[0]"),
    ("gpu-name", "resources.gpuResourceName", "not a name", "gpuResourceName"),
    ("node-key", "resources.nodeSelector", {"bad key!": "x"}, "nodeSelector"),
    ("mount-shm", "modelSource.volume", {"hostPath": "/m", "mountPath": "/dev/shm"}, "mountPath"),
    ("gpus-huge", "resources.gpus", 100000, "spec.resources.gpus"),
    # was an AssertionError in the argv builder: ReconcileFailed instead of ConfigValid=False
    ("kv-dtype", "speculative.draftKvCacheDtype", "zzz", "spec.speculative.draftKvCacheDtype"),
]
#: Structural rules (specserver_advisor.structural): the API server's own CEL rules refuse these,
#: naming the field, before the operator ever sees them.
REFUSED: list[tuple[str, str, Any, str]] = [
    ("replicas-huge", "replicas", 2**40, "spec.replicas"),
    ("startup-huge", "engine.startupTimeoutSeconds", 2**62, "spec.engine.startupTimeoutSeconds"),
    ("steps-huge", "speculative.numSteps", 10**9, "spec.speculative.numSteps"),
    ("tokens-huge", "engine.expectedInputTokens", 10**15, "spec.engine.expectedInputTokens"),
]
ODD_NAMES = ["a" * 70, "8b-model", "qwen3.8b"]


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = doc["spec"]
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return doc


def test_every_accepted_hostile_spec_gets_a_status(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    log_start = operator.log_size()  # the shared operator's log: this test's part of it
    base = example()
    base["spec"].pop("modelSource")
    for name, path, value, _ in HOSTILE:
        apply(kube, namespace, _set(named(base, name), path, value))
    for name, path, value, field in REFUSED:
        doc = _set(named(base, name), path, value)
        done = kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc), check=False)
        assert done.returncode != 0 and f"{field}: " in done.stderr, (name, done.stderr)
    for name in ODD_NAMES:
        apply(kube, namespace, named(base, name))

    def settled(name: str) -> dict[str, Any] | None:
        o = get(kube, "sps", namespace, name)
        st = (o or {}).get("status") or {}
        done = o and st.get("observedGeneration") == o["metadata"]["generation"]
        return o if done and condition(o, "ConfigValid") else None

    for name, _, _, field in HOSTILE:
        sps = wait_for(lambda n=name: settled(n), 30, f"a status on {name}")
        cv = condition(sps, "ConfigValid")
        assert cv is not None and cv["status"] == "False", (name, cv)
        assert cv["reason"] == "InvalidSpec" and field in cv["message"], (name, cv)
        assert get(kube, "deployment", namespace, name) is None
    deployments = json.loads(
        kube.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout
    )["items"]
    by_owner = {d["metadata"]["ownerReferences"][0]["name"]: d for d in deployments}
    for name in ODD_NAMES:
        sps = wait_for(lambda n=name: settled(n), 30, f"a status on {name}")
        assert condition(sps, "ConfigValid")["status"] == "True"  # type: ignore[index]
        dep = by_owner.get(name) or wait_for(
            lambda n=name: next(
                (
                    d
                    for d in json.loads(
                        kube.kubectl("get", "deployments", "-n", namespace, "-o", "json").stdout
                    )["items"]
                    if d["metadata"]["ownerReferences"][0]["name"] == n
                ),
                None,
            ),
            30,
            f"the Deployment of {name}",
        )
        child = dep["metadata"]["name"]
        assert len(child) <= 59 and child[0].isalpha() and "." not in child
        assert get(kube, "service", namespace, child) is not None

    def warned() -> set[str]:
        found = events(kube, namespace)
        return {e["involvedObject"]["name"] for e in found if e["type"] == "Warning"}

    # A ConfigValid=False flip's Warning is posted after the status patch that made it
    # (loop/cycle.py's _report), so it follows the status waited for above, not with it.
    hostile = {name for name, *_ in HOSTILE}
    wait_for(lambda: hostile <= warned(), 30, "a Warning event on every hostile SpecServer")
    log = operator.log_text(since=log_start)
    assert log.count("Traceback") <= len(HOSTILE)  # at most once per object, not per retry


def test_a_child_the_api_server_refuses_is_a_condition_not_a_retry_storm(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    doc = example()
    doc["spec"].pop("modelSource")
    # Only NoExecute tolerations may carry tolerationSeconds: the API server refuses the pod
    # template (422), which no schema of ours knows about.
    doc["spec"]["resources"]["tolerations"] = [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 10}
    ]
    apply(kube, namespace, doc)
    _, ready = wait_condition(
        kube,
        namespace,
        "qwen3-8b",
        "Ready",
        lambda c: c["reason"] == "ReconcileFailed",
        30,
        "Ready=False ReconcileFailed",
    )
    assert ready["status"] == "False" and "422" in ready["message"]
    operator.wait_cycles(4)  # several cycles: backoff, not a retry per cycle
    failed = events(kube, namespace, "ReconcileFailed")
    assert len(failed) == 1 and failed[0]["type"] == "Warning"
    assert get(kube, "deployment", namespace, "qwen3-8b") is None


def test_hand_edits_of_owned_fields_are_repaired(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, example())
    dep = wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    args = engine_args(dep)
    patch = [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/args",
            "value": [*args, "--max-running-requests", "4096"],
        }
    ]
    kube.kubectl(
        "patch", "deployment", "qwen3-8b", "-n", namespace, "--type=json", "-p", json.dumps(patch)
    )
    wait_for(
        lambda: engine_args(get(kube, "deployment", namespace, "qwen3-8b") or dep) == args,
        30,
        "the args restored",
    )
    kube.kubectl("scale", "deployment", "qwen3-8b", "-n", namespace, "--replicas=0")
    wait_for(
        lambda: (get(kube, "deployment", namespace, "qwen3-8b") or {})["spec"]["replicas"] == 1,
        30,
        "the replicas restored",
    )
    assert events(kube, namespace, "DriftRepaired")


def test_a_tarpit_prometheus_holds_no_other_specserver(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    pit = Tarpit(TARPIT_PORT)
    try:
        slow = named(example(), "tarpit-metrics")
        slow["spec"]["autoSpeculation"] = {"prometheusUrl": pit.url, "evaluationIntervalSeconds": 5}
        apply(kube, namespace, slow)
        apply(kube, namespace, example())
        wait_for(lambda: pit.conns, 30, "the operator to call the tarpit")
        recreated_after_delete(kube, namespace, "qwen3-8b", 20)
        assert http_ok(f"http://127.0.0.1:{operator.port}/healthz")
    finally:
        pit.close()


def test_a_dripping_hf_endpoint_holds_no_other_specserver(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    drip = Drip(1.0, DRIP_PORT)
    try:
        slow = named(example(), "drip-config")
        slow["spec"]["model"] = {"path": "org/not-bundled-model"}
        slow["spec"]["modelSource"] = {"hfEndpoint": drip.url}
        apply(kube, namespace, slow)
        apply(kube, namespace, example())
        wait_for(lambda: drip.conns, 30, "the operator to fetch from the dripping endpoint")
        recreated_after_delete(kube, namespace, "qwen3-8b", 20)
        assert http_ok(f"http://127.0.0.1:{operator.port}/healthz")
        _, cv = wait_condition(
            kube,
            namespace,
            "drip-config",
            "ConfigValid",
            lambda c: c["status"] != "True",
            60,
            "a ConfigValid condition on the dripping SpecServer",
        )
        assert "config" in cv["message"].lower(), cv
    finally:
        drip.close()


def _series(operator: Operator, namespace: str, name: str) -> list[str]:
    url = f"http://127.0.0.1:{operator.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    mark = f'namespace="{namespace}",specserver="{name}"'
    return [line for line in text.splitlines() if mark in line]


def test_metric_series_go_with_their_specserver_on_the_real_stack(
    kube: KubeHandle, namespace: str, operator: Operator
) -> None:
    apply(kube, namespace, named(example(), "ephemeral"))
    wait_for(lambda: _series(operator, namespace, "ephemeral"), 30, "the SpecServer's series")
    kube.kubectl("delete", "sps", "ephemeral", "-n", namespace, "--wait=true")
    wait_for(
        lambda: not _series(operator, namespace, "ephemeral"),
        30,
        "the series removed with their SpecServer",
    )


def test_of_two_operators_one_leads_and_the_other_takes_over(
    kube: KubeHandle, namespace: str, operator: Operator, own_operator: Callable[..., Operator]
) -> None:
    apply(kube, namespace, example())
    wait_for(lambda: get(kube, "deployment", namespace, "qwen3-8b"), 60, "Deployment")
    standby = own_operator()
    try:
        lease = get(kube, "lease", "default", "specserver-operator")
        assert lease is not None
        holder = lease["spec"]["holderIdentity"]
        assert holder and holder.split("-")[-2] == str(operator.proc.pid)  # type: ignore[union-attr]
        recreated_after_delete(kube, namespace, "qwen3-8b", 30)
        # A spec change reaches both replicas' watches: only the leader acts on it, and kopf
        # itself writes nothing to the SpecServer (no diff-base or progress annotation).
        apply(kube, namespace, example(maxRunningRequests=24))
        wait_for(
            lambda: (
                (o := get(kube, "sps", namespace, "qwen3-8b"))
                and (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"]
            ),
            30,
            "the leader's pass over the new generation",
        )
        operator.wait_cycles(2)  # two more of the leader's cycles (the standby runs none)
        counted(lambda: standby.metric("specserver_election_rounds_total"), 2, 60, "standby rounds")
        sps = get(kube, "sps", namespace, "qwen3-8b")
        assert sps is not None
        managers = {m["manager"] for m in sps["metadata"].get("managedFields") or []}
        assert not any(m.startswith("kopf") for m in managers), managers
        assert not [
            k
            for k in sps["metadata"].get("annotations") or {}
            if "kopf" in k or "last-handled" in k
        ]
        assert standby.metric("specserver_api_writes_total") == 0
        assert standby.metric("specserver_cycles_total") == 0
        operator.stop()
        recreated_after_delete(kube, namespace, "qwen3-8b", 30)  # the standby took over
        # The counter goes up when the apiserver's answer is read, just after the object is
        # visible to the test's own read.
        wait_for(
            lambda: standby.metric("specserver_api_writes_total") > 0, 10, "the standby's writes"
        )
    finally:
        standby.stop()  # the shared operator, stopped above, starts again for the next test


_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
NAMES = st.lists(_LABEL, min_size=1, max_size=4).map(".".join).filter(lambda n: len(n) <= 253)
ANY_TEXT = st.text(st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=30)
HOSTILE_SPEC = st.fixed_dictionaries(
    {},
    optional={
        "replicas": st.integers(0, 2**62),
        "resources.cpu": st.one_of(ANY_TEXT, st.sampled_from(["1", "500m", "2.5"])),
        "resources.memory": st.one_of(ANY_TEXT, st.sampled_from(["64Gi", "1e9"])),
        "resources.gpus": st.integers(1, 2**40),
        "resources.gpuResourceName": st.one_of(ANY_TEXT, st.just("nvidia.com/gpu")),
        "resources.nodeSelector": st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=2),
        "engine.env": st.lists(
            st.fixed_dictionaries({"name": ANY_TEXT.filter(bool), "value": ANY_TEXT}), max_size=3
        ),
        "engine.startupTimeoutSeconds": st.integers(30, 2**62),
        "engine.expectedInputTokens": st.integers(1, 10**15),
        "engine.maxRunningRequests": st.integers(1, 2**40),
        "speculative.numSteps": st.integers(1, 10**9),
        "modelSource.volume": st.fixed_dictionaries(
            {"hostPath": st.just("/m"), "mountPath": st.one_of(ANY_TEXT, st.just("/dev/shm"))}
        ),
        "modelSource.inline": st.fixed_dictionaries(
            {
                "targetConfig": st.fixed_dictionaries(
                    {
                        "architectures": st.just(["Qwen3ForCausalLM"]),
                        "hidden_size": st.one_of(st.integers(-5, 2**40), ANY_TEXT),
                        "num_attention_heads": st.integers(0, 64),
                        "num_hidden_layers": st.integers(0, 64),
                        "vocab_size": st.integers(0, 10**6),
                    }
                ).map(json.dumps)
            }
        ),
    },
)


@settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    batch=st.lists(st.tuples(NAMES, HOSTILE_SPEC), min_size=4, max_size=6, unique_by=lambda t: t[0])
)
def test_fuzz_every_accepted_specserver_gets_a_status_and_a_canary_keeps_going(
    kube: KubeHandle, operator: Operator, batch: list[tuple[str, dict[str, Any]]]
) -> None:
    ns = f"fuzz-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", ns)
    try:
        base = example()
        base["spec"].pop("modelSource")
        apply(kube, ns, named(base, "canary"))
        accepted = []
        for name, fields in batch:
            doc = named(base, name)
            for path, value in fields.items():
                _set(doc, path, value)
            done = kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(doc), check=False)
            if done.returncode == 0:
                accepted.append(name)
        for name in accepted:
            wait_for(
                lambda n=name: (
                    (o := get(kube, "sps", ns, n))
                    and (o.get("status") or {}).get("observedGeneration")
                    == o["metadata"]["generation"]
                    and condition(o, "Ready")
                ),
                40,
                f"a status on {name!r}",
            )
        recreated_after_delete(kube, ns, "canary", 30)
    finally:
        kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)
