"""Security rules without a cluster (issue 13; docs/security.md): outbound GETs against real
loopback listeners, admin allow-lists, names in API paths and in the schema.
tests/cluster/test_tenant_isolation.py runs the same rules on the real control plane as a
tenant; tests/operator/core/test_pod_security.py holds the engine pods."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from loopbackhttp import Answer, serve, stop
from specserver_advisor.loaders import outbound
from specserver_advisor.loaders.configchain import ConfigSourceError
from specserver_advisor.loaders.configs import ConfigNotFoundError, fetch_from_endpoint
from specserver_advisor.models import SpecServer
from specserver_operator.kube.errors import InvalidNameError
from specserver_operator.kube.paths import object_path
from specserver_operator.reconcile.configsource import HfSettings, from_endpoint
from specserver_operator.reconcile.signals import SignalCache, url_refusal
from stack import REPO

SECRET_BODY = b"INTERNAL-ONLY: db_password=hunter2-do-not-leak"
EXAMPLE = REPO / "manifests" / "examples" / "qwen3-8b-eagle3-l4.yaml"


class Listener:
    """A loopback HTTP server that records every request and answers by path prefix."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.server, self.url = serve(self.answer, reason="Forbidden: " + SECRET_BODY.decode())

    def answer(self, path: str, headers: dict[str, str]) -> Answer:
        self.requests.append((path, headers))
        return next(
            (v for k, v in self.routes.items() if path.startswith(k)), (404, {}, b"nothing here")
        )

    def close(self) -> None:
        stop(self.server)


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    a, b = Listener(), Listener()
    yield a, b
    a.close()
    b.close()


def test_only_http_urls_are_fetched() -> None:
    for url in ("file:///etc/passwd", "gopher://127.0.0.1/x", "ftp://127.0.0.1/x"):
        with pytest.raises(outbound.OutboundError, match="only http and https"):
            outbound.get(url)
    with pytest.raises(outbound.OutboundError, match="credentials in the URL"):
        outbound.get("http://user:pw@127.0.0.1:1/x")


def test_answer_bodies_and_reason_phrases_never_reach_a_message(
    listeners: tuple[Listener, Listener],
) -> None:
    a, _ = listeners
    a.routes["/deny"] = (403, {}, SECRET_BODY)
    with pytest.raises(outbound.OutboundError) as caught:
        outbound.get(a.url + "/deny")
    assert caught.value.status == 403
    assert str(caught.value) == f"{a.url}/deny: HTTP 403 Forbidden"
    assert b"hunter2" not in str(caught.value).encode()
    a.routes["/hf/org/m/resolve/main/config.json"] = (200, {}, SECRET_BODY)
    with pytest.raises(Exception) as bad_json:
        fetch_from_endpoint(a.url + "/hf", "org/m", None, "config.json", None)
    assert "hunter2" not in str(bad_json.value) and "not valid JSON" in str(bad_json.value)


def test_credentials_never_cross_a_redirect_to_another_origin(
    listeners: tuple[Listener, Listener],
) -> None:
    a, b = listeners
    a.routes["/same"] = (302, {"Location": "/final"}, b"")
    a.routes["/final"] = (200, {}, b"{}")
    a.routes["/away"] = (302, {"Location": b.url + "/final"}, b"")
    b.routes["/final"] = (200, {}, b"{}")
    auth = {"Authorization": "Bearer admin-token"}
    assert outbound.get(a.url + "/same", auth).url == a.url + "/final"
    assert a.requests[-1][1].get("Authorization") == "Bearer admin-token"
    assert outbound.get(a.url + "/away", auth).url == b.url + "/final"
    assert b.requests and all("Authorization" not in h for _, h in b.requests)
    a.routes["/file"] = (302, {"Location": "file:///etc/passwd"}, b"")
    with pytest.raises(outbound.OutboundError, match="only http and https"):
        outbound.get(a.url + "/file")


def test_repo_ids_cannot_walk_the_endpoint(listeners: tuple[Listener, Listener]) -> None:
    a, _ = listeners
    for repo in ("../../admin", "org/../../x", "org/m?x=1", "a/b/c", "org/m#f"):
        with pytest.raises(ConfigNotFoundError, match="not a repo id"):
            fetch_from_endpoint(a.url + "/hf", repo, None, "config.json", "t")
    assert a.requests == []
    assert fetch_from_endpoint(a.url + "/hf", "org/m", "refs/pr/1", "config.json", None) is None
    assert a.requests[-1][0] == "/hf/org/m/resolve/refs%2Fpr%2F1/config.json"


