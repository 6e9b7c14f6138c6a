"""How the operator reaches and authenticates to the Kubernetes API: where the server is and
the credentials kopf logged in with (``Connection``), and the TLS context and Authorization
header made of them. Nothing here talks to the API server (client.py does)."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

import urllib3

#: Where a pod's service account token is (re-read while it runs: it is rotated).
SA_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate (from kopf's login)."""

    server: str
    token: str | None = None
    token_file: str | None = None
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM given inline (kubeconfig client-certificate-data)
    key_data: bytes | None = None
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_kopf(cls, info: Any) -> Connection:
        """From a ``kopf.ConnectionInfo`` (kubeconfig or service account login)."""
        ca_data = _b64(info.ca_data)
        in_pod = info.server == "https://kubernetes.default.svc" and os.path.exists(SA_TOKEN)
        return cls(
            server=str(info.server).rstrip("/"),
            token=info.token,
            token_file=SA_TOKEN if in_pod else None,
            ca_file=str(os.fspath(info.ca_path)) if info.ca_path else None,
            ca_data=ca_data,
            insecure=bool(info.insecure),
            cert_file=str(os.fspath(info.certificate_path)) if info.certificate_path else None,
            key_file=str(os.fspath(info.private_key_path)) if info.private_key_path else None,
            cert_data=None if info.certificate_path else _b64(info.certificate_data),
            key_data=None if info.private_key_path else _b64(info.private_key_data),
            username=info.username,
            password=info.password,
        )


def _b64(data: str | bytes | None) -> bytes | None:
    if not data:
        return None
    raw = data.encode() if isinstance(data, str) else data
    return raw if raw.lstrip().startswith(b"-----") else base64.b64decode(raw)


def load_client_cert(ctx: ssl.SSLContext, cert: bytes, key: bytes | None) -> None:
    """Load an inline client certificate: ``ssl`` reads only files, so the PEM goes to a private
    temporary directory that is removed as soon as the context holds the key."""
    with tempfile.TemporaryDirectory(prefix="specserver-cred-") as tmp:
        cert_path = os.path.join(tmp, "cert.pem")
        key_path = os.path.join(tmp, "key.pem") if key else None
        for path, data in ((cert_path, cert), (key_path, key)):
            if path and data:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
        ctx.load_cert_chain(cert_path, key_path)


def ssl_context(connection: Connection) -> ssl.SSLContext:
    """The TLS context for ``connection``: its CA (or none checked, when the kubeconfig says
    insecure-skip-tls-verify) and its client certificate."""
    ctx = ssl.create_default_context()
    if connection.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        # The kubeconfig asked for it (insecure-skip-tls-verify): say so once, not per call.
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    elif connection.ca_file or connection.ca_data:
        ctx.load_verify_locations(
            cafile=connection.ca_file,
            cadata=connection.ca_data.decode() if connection.ca_data else None,
        )
    if connection.cert_file:
        ctx.load_cert_chain(connection.cert_file, connection.key_file)
    elif connection.cert_data:
        load_client_cert(ctx, connection.cert_data, connection.key_data)
    return ctx


def headers(
    connection: Connection, token: str | None, content_type: str | None, accept: str | None
) -> dict[str, str]:
    """A request's headers: what it accepts and sends, and its Authorization (the bearer
    ``token`` as last read, else the kubeconfig's basic auth, else none)."""
    out = {"Accept": accept or "application/json", "User-Agent": "specserver-operator"}
    if token:
        out["Authorization"] = f"Bearer {token}"
    elif connection.username:
        raw = f"{connection.username}:{connection.password or ''}".encode()
        out["Authorization"] = f"Basic {base64.b64encode(raw).decode()}"
    if content_type:
        out["Content-Type"] = content_type
    return out
