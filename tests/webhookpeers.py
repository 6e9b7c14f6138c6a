"""Peers of the admission webhook for the tests: the API server's client certificate (a client
CA and a pair signed by it, as scripts/devcluster.py writes for the real apiserver), an HTTPS
POST of one review with or without it, and peers that misbehave on purpose: one that connects
and sends nothing, one that drips its request a byte at a time."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def client_pair(directory: Path, cn: str = "kube-apiserver") -> tuple[Path, Path, Path]:
    """(client CA certificate, client certificate, its key) as PEM files in ``directory``."""
    now = dt.datetime.now(dt.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def build(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> x509.Certificate:
        b = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            b = b.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
        return b.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = build("test-webhook-client-ca", ca_key, "test-webhook-client-ca", ca_key, True)
    cert = build(cn, key, "test-webhook-client-ca", ca_key, False)
    pem = serialization.Encoding.PEM
    paths = (directory / "client-ca.crt", directory / f"{cn}.crt", directory / f"{cn}.key")
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(cert.public_bytes(pem))
    paths[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


def post(
    port: int,
    body: bytes | dict[str, Any],
    ca_pem: str,
    cert: tuple[Path, Path] | None = None,
    timeout: float = 10.0,
) -> tuple[int, dict[str, Any], float]:
    """(status, JSON answer, seconds taken) of one POST /validate over TLS."""
    ctx = ssl.create_default_context(cadata=ca_pem)
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    started = time.monotonic()
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        conn.request("POST", "/validate", data, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read()), time.monotonic() - started
    finally:
        conn.close()


def idle(port: int, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` connections from address ``source`` (any 127/8 address is loopback on Linux)
    that send nothing (no TLS handshake)."""
    return [
        socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
        for _ in range(count)
    ]


def raw(port: int, ca_pem: str, data: bytes, timeout: float = 5.0) -> bytes:
    """What the server answers to ``data`` written as is after a TLS handshake (its first
    16 KiB; empty when it closed without a word)."""
    ctx = ssl.create_default_context(cadata=ca_pem)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock,
        ctx.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(data)
        out = b""
        try:
            while len(out) < 16384 and (chunk := tls.recv(16384)):
                out += chunk
        except (ssl.SSLError, ConnectionError):
            pass
        return out


class Dripper:
    """Connects and drips one byte every ``interval_s``, never finishing: without ``tls_ca``
    a TLS handshake record (the server's handshake waits for the rest), with it a finished
    handshake and then a request header; ``closed_after`` is when the server closed it."""

    def __init__(self, port: int, interval_s: float = 0.2, tls_ca: str | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.interval_s, self.started = interval_s, time.monotonic()
        self.closed_after: float | None = None
        if tls_ca is not None:  # a finished handshake, then a dripped request
            ctx = ssl.create_default_context(cadata=tls_ca)
            self.sock = ctx.wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.stop = threading.Event()
        threading.Thread(target=self._drip, daemon=True).start()

    def _drip(self) -> None:
        if isinstance(self.sock, ssl.SSLSocket):
            payload = b"POST /validate HTTP/1.1\r\nContent-Length: 100000\r\n" + b"X" * 1000
        else:
            payload = b"\x16\x03\x01\x3f\xff" + b"\x01" * 1000  # a handshake record
        try:
            for byte in payload:
                if self.stop.wait(self.interval_s):
                    return
                self.sock.send(bytes([byte]))
        except (OSError, ssl.SSLError):
            self.closed_after = time.monotonic() - self.started

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
