"""The webhook against hostile peers and hostile input, on the real local apiserver.

The operator serves the webhook (failurePolicy Fail here, so an answer that does not come in
time fails the test instead of being ignored), trusting the devcluster apiserver's webhook
client CA (scripts/devcluster.py). Issue 25: an idle TCP connection silenced the webhook
(finding 3), bad input made it fail open (5), a hand-written review answered RBAC questions
for anyone (6), and model configs from the admin's HF endpoint were never checked at apply
time (bullet 2); a crowd of idle connections past the cap shut out the apiserver.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from typing import Any

import pytest
from test_operator_e2e import get
from test_webhook import dry_run, example, operator_webhook

import loopbackhttp
import webhookpeers
from specserver_operator.webhook.server import READ_DEADLINE_S
from stack import REPO, KubeHandle, load_config, wait_for

pytestmark = pytest.mark.cluster

#: The apiserver gives the webhook 10 s (webhook_config): an answer that does not come within
#: them is the apiserver's own "failed calling webhook" (failurePolicy Fail) or an admission
#: (Ignore), which the tests assert against; their own clocks are only backstops against hangs.
TIMEOUT_S = 10.0


def readers(kube: KubeHandle, namespace: str) -> None:
    """alice may get Secret hf-token, bob may not; both may write SpecServers."""
    kube.kubectl(
        "create", "role", "specservers", "-n", namespace, "--verb=*",
        "--resource=specservers.specserver.io",
    )  # fmt: skip
    kube.kubectl(
        "create", "rolebinding", "specservers", "-n", namespace, "--role=specservers",
        "--user=alice", "--user=bob",
    )  # fmt: skip
    kube.kubectl(
        "create", "role", "hf-token-reader", "-n", namespace, "--verb=get",
        "--resource=secrets", "--resource-name=hf-token",
    )  # fmt: skip
    kube.kubectl(
        "create", "rolebinding", "hf-token-reader", "-n", namespace, "--role=hf-token-reader",
        "--user=alice",
    )  # fmt: skip


def timed(kube: KubeHandle, namespace: str, doc: dict[str, Any], user: str | None = None) -> Any:
    """A server dry run of ``doc`` that the webhook answered within the apiserver's deadline
    (TIMEOUT_S): not a failed call (kubectl's own deadline is the backstop)."""
    done = dry_run(kube, namespace, doc, user)
    assert "failed calling webhook" not in done.stderr, done.stderr
    return done


def test_idle_and_dripping_peers_do_not_silence_the_webhook(
    kube: KubeHandle, namespace: str
) -> None:
    """40 idle connections, a dripped TLS handshake and a dripped request stay open on the
    webhook port while the apiserver's reviews are answered: bob, who may not read hf-token,
    is refused by the webhook itself (not by a timeout), alice is admitted, an invalid spec is
    refused with its SPEC codes; the stalled peers are cut off at the read deadline."""
    readers(kube, namespace)
    with operator_webhook(kube, namespace) as (_name, port):
        ca = kube.kubectl(
            "get", "secret", "webhook-tls", "-n", namespace, "-o",
            "jsonpath={.data.ca\\.crt}",
        ).stdout  # fmt: skip
        ca_pem = base64.b64decode(ca).decode()
        idle = webhookpeers.idle(port, 40)
        drips = [webhookpeers.Dripper(port, 0.2), webhookpeers.Dripper(port, 0.2, ca_pem)]
        try:
            doc = example(memFractionStatic=None)
            for _ in range(2):
                assert timed(kube, namespace, doc, "alice").returncode == 0
                refused = timed(kube, namespace, doc, "bob")
                assert "denied the request" in refused.stderr, refused.stderr
                assert "SecretNotReadable" in refused.stderr and "bob may not get" in refused.stderr
                bad = timed(kube, namespace, example(memFractionStatic=0.5, contextLength=100_000))
                assert "SPEC002" in bad.stderr and "SPEC016" in bad.stderr, bad.stderr
            wait_for(
                lambda: all(d.closed_after is not None for d in drips),
                60,
                "the webhook to cut the dripping peers off",
            )
            for drip in drips:
                # At the read deadline: undisturbed, a dripper would run for 200 s.
                assert drip.closed_after is not None and drip.closed_after < 4 * READ_DEADLINE_S
        finally:
            for drip in drips:
                drip.close()
            for sock in idle:
                sock.close()


def test_a_crowd_of_idle_connections_does_not_block_specserver_writes(
    kube: KubeHandle, namespace: str
) -> None:
    """With failurePolicy Fail, one peer (127.0.0.2) holding 600 idle connections to the webhook
    port, more than its 512 cap, made the apiserver's connection close at accept, so every
    SpecServer write failed ("failed calling webhook"). Now the apiserver's reviews are
    answered by the webhook itself while the crowd stays: alice admitted, bob refused."""
    readers(kube, namespace)
    with operator_webhook(kube, namespace) as (_name, port):
        crowd = webhookpeers.idle(port, 600, source="127.0.0.2")
        try:
            doc = example(memFractionStatic=None)
            for _ in range(2):
                assert timed(kube, namespace, doc, "alice").returncode == 0
                refused = timed(kube, namespace, doc, "bob")
                assert "SecretNotReadable" in refused.stderr and "bob may not get" in refused.stderr
                crowd += webhookpeers.idle(port, 100, source="127.0.0.2")  # re-opened
        finally:
            for sock in crowd:
                sock.close()


def test_a_stored_specserver_the_webhook_now_refuses_can_still_be_labelled_and_finalized(
    kube: KubeHandle, namespace: str
) -> None:
    """A SpecServer stored before the webhook was there (hostPath, which the pod policy
    refuses) could not be labelled, and a finalizer on it could never be removed, so its
    delete never ended: every UPDATE was reviewed as a create. Metadata-only updates are
    admitted; a spec change is still refused."""
    kube.kubectl("apply", "-f", str(REPO / "crds"))
    doc = example(memFractionStatic=None)
    doc["spec"]["modelSource"]["volume"] = {"hostPath": "/data/models", "mountPath": "/models"}
    doc["metadata"]["finalizers"] = ["example.com/hold"]
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    name = doc["metadata"]["name"]
    with operator_webhook(kube, namespace):
        refused = kube.kubectl(
            "patch", "specserver", name, "-n", namespace, "--type=merge",
            "-p", '{"spec": {"replicas": 2}}', check=False,
        )  # fmt: skip
        assert "denied the request" in refused.stderr and "hostPath" in refused.stderr
        kube.kubectl("label", "specserver", name, "-n", namespace, "team=a")
        kube.kubectl("delete", "specserver", name, "-n", namespace, "--wait=false")
        kube.kubectl(
            "patch", "specserver", name, "-n", namespace, "--type=json",
            "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]',
        )  # fmt: skip
        assert get(kube, "specserver", namespace, name) is None


def test_one_tenants_costly_specservers_do_not_block_another_namespaces_writes(
    kube: KubeHandle, namespace: str
) -> None:
    """Four dry-run creates at a time of a ~1.2 MB SpecServer (inline.target with 400,000
    empty objects: seconds of CPU per review) in one namespace held every webhook worker past
    its deadline, and another namespace's SpecServer was refused "the webhook is busy"; the
    reviews refused while still queued had no uid ("failed calling webhook": admitted under
    failurePolicy Ignore). Now the other namespace's write is answered by the webhook in time
    while the flood goes on, and every refusal carries its review's uid."""
    other = f"{namespace[:50]}-b"
    kube.kubectl("create", "namespace", other)
    try:
        kube.kubectl("label", "namespace", other, f"specserver-webhook-test={namespace}")
        heavy = example(memFractionStatic=None)
        del heavy["spec"]["modelSource"]["hfTokenSecretRef"]
        target = load_config("qwen3-8b")
        target["x"] = [{}] * 60_000  # the inline config text near its 262,144-character limit
        heavy["spec"]["modelSource"]["inline"] = {"targetConfig": json.dumps(target)}
        body = json.dumps(heavy)
        light = example(memFractionStatic=None)
        del light["spec"]["modelSource"]["hfTokenSecretRef"]
        with operator_webhook(kube, namespace):
            stop = threading.Event()

            answers: list[str] = []

            def flood() -> None:
                while not stop.is_set():
                    done = kube.kubectl(
                        "create", "--dry-run=server", "-n", namespace, "-f", "-",
                        input=body, check=False,
                    )  # fmt: skip
                    answers.append(done.stderr)

            floods = [threading.Thread(target=flood, daemon=True) for _ in range(4)]
            for t in floods:
                t.start()
            try:
                # The flood is on once each of its four writers had a review answered.
                wait_for(lambda: len(answers) >= len(floods), 120, "the flood's first answers")
                for _ in range(2):
                    done = timed(kube, other, light)
                    assert done.returncode == 0, done.stderr
            finally:
                stop.set()
                for t in floods:
                    t.join(30)
            # The flood's own reviews that the webhook could not get to are refused by it,
            # carrying their uid: an answer without it was a failed call, which failurePolicy
            # Ignore admits unchecked (a Secret name included).
            assert answers and not [a for a in answers if "failed calling webhook" in a], answers
    finally:
        kube.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_a_review_body_the_webhook_cannot_read_is_refused_with_its_uid_under_ignore(
    kube: KubeHandle, namespace: str
) -> None:
    """With failurePolicy Ignore (as in manifests/), bob, who may not read hf-token, named it
    in a SpecServer whose inline target was nested 80 levels deep: the webhook refused the body
    as too deep with uid "", the apiserver took that for a failed call, and Ignore admitted
    the SpecServer, Secret name and all. The CRD now has no free-form node, so the depth sits
    in the inline config's text (the body-level refusal with its uid: test_webhook_probe.py);
    the refusal carries the uid and stands."""
    readers(kube, namespace)
    deep: Any = 1
    for _ in range(80):
        deep = {"a": deep}
    doc = example(memFractionStatic=None)
    target = load_config("qwen3-8b")
    target["x"] = deep
    doc["spec"]["modelSource"]["inline"] = {"targetConfig": json.dumps(target)}
    with operator_webhook(kube, namespace) as (name, _port):
        kube.kubectl(
            "patch", "validatingwebhookconfiguration", name, "--type=json",
            "-p", '[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]',
        )  # fmt: skip
        refused = timed(kube, namespace, doc, "bob")
        assert refused.returncode != 0, "admitted: the webhook's answer was ignored"
        assert "denied the request" in refused.stderr and "nested more than" in refused.stderr


def test_a_hand_written_review_learns_nothing_about_secret_access(
    kube: KubeHandle, namespace: str
) -> None:
    """Finding 6: POSTed straight to the webhook without the apiserver's client certificate,
    a review gets the same refusal whichever user it names; the apiserver's own reviews of the
    same spec tell alice and bob apart."""
    readers(kube, namespace)
    with operator_webhook(kube, namespace) as (_name, port):
        secret = get(kube, "secret", namespace, "webhook-tls")
        assert secret is not None
        ca_pem = base64.b64decode(secret["data"]["ca.crt"]).decode()
        answers = {}
        for user in ("alice", "bob"):
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": "forged",
                    "operation": "CREATE",
                    "namespace": namespace,
                    "object": example(memFractionStatic=None),
                    "userInfo": {"username": user},
                },
            }
            status, answer, _took = webhookpeers.post(port, review, ca_pem)
            assert status == 200
            answers[user] = answer["response"]
        assert answers["alice"] == answers["bob"]
        assert answers["alice"]["allowed"] is False
        assert "did not come from the API server" in answers["alice"]["status"]["message"]
        doc = example(memFractionStatic=None)
        assert timed(kube, namespace, doc, "alice").returncode == 0
        assert "bob may not get" in timed(kube, namespace, doc, "bob").stderr


