"""Issue 37, a third adversarial probe, on the real local control plane: the operator serving
its webhook for the apiserver (the devcluster's webhook client CA), tenants writing through
``kubectl``. Each test is one finding that did not hold, and held now:

1. ``$(VAR)`` in extraArgs/env, expanded by the kubelet after admission, smuggled any refused
   flag past the webhook; now refused, and every rendered container runs what was judged.
2. with ``SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED`` a hand-written review minted a grant.
3. every refused CREATE (409 AlreadyExists) wrote a grant ConfigMap.
4. ``--modelopt-quant`` (and the other paths to the repository's Python) was admitted.
5. (the policy, tests/test_network_exposure.py) and admission that fails open: the webhook
   now answers a readinessProbe, ``/readyz``, over its own TLS.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import ssl
from typing import Any

import pytest
import yaml
from test_operator_e2e import get, wait_for
from test_webhook import example, operator_webhook
from test_webhook_hostile import readers

import webhookpeers
from specserver_advisor.launch import expansion
from specserver_operator.kube import secretgrants
from specserver_operator.webhook.server import READY_PATH
from stack import REPO, KubeHandle
from test_network_exposure import admits

pytestmark = pytest.mark.cluster

SMUGGLE_ARGS = ["--uvicorn-access-log-exclude-prefixes", "$(SMUGGLED)"]
SMUGGLE_ENV = [{"name": "SMUGGLED", "value": "--trust-remote-code"}]


def _doc(name: str, secret: bool = False, **engine: Any) -> dict[str, Any]:
    doc = example(memFractionStatic=None, **engine)
    doc["metadata"]["name"] = name
    doc["spec"]["mode"] = "Enabled"
    if not secret:
        del doc["spec"]["modelSource"]["hfTokenSecretRef"]
    return doc


def _kubectl(
    kube: KubeHandle, namespace: str, verb: str, doc: dict[str, Any], user: str | None = None
) -> Any:
    return kube.kubectl(
        verb,
        *([f"--as={user}"] if user else []),
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(doc),
        check=False,
    )


def _grants(kube: KubeHandle, namespace: str) -> list[dict[str, Any]]:
    done = kube.kubectl(
        "get", "configmaps", "-n", namespace, "-l", secretgrants.SELECTOR, "-o", "json"
    )
    return list(json.loads(done.stdout)["items"])


def test_a_smuggled_reference_is_refused_and_every_container_runs_what_was_judged(
    kube: KubeHandle, namespace: str
) -> None:
    """Finding 1. The probe's attack is refused by the webhook, naming the item; a spec whose
    text holds "$" is admitted and rendered so that the kubelet's expansion (expansion.py,
    Kubernetes' own rules) gives every container, the preflight included, the text as written,
    with nothing a value of one flag could turn into another flag."""
    with operator_webhook(kube, namespace):
        refused = _kubectl(
            kube, namespace, "create", _doc("smuggle", extraArgs=SMUGGLE_ARGS, env=SMUGGLE_ENV)
        )
        assert refused.returncode != 0, "the smuggling SpecServer was admitted"
        assert "spec.engine.extraArgs[1]: '$(SMUGGLED)' is a Kubernetes variable" in refused.stderr
        via_env = _doc("via-env", env=[{"name": "X", "value": "$(SMUGGLED)"}])
        assert "spec.engine.env[0].value" in _kubectl(kube, namespace, "create", via_env).stderr
        literal_args = ["--served-model-name", "cost$5$$(SMUGGLED)", "--api-key", "a$b"]
        literal_env = [*SMUGGLE_ENV, {"name": "PRICE", "value": "$$(SMUGGLED)$"}]
        ok = _kubectl(
            kube, namespace, "create", _doc("literal", extraArgs=literal_args, env=literal_env)
        )
        assert ok.returncode == 0, ok.stderr
        deploy = wait_for(lambda: get(kube, "deploy", namespace, "literal"), 90, "the engine")
        pod = deploy["spec"]["template"]["spec"]
        (engine,) = pod["containers"]
        (preflight,) = pod["initContainers"]
        ran = expansion.container_argv(engine)
        assert ran[:2] == ["sglang", "serve"] and ran[-len(literal_args) :] == literal_args
        checked = expansion.container_argv(preflight)
        assert checked[checked.index("--") + 1 :] == ran[2:]  # the preflight judges the same
        assert "--trust-remote-code" not in ran and "--trust-remote-code" not in checked
        env = expansion.container_env(engine["env"])
        assert env["PRICE"] == "$$(SMUGGLED)$" and env["SMUGGLED"] == "--trust-remote-code"


def test_every_pod_of_a_rendered_group_runs_what_was_judged(
    kube: KubeHandle, namespace: str
) -> None:
    """Finding 1 across nodes: the LeaderWorkerSet the operator stores keeps only its own
    references, which LeaderWorkerSet's environment fills in each pod (the real
    LeaderWorkerSet controller's pods, read back from the apiserver); the spec's "$" text reaches
    every rank and every preflight as written."""
    doc = yaml.safe_load(
        (REPO / "manifests" / "examples" / "deepseek-v3-nextn-h100-2node.yaml").read_text()
    )
    literal = ["--served-model-name", "ds$(NOT)$$x"]
    doc["spec"]["engine"]["extraArgs"] = [*doc["spec"]["engine"].get("extraArgs", []), *literal]
    with operator_webhook(kube, namespace):
        refused = _kubectl(kube, namespace, "create", doc)
        assert "'$(NOT)' is a Kubernetes variable reference" in refused.stderr
        doc["spec"]["engine"]["extraArgs"][-1] = "ds$$x$"
        done = _kubectl(kube, namespace, "create", doc)
        assert done.returncode == 0, done.stderr
        name = doc["metadata"]["name"]
        lws = wait_for(
            lambda: get(
                kube, "leaderworkersets.leaderworkerset.x-k8s.io", namespace, f"{name}-lws"
            ),
            90,
            "the LeaderWorkerSet",
        )
    size = lws["spec"]["leaderWorkerTemplate"]["size"]
    # The real LeaderWorkerSet controller (devcluster runs it) makes the group's pods; no node
    # agent runs here, so they stay Pending, as stored, with LeaderWorkerSet's environment.
    pods = wait_for(lambda: _group_pods(kube, namespace, f"{name}-lws", size), 120, "the pods")
    # Finding 5 on the same group: the engine policy (accepted by this apiserver) lets its pods
    # reach each other on the rendezvous and NCCL ports, and an engine client only the API.
    policy_file = REPO / "manifests" / "networkpolicy-engines.yaml"
    kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", str(policy_file))
    (policy,) = [d for d in yaml.safe_load_all(policy_file.read_text()) if d]
    leader, worker_pod = (
        {"labels": p["metadata"]["labels"], "ports": p["spec"]["containers"][0].get("ports", [])}
        for p in pods
    )
    for src, dst in ((worker_pod, leader), (leader, worker_pod)):
        for port in (20000, 21099, 45123):
            assert admits(policy, src["labels"], {}, True, dst, port), (port, dst["labels"])
    client = {"specserver.io/engine-client": "true"}
    assert not admits(policy, client, {}, True, leader, 20000)
    assert admits(policy, client, {}, True, leader, leader["ports"][0]["containerPort"])
    for worker, full in enumerate(pods):
        pod = full["spec"]
        (engine,) = pod["containers"]
        (preflight,) = pod["initContainers"]
        ran = expansion.container_argv(engine)
        env = expansion.container_env(engine["env"])
        assert ran[ran.index("--node-rank") + 1] == str(worker)
        assert ran[ran.index("--dist-init-addr") + 1] == f"{env['LWS_LEADER_ADDRESS']}:20000"
        assert ran[-2:] == ["--served-model-name", "ds$$x$"]
        checked = expansion.container_argv(preflight)
        assert checked[checked.index("--") + 1 :] == ran[2:]


def _group_pods(kube: KubeHandle, namespace: str, lws: str, size: int) -> list[Any] | None:
    """The group's pods in worker order once all ``size`` exist, else None."""
    out = kube.kubectl(
        "get",
        "pods",
        "-n",
        namespace,
        "-l",
        f"leaderworkerset.sigs.k8s.io/name={lws}",
        "-o",
        "json",
    )
    items = json.loads(out.stdout)["items"]
    if len(items) < size:
        return None
    key = "leaderworkerset.sigs.k8s.io/worker-index"
    return sorted(items, key=lambda p: int(p["metadata"]["labels"][key]))


