"""``replay --prometheus`` verifies TLS and authenticates (issue 40): a Prometheus behind TLS is
read only when its certificate verifies (the system's CAs or ``--prometheus-ca-bundle``); a
bearer token or headers come from files; ``replay --format jsonl`` writes strict JSON (no
``Infinity``; ``fleetsim --format json`` refuses to write one too: ``allow_nan=False``)."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.loaders import prometheus
from specserver_operator.webhook.certs import build_bundle
from stack import REPO

EMPTY = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def tls_prometheus(tmp_path: Path) -> Iterator[tuple[str, Path, list[dict[str, str]]]]:
    """A Prometheus query API on loopback behind TLS: (URL, its CA bundle, requests' headers)."""
    bundle = build_bundle(["127.0.0.1"], dt.datetime.now(dt.UTC))
    (tmp_path / "ca.crt").write_text(bundle.ca_crt)
    (tmp_path / "tls.crt").write_text(bundle.tls_crt)
    (tmp_path / "tls.key").write_text(bundle.tls_key)
    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers.items()))
            body = EMPTY.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", tmp_path / "ca.crt", seen
    finally:
        server.shutdown()
        server.server_close()


def test_an_unverified_certificate_is_refused(
    tls_prometheus: tuple[str, Path, list[dict[str, str]]],
) -> None:
    url, _, seen = tls_prometheus
    with pytest.raises(prometheus.PrometheusReadError, match="CERTIFICATE_VERIFY_FAILED"):
        prometheus.range_observations(url, "ns", "sps", 600, 30, now=1.0e9)
    assert seen == []  # no query reached the server


def test_a_ca_bundle_and_a_token_file_read_a_managed_prometheus(
    tls_prometheus: tuple[str, Path, list[dict[str, str]]], tmp_path: Path
) -> None:
    url, ca, seen = tls_prometheus
    token = tmp_path / "token"
    token.write_text("s3cr3t-token\n")
    headers = tmp_path / "headers"
    headers.write_text("# tenant routing\nX-Scope-OrgID: team-a\n")
    access = prometheus.read_access(ca, token, headers)
    assert prometheus.range_observations(url, "ns", "sps", 600, 30, 1.0e9, access) == []
    assert seen and all(h["Authorization"] == "Bearer s3cr3t-token" for h in seen)
    assert all(h["X-Scope-OrgID"] == "team-a" for h in seen)


def test_replay_takes_the_access_options(
    tls_prometheus: tuple[str, Path, list[dict[str, str]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, ca, seen = tls_prometheus
    token = tmp_path / "token"
    token.write_text("tok-123")
    argv = ["replay", "--prometheus", url, "--specserver", "ns/sps", "--format", "jsonl"]
    assert main([*argv, "--prometheus-bearer-token-file", str(token)]) == 2
    assert "CERTIFICATE_VERIFY_FAILED" in capsys.readouterr().err
    assert (
        main(
            [*argv, "--prometheus-ca-bundle", str(ca), "--prometheus-bearer-token-file", str(token)]
        )
        == 0
    )
    assert seen and seen[-1]["Authorization"] == "Bearer tok-123"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no colon here\n", "expected 'Name: value'"),
        ("Bad Name: v\n", "expected 'Name: value'"),
        ("X-Empty:\n", "expected 'Name: value'"),
    ],
)
def test_a_bad_headers_file_names_the_line(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "headers"
    path.write_text(text)
    with pytest.raises(ValueError, match=problem) as exc:
        prometheus.read_access(None, None, path)
    assert f"{path}:1" in str(exc.value)


def test_a_token_file_of_two_words_is_refused_without_quoting_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("two words-secret")
    with pytest.raises(ValueError) as exc:
        prometheus.read_access(None, path, None)
    assert "words-secret" not in str(exc.value)


def test_replay_jsonl_is_strict_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    observations = REPO / "tests" / "data" / "observations-rise-fall.jsonl"
    assert main(["replay", "--observations", str(observations), "--format", "jsonl"]) == 0
    lines = capsys.readouterr().out.splitlines()
    decoded = [_strict(line) for line in lines]
    # the policy's crossover with no prediction is unbounded: written as text
    assert any(d["thresholds"]["crossover"] == "inf" for d in decoded)