@pytest.fixture
def hub() -> Any:
    """A loopback HF endpoint serving ``configs[repo]`` as ``{repo}/resolve/main/config.json``
    (the body as given when it is bytes)."""
    configs: dict[str, Any] = {}

    def respond(path: str, _headers: dict[str, str]) -> loopbackhttp.Answer:
        repo, sep, _rest = path.lstrip("/").partition("/resolve/")
        if not sep or repo not in configs:
            return 404, {}, b""
        body = configs[repo]
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return 200, {"Content-Type": "application/json"}, data

    server, url = loopbackhttp.serve(respond)
    try:
        yield url, configs
    finally:
        loopbackhttp.stop(server)


def _from_hub(target: str, draft: str) -> dict[str, Any]:
    doc = example(memFractionStatic=None)
    doc["spec"]["model"] = {"path": target}
    doc["spec"]["draft"] = {"path": draft}
    del doc["spec"]["modelSource"]["hfTokenSecretRef"]
    return doc


def test_model_configs_from_the_admins_endpoint_are_checked_at_create(
    kube: KubeHandle, namespace: str, hub: Any
) -> None:
    """A draft shorter than its target (configs only on the admin's HF endpoint) is refused at
    ``kubectl create``; configs that made the advisor raise (finding 5) are refused, each
    answered within the timeout; the same pair with a long enough draft is admitted."""
    url, configs = hub
    target, draft = load_config("qwen3-8b"), load_config("qwen3-8b-eagle3")
    configs["acme/target"] = target
    configs["acme/draft"] = draft
    configs["acme/short-draft"] = dict(draft, max_position_embeddings=2048)
    for field, value in (
        ("num_attention_heads", 0),
        ("quantization_config", "fp8"),
        ("rope_scaling", [1]),
        ("rope_scaling", {"rope_type": "yarn", "factor": "x"}),
    ):
        configs[f"acme/bad-{field}-{type(value).__name__}"] = dict(target, **{field: value})
    with operator_webhook(kube, namespace, SPECSERVER_HF_ENDPOINT=url):
        assert timed(kube, namespace, _from_hub("acme/target", "acme/draft")).returncode == 0
        short = _from_hub("acme/target", "acme/short-draft")
        created = kube.kubectl(
            "create", "-n", namespace, "-f", "-", input=json.dumps(short), check=False
        )
        assert created.returncode != 0 and "denied the request" in created.stderr
        assert "SPEC002: the draft supports 2048 tokens" in created.stderr, created.stderr
        assert get(kube, "sps", namespace, short["metadata"]["name"]) is None
        for repo in [r for r in configs if r.startswith("acme/bad-")]:
            refused = timed(kube, namespace, _from_hub(repo, "acme/draft"))
            assert refused.returncode != 0 and "denied the request" in refused.stderr, repo
            assert "Traceback" not in refused.stderr