def _server(**source: Any) -> SpecServer:
    doc: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    doc["metadata"]["namespace"] = "tenant"
    doc["spec"]["modelSource"] = source
    return SpecServer.model_validate(doc)


def test_spec_endpoints_get_no_request_unless_the_admin_listed_them(
    listeners: tuple[Listener, Listener], tmp_path: Path
) -> None:
    a, b = listeners
    token = tmp_path / "token"
    token.write_text("admin-hf-token\n")
    server = _server(
        hfEndpoint=a.url + "/hf", hfTokenSecretRef={"name": "hf-token", "key": "token"}
    )
    none_allowed = HfSettings.from_env({})
    configs, note = from_endpoint(server.spec, none_allowed)
    assert configs is None and note and "spec.modelSource.hfEndpoint" in note
    assert a.requests == []
    # The admin's default endpoint is used instead, with the admin's token.
    b.routes["/"] = (200, {}, b'{"architectures": ["Qwen3ForCausalLM"]}')
    admin = HfSettings.from_env(
        {"SPECSERVER_HF_ENDPOINT": b.url + "/mirror", "SPECSERVER_HF_TOKEN_FILE": str(token)}
    )
    configs, note = from_endpoint(server.spec, admin)
    assert configs is not None and configs.source == f"endpoint {b.url}/mirror"
    assert a.requests == [] and note
    assert {h.get("Authorization") for _, h in b.requests} == {"Bearer admin-hf-token"}
    # Listed: the spec's endpoint is asked, and a 403 there says nothing of its body.
    a.routes["/hf"] = (403, {}, SECRET_BODY)
    listed = HfSettings.from_env({"SPECSERVER_HF_ALLOWED_ENDPOINTS": f"{b.url}, {a.url}/hf/"})
    with pytest.raises(ConfigSourceError) as caught:
        from_endpoint(server.spec, listed)
    assert "403 Forbidden" in str(caught.value) and "hunter2" not in str(caught.value)
    assert all("Authorization" not in h for _, h in a.requests)  # no token file: no token


def test_refused_settings_and_urls() -> None:
    hf = HfSettings.from_env({"SPECSERVER_HF_ALLOWED_ENDPOINTS": "file:///srv,http://ok:1/x"})
    assert hf.allowed == ("http://ok:1/x",) and hf.problems
    assert not hf.allows("http://ok:1/y") and not hf.allows("http://ok:2/x")
    assert hf.allows("http://OK:1/x/")
    allowed = ("http://prom:9090",)
    assert url_refusal("http://prom:9090/", allowed) is None
    assert "allow-list" in (url_refusal("http://prom:9091", allowed) or "")
    assert "only http" in (url_refusal("file:///etc/passwd", allowed) or "")


def test_prometheus_403_body_stays_out_of_the_error(listeners: tuple[Listener, Listener]) -> None:
    a, b = listeners
    a.routes["/"] = (403, {}, SECRET_BODY)
    refused = SignalCache(b.url, allowed=(a.url,))
    refused.refresh()
    assert b.requests == [] and "allow-list" in (refused.last_error or "")
    cache = SignalCache(a.url, allowed=(a.url,))
    cache.refresh()
    assert len(a.requests) == 1 and "/api/v1/query?" in a.requests[0][0]
    assert cache.last_error and "HTTP 403 Forbidden" in cache.last_error
    assert "hunter2" not in cache.last_error and "INTERNAL" not in cache.last_error


@pytest.mark.parametrize(
    "name", ["../../victim/secrets/prod-api", "a/b", "UPPER", "x?watch=1", "%2e%2e", "", "a" * 254]
)
def test_names_that_are_not_kubernetes_names_reach_no_path(name: str) -> None:
    with pytest.raises(InvalidNameError):
        object_path("ConfigMap", "tenant", name)
    with pytest.raises(InvalidNameError):
        object_path("ConfigMap", name or "-", "ok")


def test_valid_names_make_plain_paths() -> None:
    assert object_path("ConfigMap", "t1", "a.b-c") == "/api/v1/namespaces/t1/configmaps/a.b-c"
    assert object_path("Deployment", None) == "/apis/apps/v1/deployments"


def test_the_schema_refuses_traversal_and_non_http_urls() -> None:
    bad: list[dict[str, Any]] = [
        {"hfTokenSecretRef": {"name": "../../victim/secrets/prod-api"}},
        {"configMapName": "../x"},
        {"hfEndpoint": "file:///etc"},
        {"volume": {"persistentVolumeClaimName": "a/b"}},
    ]
    for source in bad:
        with pytest.raises(ValidationError):
            _server(**source)
