"""The validating admission webhook: its HTTPS server, its settings, its certificate's upkeep.

Started by handlers.py when ``SPECSERVER_WEBHOOK_PORT`` is set. ``POST /validate`` is served by
server.py (deadlines, a bounded pool) and answered by admission.py, given the admin's
settings and the one API call it needs: a SubjectAccessReview (may the requesting user get the
Secret named as hfTokenSecretRef?), which fails closed and is made only for the API server's
reviews: a client certificate verified against ``SPECSERVER_WEBHOOK_CLIENT_CA`` (and, when set,
one of ``SPECSERVER_WEBHOOK_CLIENT_NAMES``). At start and every ``UPKEEP_S`` the operator makes
sure the Secret it owns holds a usable CA and serving certificate (certs.py; a new pair
when missing, expiring or not covering the names) and that the ValidatingWebhookConfiguration's
caBundle is that CA. The configuration's failurePolicy is Ignore (manifests/webhook.yaml): when
the operator is down, SpecServers are still accepted and their ConfigValid condition validates.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import ssl
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any

from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.errors import ApiError, NotFoundError
from specserver_operator.webhook.admission import ReviewSettings, admission_response, answer_body
from specserver_operator.webhook.certs import Bundle, build_bundle, usable
from specserver_operator.webhook.secretreview import Caller, RecordGrant
from specserver_operator.webhook.server import PATH, Server

log = logging.getLogger("specserver.webhook")
__all__ = ["PATH", "Webhook"]
UPKEEP_S = 60.0
OWNED_LABELS = {
    "app.kubernetes.io/managed-by": "specserver",
    "app.kubernetes.io/component": "admission-webhook",
}


@dataclass
class Webhook:
    """The server, its TLS context, and where its certificate and CA bundle live."""

    client: KubeClient
    port: int
    address: str
    secret: str  # namespace/name
    config_name: str
    names: list[str]
    settings: ReviewSettings = field(default_factory=ReviewSettings)
    #: subject common names a client certificate must have (empty: any the client CA signed)
    client_names: frozenset[str] = frozenset()
    #: records an allowed, authenticated review's Secret grant (None: not recorded)
    record_grant: RecordGrant | None = None
    context: ssl.SSLContext = field(default_factory=lambda: ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    bundle: Bundle | None = None
    ca_synced: str | None = None
    server: Server | None = None

    def __post_init__(self) -> None:
        client_ca = self.settings.access.client_ca
        if not client_ca:
            return
        try:  # ask for a client certificate; one that does not verify fails the handshake
            self.context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            # Fail closed: no caller is the API server, so no Secret access is checked.
            log.error(
                "webhook: SPECSERVER_WEBHOOK_CLIENT_CA %s is not a readable PEM CA (%s: %s); "
                "SpecServers naming hfTokenSecretRef are refused until it is",
                client_ca,
                type(exc).__name__,
                exc,
            )
            access = dataclasses.replace(self.settings.access, client_ca=None)
            self.settings = dataclasses.replace(self.settings, access=access)
            return
        self.context.verify_mode = ssl.CERT_OPTIONAL

    @classmethod
    def from_env(cls, client: KubeClient, record_grant: RecordGrant | None = None) -> Webhook:
        """The webhook of the operator's settings (settings.py)."""
        from specserver_operator.settings import value

        def listed(env: str) -> list[str]:
            return [n.strip() for n in value(env).split(",") if n.strip()]

        return cls(
            client,
            int(value("SPECSERVER_WEBHOOK_PORT")),
            value("SPECSERVER_WEBHOOK_ADDRESS"),
            value("SPECSERVER_WEBHOOK_SECRET"),
            value("SPECSERVER_WEBHOOK_CONFIG"),
            listed("SPECSERVER_WEBHOOK_DNS_NAMES"),
            ReviewSettings.from_env(),
            frozenset(listed("SPECSERVER_WEBHOOK_CLIENT_NAMES")),
            record_grant,
        )

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

    def review(
        self, body: bytes, caller: Caller, deadline: float, seen: dict[str, str]
    ) -> dict[str, Any]:
        """One AdmissionReview body's answer (fail closed: admission.answer_body)."""
        return answer_body(
            body,
            lambda review: admission_response(
                review, self.review_access, caller, self.settings, self.record_grant, deadline
            ),
            seen,
        )

    def health(self) -> str | None:
        """Why the webhook cannot answer reviews now (None: it can, or it is still starting)."""
        return None if self.server is None else self.server.health()

    def serve(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set (the certificate must be loaded first)."""
        while self.bundle is None and not stop.is_set():
            self.upkeep()
            if self.bundle is None:
                stop.wait(5.0)
        if stop.is_set():
            return
        self.server = Server(self.address, self.port, self.context, self.review, self.client_names)
        self.server.start()
        access = self.settings.access
        who = (
            f"client certificates of {access.client_ca}"
            if access.client_ca
            else "no client CA: Secret access is "
            + (
                "checked for any caller"
                if access.trust_unauthenticated
                else "not checked and hfTokenSecretRef is refused"
            )
        )
        log.info("webhook: serving %s on %s:%d (%s)", PATH, self.address, self.server.port, who)
        while not stop.wait(UPKEEP_S):
            self.upkeep()
        self.server.stop()