def test_a_hand_written_review_approves_no_secret_even_when_trusted(
    kube: KubeHandle, namespace: str
) -> None:
    """Finding 2. With SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED=true a review POSTed straight
    to the webhook, claiming system:masters for a SpecServer uid and a future generation, was
    answered and its grant recorded; now it records none (the API server's own review, with
    its client certificate, still does)."""
    readers(kube, namespace)
    kube.kubectl(
        "create", "secret", "generic", "hf-token", "-n", namespace, "--from-literal=token=x"
    )
    with operator_webhook(
        kube,
        namespace,
        SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED="true",
        SPECSERVER_GRANT_NAMESPACE=namespace,
    ) as (_name, port):
        secret = get(kube, "secret", namespace, "webhook-tls")
        assert secret is not None
        ca_pem = base64.b64decode(secret["data"]["ca.crt"]).decode()
        forged = _doc("victim", secret=True)
        forged["metadata"].update(namespace=namespace, uid="0f0f0f0f-forged", generation=9)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "forged",
                "operation": "CREATE",
                "namespace": namespace,
                "name": "victim",
                "object": forged,
                "userInfo": {"username": "mallory", "groups": ["system:masters"]},
            },
        }
        status, _answer, _took = webhookpeers.post(port, review, ca_pem)
        assert status == 200
        assert _grants(kube, namespace) == [], "a hand-written review recorded a grant"
        done = _kubectl(kube, namespace, "create", _doc("mine", secret=True), "alice")
        assert done.returncode == 0, done.stderr
        (grant,) = wait_for(lambda: _grants(kube, namespace), 30, "alice's grant")
        assert grant["data"]["name"] == "mine"


