"""The validating admission webhook: an HTTPS endpoint and the upkeep of its certificate.

Started by handlers.py when ``SPECSERVER_WEBHOOK_PORT`` is set. ``POST /validate`` answers
AdmissionReviews with admission.py, giving it the one API call it needs: a SubjectAccessReview
(may the requesting user get the Secret named as hfTokenSecretRef?), which fails closed. At
start and every ``UPKEEP_S`` the operator makes sure the Secret it owns holds a usable CA and
serving certificate (webhookcerts.py; a new pair when missing, expiring or not covering the
names) and that the ValidatingWebhookConfiguration's
caBundle is that CA. The configuration's failurePolicy is Ignore (manifests/webhook.yaml): when
the operator is down, SpecServers are still accepted and their ConfigValid condition validates.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from specserver_operator.admission import RecordGrant, ReviewAccess, admission_response
from specserver_operator.client import ApiError, KubeClient, NotFoundError
from specserver_operator.secretgrants import Recorder, grant_namespace
from specserver_operator.webhookcerts import Bundle, build_bundle, usable

log = logging.getLogger("specserver.webhook")
PATH = "/validate"
UPKEEP_S = 60.0
MAX_BODY = 4 * 1024 * 1024
OWNED_LABELS = {
    "app.kubernetes.io/managed-by": "specserver",
    "app.kubernetes.io/component": "admission-webhook",
}


class _Server(ThreadingHTTPServer):
    """The HTTPS server; ``review_access`` asks the API server SubjectAccessReviews."""

    review_access: ReviewAccess
    record_grant: RecordGrant


class _Handler(BaseHTTPRequestHandler):
    """One AdmissionReview per POST; anything else is 404/400."""

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != PATH:
            self._answer(404, {"message": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            self._answer(400, {"message": "an AdmissionReview body is required"})
            return
        try:
            review = json.loads(self.rfile.read(length))
            server = cast(_Server, self.server)
            answer = admission_response(
                review if isinstance(review, dict) else {},
                server.review_access,
                server.record_grant,
            )
        except ValueError:
            self._answer(400, {"message": "the body is not JSON"})
            return
        self._answer(200, answer)

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook: " + format, *args)


@dataclass
class Webhook:
    """The server, its TLS context, and where its certificate and CA bundle live."""

    client: KubeClient
    port: int
    address: str
    secret: str  # namespace/name
    config_name: str
    names: list[str]
    context: ssl.SSLContext = field(default_factory=lambda: ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    bundle: Bundle | None = None
    ca_synced: str | None = None

    def ensure_certificate(self, now: dt.datetime) -> Bundle:
        """The stored bundle when usable, else a new one written to the Secret."""
        namespace, name = self.secret.split("/", 1)
        data = self.client.get_secret_data(namespace, name)
        stored = Bundle.from_secret_data(data) if data else None
        if stored is not None and usable(stored, self.names, now):
            bundle = stored
        else:
            bundle = build_bundle(self.names, now)
            self.client.put_secret(namespace, name, bundle.as_secret_data(), OWNED_LABELS)
            log.info("webhook: new certificate for %s in Secret %s", self.names, self.secret)
        if bundle != self.bundle:
            self._load(bundle)
            self.bundle = bundle
        return bundle

    def _load(self, bundle: Bundle) -> None:
        # ssl reads certificates only from files; a private temporary directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="specserver-webhook-") as tmp:
            crt, key = os.path.join(tmp, "tls.crt"), os.path.join(tmp, "tls.key")
            with open(crt, "w", encoding="utf-8") as f:
                f.write(bundle.tls_crt)
            with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w", encoding="utf-8") as f:
                f.write(bundle.tls_key)
            self.context.load_cert_chain(crt, key)

    def sync_ca_bundle(self) -> None:
        """Keep the ValidatingWebhookConfiguration's caBundle on our CA (log on change only)."""
        if self.bundle is None:
            return
        done = self.client.ensure_webhook_ca_bundle(self.config_name, self.bundle.ca_crt)
        state = "missing" if done is None else "current"
        if done:
            log.info("webhook: caBundle of %s updated", self.config_name)
        elif state != self.ca_synced:
            log.info("webhook: ValidatingWebhookConfiguration %s is %s", self.config_name, state)
        self.ca_synced = state

    def upkeep(self) -> None:
        """Certificate and caBundle, once; API errors are logged and retried next time."""
        try:
            self.ensure_certificate(dt.datetime.now(dt.UTC))
            self.sync_ca_bundle()
        except ApiError as exc:
            log.warning("webhook: certificate upkeep failed: %s", exc)

    def review_access(self, review: dict[str, Any]) -> dict[str, Any]:
        """A SubjectAccessReview's status; an API error is a denial saying so (fail closed)."""
        try:
            return self.client.review_access(review)
        except (ApiError, NotFoundError) as exc:
            log.warning("webhook: SubjectAccessReview failed: %s", exc)
            return {"allowed": False, "evaluationError": str(exc)}

    def serve(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set (the certificate must be loaded first)."""
        while self.bundle is None and not stop.is_set():
            self.upkeep()
            if self.bundle is None:
                stop.wait(5.0)
        server = _Server((self.address, self.port), _Handler)
        server.review_access = self.review_access
        server.record_grant = Recorder(self.client, grant_namespace())
        server.daemon_threads = True
        server.socket = self.context.wrap_socket(server.socket, server_side=True)
        threading.Thread(
            target=server.serve_forever, name="specserver-webhook", daemon=True
        ).start()
        log.info("webhook: serving %s on %s:%d", PATH, self.address, self.port)
        while not stop.wait(UPKEEP_S):
            self.upkeep()
        server.shutdown()
        server.server_close()
