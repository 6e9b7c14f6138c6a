"""One active operator: leader election on a coordination.k8s.io/v1 Lease.

Every replica runs kopf and fills its object cache, but only the holder of the Lease
``specserver-operator`` (in the operator's namespace) reconciles; the others stand by and take
over once the holder has not renewed for ``lease_s`` seconds. As in client-go, expiry is judged
by when *this* replica last saw the Lease change (its own clock), never by comparing the
holder's timestamps with ours, so clock skew between nodes cannot make two leaders. Writes
carry the Lease's resourceVersion: two candidates racing for an expired Lease cannot both win.

A round's Lease calls together get a fifth of the lease (``round_deadline_s``, 3 s of 15 s),
not the 60 s any other API call may take: an API server that stalls the round costs the leader
that one renewal (the next cycle renews before the Lease expires for the standbys), costs a
standby one try at taking over, and never holds the cycle thread (or a writer thread waiting on
the elector's lock) for a minute. A leader that cannot renew stops writing on its own clock:
``leading()`` is false from two thirds of the lease after its last successful round began,
whether or not a round is still in flight.

A replica whose identity may not read or write the Lease (403) can never lead: it says so once,
naming the Lease, its namespace and the missing verb (``forbidden``, also on ``/healthz`` and as
``specserver_lease_forbidden``), and once more when the right is back.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from specserver_operator.kube import deadline as calldeadline
from specserver_operator.kube.client import KubeClient
from specserver_operator.kube.errors import ApiError, NotFoundError
from specserver_operator.metrics.registry import ELECTION_ROUNDS, LEASE_FORBIDDEN

log = logging.getLogger("specserver.leader")
LEASE_NAME = "specserver-operator"
SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def operator_namespace() -> str:
    """``SPECSERVER_LEASE_NAMESPACE``, else the pod's own namespace, else ``default``."""
    if os.environ.get("SPECSERVER_LEASE_NAMESPACE"):
        return os.environ["SPECSERVER_LEASE_NAMESPACE"]
    try:
        with open(SA_NAMESPACE, encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def _micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Elector:
    """Acquires and renews the Lease; ``leading()`` says whether this replica may write."""

    client: KubeClient
    namespace: str = field(default_factory=operator_namespace)
    name: str = LEASE_NAME
    identity: str = field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    )
    lease_s: int = 15
    #: monotonic time until which this replica is sure it leads (renewed + lease_s - margin)
    leading_until: float = 0.0
    #: the Lease record as last seen, and when (our clock) it last changed
    seen: tuple[Any, ...] | None = None
    seen_at: float = 0.0
    led: bool = False  # as last logged
    #: why this replica cannot take part (the API server refused a Lease request), or None
    forbidden: str | None = None
    #: the verb of the Lease request in flight (named when it is refused)
    verb: str = "get"
    #: whether the last round got the API server's answer (not: unreachable, timed out, 5xx)
    answered: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def leading(self) -> bool:
        return time.monotonic() < self.leading_until

    def round_deadline_s(self) -> float:
        """Seconds one round's Lease calls may take in all: a fifth of the lease.

        A round is a read and at most one write. The leader renews every cycle (5 s) and counts
        on leading for two thirds of the lease after a round began; the standbys take over a
        whole lease after the last renewal. A round cut off after a fifth (3 s of 15 s) leaves
        the next cycle's round time to renew before the lease runs out, so one stalled round
        costs one renewal, not the leadership (two stalled rounds in a row may cost it).
        """
        return self.lease_s / 5

    def _record(self, holder: str | None) -> dict[str, Any]:
        now = _micro_time()
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": self.lease_s,
            "acquireTime": now,
            "renewTime": now,
        }

    def try_lead(self) -> bool:
        """One election round (call every few seconds); True while this replica leads."""
        with self.lock:
            started = time.monotonic()
            self.answered = True
            try:
                with calldeadline.WATCHDOG.within(self.round_deadline_s()):
                    won = self._round(started)
            except ApiError as exc:
                if exc.status == 403:
                    self._refused(exc)
                else:
                    log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
                    self.answered = 0 < exc.status < 500 and exc.status != 429
                won = False
            except NotFoundError as exc:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
                won = False
            else:
                self._allowed()
            if won:
                self.leading_until = started + self.lease_s * 2 / 3  # renew well before expiry
            leads = self.leading()
            if leads != self.led:  # one line per change, not per renewal
                log.info("%s %s leadership", self.identity, "took" if leads else "lost")
                self.led = leads
            ELECTION_ROUNDS.inc()
            return leads

    def _refused(self, exc: ApiError) -> None:
        """A 403: log once per distinct refusal (not per round) and expose it."""
        why = (
            f"cannot {self.verb} the Lease {self.name!r} in namespace {self.namespace!r}: the "
            f"operator's identity lacks '{self.verb}' on leases.coordination.k8s.io there "
            f"(grant it, or set SPECSERVER_LEASE_NAMESPACE); this replica stands by until then"
        )
        if why != self.forbidden:
            log.error("%s (API server: %s)", why, exc)
            self.forbidden = why
            LEASE_FORBIDDEN.set(1)

    def _allowed(self) -> None:
        if self.forbidden is not None:
            log.info("lease %s/%s: access allowed again", self.namespace, self.name)
            self.forbidden = None
            LEASE_FORBIDDEN.set(0)

    def _round(self, now: float) -> bool:
        self.verb = "get"
        lease = self.client.get_lease(self.namespace, self.name)
        if lease is None:
            body = {"metadata": {"name": self.name, "namespace": self.namespace}}
            body["spec"] = self._record(self.identity)
            self.verb = "create"
            self.client.create_lease(self.namespace, body)
            return True
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"))
        if record != self.seen:
            self.seen, self.seen_at = record, now
        holder = spec.get("holderIdentity")
        duration = int(spec.get("leaseDurationSeconds") or self.lease_s)
        if holder and holder != self.identity and now - self.seen_at < duration:
            return False  # another replica holds a live lease
        new = dict(spec)
        new.update(self._record(self.identity))
        if holder == self.identity:
            new["acquireTime"] = spec.get("acquireTime") or new["acquireTime"]
        else:
            transitions = int(spec.get("leaseTransitions") or 0)
            new["leaseTransitions"] = transitions + 1
        self.verb = "update"
        try:
            self.client.replace_lease(self.namespace, {**lease, "spec": new})
        except ApiError as exc:
            if exc.status == 409:
                return False  # another candidate wrote first
            raise
        return True

    def release(self) -> None:
        """Give the Lease up on a clean stop, so a standby takes over at once."""
        with self.lock:
            if not self.leading():
                return
            self.leading_until = 0.0
            try:
                with calldeadline.WATCHDOG.within(self.round_deadline_s()):
                    lease = self.client.get_lease(self.namespace, self.name)
                    spec = (lease or {}).get("spec") or {}
                    if lease is not None and spec.get("holderIdentity") == self.identity:
                        spec = {**spec, "holderIdentity": None, "leaseDurationSeconds": 1}
                        self.client.replace_lease(self.namespace, {**lease, "spec": spec})
            except (ApiError, NotFoundError) as exc:
                log.warning("lease not released: %s", exc)