def test_repeated_refused_creates_do_not_multiply_grants(kube: KubeHandle, namespace: str) -> None:
    """Finding 3. The apiserver runs validating admission before it finds the name taken, so
    each repeated CREATE (409 AlreadyExists) wrote a grant ConfigMap (4,377 in 200 s). Now a
    CREATE of a name another object holds writes none, and the first one's grant is the
    only one."""
    readers(kube, namespace)
    kube.kubectl(
        "create", "secret", "generic", "hf-token", "-n", namespace, "--from-literal=token=x"
    )
    with operator_webhook(kube, namespace, SPECSERVER_GRANT_NAMESPACE=namespace):
        doc = _doc("dup", secret=True)
        first = _kubectl(kube, namespace, "create", doc, "alice")
        assert first.returncode == 0, first.stderr
        for _ in range(12):
            again = _kubectl(kube, namespace, "create", copy.deepcopy(doc), "alice")
            assert again.returncode != 0 and "AlreadyExists" in again.stderr, again.stderr
        grants = _grants(kube, namespace)
        assert len(grants) == 1, f"{len(grants)} grant ConfigMaps for one SpecServer"
        stored = get(kube, "sps", namespace, "dup")
        assert stored is not None
        assert grants[0]["data"]["uid"] == stored["metadata"]["uid"]


@pytest.mark.parametrize(
    "extra",
    [
        ["--modelopt-quant", "fp8"],
        ["--modelopt-export-path", "/tmp/export"],
        ["--modelopt-checkpoint-restore-path=/models/x"],
        ["--quantization", "modelopt_fp4"],
        ["--quantization=modelopt"],
        ["--model-impl", "transformers"],
    ],
)
def test_every_path_to_repository_code_is_refused_at_admission(
    kube: KubeHandle, namespace: str, extra: list[str]
) -> None:
    """Finding 4: SGLang's ModelOpt loader (and the Transformers backend) run the model
    repository's Python with trust_remote_code=True whatever the launch says
    (tests/oracle/test_remote_code_paths.py finds every such call in SGLang's source)."""
    with operator_webhook(kube, namespace):
        done = _kubectl(kube, namespace, "apply", _doc("modelopt", extraArgs=extra), None)
        assert done.returncode != 0, f"{extra} was admitted"
        assert "SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS" in done.stderr


def test_the_webhook_is_ready_only_while_it_answers(kube: KubeHandle, namespace: str) -> None:
    """Finding 5's availability: with failurePolicy Fail (manifests/webhook.yaml) the webhook
    Service must send reviews only to a replica that answers them; the readinessProbe
    (manifests/operator.yaml) asks the webhook's own TLS server, which answers 200 while it
    can review and nothing at all once it is gone."""
    with operator_webhook(kube, namespace) as (_name, port):
        secret = get(kube, "secret", namespace, "webhook-tls")
        assert secret is not None
        ca_pem = base64.b64decode(secret["data"]["ca.crt"]).decode()

        def ready() -> int:
            ctx = ssl.create_default_context(cadata=ca_pem)
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            try:
                conn.request("GET", READY_PATH)
                return conn.getresponse().status
            finally:
                conn.close()

        assert ready() == 200
    with pytest.raises(OSError):
        ready()