def test_generated_bad_specservers_are_refused_by_the_webhook_in_time(
    kube: KubeHandle, namespace: str
) -> None:
    """Every field given a value of the wrong type, out of range, huge or odd: each is refused
    (by the schema or the webhook, never by a webhook failure) within the timeout, and the
    webhook still admits a valid SpecServer afterwards."""
    base = example(memFractionStatic=None)
    del base["spec"]["modelSource"]["hfTokenSecretRef"]
    cases: list[tuple[str, Any]] = [
        ("speculative.draftKvCacheDtype", "zzz"),
        ("speculative.numSteps", 10**9),
        ("engine.env", [{"name": "HF_TOKEN", "value": "x"}]),
        ("engine.extraArgs", ["--json-model-override-args", "{}"]),
        ("engine.extraArgs", ["x" * 5000]),
        ("engine.image", "a b"),
        ("resources.tolerations", [{"operator": "Exists"}]),
        ("resources.nodeSelector", {"bad key!": "v"}),
        ("resources.gpus", 10**6),
        ("modelSource.volume", {"hostPath": "/data", "mountPath": "/models"}),
        ("modelSource.volume", {"persistentVolumeClaimName": "c", "mountPath": "/proc/x"}),
        ("engine.contextLength", 10**12),
        ("replicas", 2**31),
    ]
    with operator_webhook(kube, namespace):
        for path, value in cases:
            doc = copy.deepcopy(base)
            node = doc["spec"]
            *parents, last = path.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            node[last] = value
            done = timed(kube, namespace, doc)
            assert done.returncode != 0, f"{path}={value!r} was admitted"
            assert "Traceback" not in done.stderr
        assert timed(kube, namespace, base).returncode == 0
