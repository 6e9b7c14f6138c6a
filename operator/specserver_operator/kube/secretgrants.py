"""Secret grants: which Secret an admission review approved for which SpecServer generation.

The engine pod runs the tenant's image, so the Secret a SpecServer names as
``spec.modelSource.hfTokenSecretRef`` is readable by whoever wrote the spec. The admission
webhook asks the API server whether the author may ``get`` it (admission.py); when it may, the
webhook records a *grant* here (``Recorder``, called by admission.py through webhook/service.py),
and the operator renders the ``secretKeyRef`` only for a SpecServer whose uid, current generation
and Secret name a grant holds (observe.py reads it, desired.py refuses with
``SecretNotApproved``). A SpecServer admitted without that review (the webhook down or stalled
under ``failurePolicy: Ignore``, or off) never gets the Secret into a pod.

Grants are ConfigMaps in the operator's own namespace (``SPECSERVER_GRANT_NAMESPACE``,
``specserver-system``), one per SpecServer uid, written with the operator's credentials: a
tenant cannot write there. The data holds the SpecServer's namespace, name and uid and one key
per approved generation (``generation-<n>``: the Secret and the user), the newest ``KEEP``.
The cycle lists them every ``RELIST_S`` (cycle.py), a pass reads a grant the list does not
hold with one GET (once per generation), and the cycle deletes the grants of SpecServers that
are gone (``stale``). Pure, except ``Recorder`` and ``keep``, which call the client.
"""

from __future__ import annotations

import calendar
import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from specserver_operator.kube.errors import ApiError, NotFoundError
from specserver_operator.settings import value

log = logging.getLogger("specserver.grants")

PREFIX = "specserver-grant-"
LABELS = {
    "app.kubernetes.io/managed-by": "specserver",
    "app.kubernetes.io/component": "secret-grant",
}
SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())
#: Approved generations kept per SpecServer (a later webhook may still refuse the newest).
KEEP = 8
#: Seconds a grant whose SpecServer this operator never saw is kept (a CREATE another
#: admission step refused leaves one; a SpecServer just created may not be listed yet).
UNSEEN_GRACE_S = 600.0
GENERATION_KEY = "generation-"
#: Grant writes one namespace may make at once, and then per second (Recorder): a flood of
#: reviews that are refused after admission (409 AlreadyExists of another name, a quota) writes
#: at most this many ConfigMaps, each deleted after UNSEEN_GRACE_S.
WRITE_BURST = 20.0
WRITE_RATE_PER_S = 0.2
#: Namespaces whose bucket is kept (past it, full buckets are forgotten).
MAX_BUCKETS = 4096
#: Deletions of stale grants: at most DELETE_BATCH per SWEEP_S, on the sweeper's own thread
#: (``Sweeper``), never on the shared cycle.
DELETE_BATCH = 20
SWEEP_S = 5.0
#: Seconds between LISTs of the grants (as the object cache's resync): the grants of new
#: generations are read by their passes, those of deleted SpecServers deleted from the book.
RELIST_S = 300.0


def grant_namespace() -> str:
    """Where grants live: the operator's own namespace (no tenant writes there)."""
    return value("SPECSERVER_GRANT_NAMESPACE")


def grant_name(uid: str) -> str:
    """The grant ConfigMap of a SpecServer uid (a uid is 36 characters of [0-9a-f-])."""
    return PREFIX + uid


def grant_patch(
    existing: Mapping[str, str] | None,
    namespace: str,
    name: str,
    uid: str,
    generation: int,
    secret: str,
    user: str,
) -> dict[str, str | None]:
    """The ConfigMap data (as a merge patch) recording that ``user``, allowed to get Secret
    ``namespace/secret``, wrote generation ``generation``; older generations beyond ``KEEP``
    are removed (None)."""
    record = json.dumps({"secret": secret, "user": user}, sort_keys=True)
    patch: dict[str, str | None] = {
        "namespace": namespace,
        "name": name,
        "uid": uid,
        f"{GENERATION_KEY}{generation}": record,
    }
    kept = sorted({*_generations(existing or {}), generation}, reverse=True)
    for old in kept[KEEP:]:
        patch[f"{GENERATION_KEY}{old}"] = None
    return patch


def _generations(data: Mapping[str, str]) -> list[int]:
    out = []
    for key in data:
        digits = key[len(GENERATION_KEY) :] if key.startswith(GENERATION_KEY) else ""
        if digits.isdigit():
            out.append(int(digits))
    return out


def approved(data: Mapping[str, str] | None, uid: str, generation: int, secret: str) -> bool:
    """Whether a grant (its ConfigMap data) approves Secret ``secret`` for this generation."""
    if not data or data.get("uid") != uid:
        return False
    raw = data.get(f"{GENERATION_KEY}{generation}")
    try:
        record = json.loads(raw) if raw else None
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("secret") == secret


def refusal(namespace: str, secret: str, generation: int) -> str:
    """ConfigValid's message when no grant approves the Secret (what to do about it)."""
    return (
        f"spec.modelSource.hfTokenSecretRef.name: no admission review approved Secret "
        f"{namespace}/{secret} for generation {generation} of this SpecServer (the webhook did "
        "not answer, or was off, when this spec was written); the Secret is not given to an "
        "engine pod and a running engine is kept as it was. Change the spec again, as a user "
        "who may get the Secret, while the admission webhook answers"
    )


def stale(
    grants: Mapping[str, tuple[Mapping[str, str], float]],
    live: set[str],
    seen: set[str],
    namespaces: Iterable[str],
    now: float,
) -> list[str]:
    """uids of grants to delete: their SpecServer was seen and is gone, or was never seen for
    ``UNSEEN_GRACE_S``; only grants of the namespaces this operator watches (all: empty)."""
    watched = set(namespaces)
    out = []
    for uid, (data, created) in grants.items():
        if uid in live or (watched and data.get("namespace") not in watched):
            continue
        if uid in seen or now - created >= UNSEEN_GRACE_S:
            out.append(uid)
    return out


@dataclass
class Book:
    """The grants the cycle last listed (uid -> (data, created at)), and the uids it saw."""

    grants: dict[str, tuple[dict[str, str], float]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    #: (uid, generation) read fresh once because the list did not hold it
    read: set[tuple[str, int]] = field(default_factory=set)
    #: monotonic time of the last LIST (None: never)
    listed_at: float | None = None
    #: uids whose grant the Sweeper is to delete (set by keep), and those it deleted since
    doomed: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def data(self, uid: str) -> dict[str, str] | None:
        found = self.grants.get(uid)
        return found[0] if found else None

    def fresh_read_due(self, uid: str, generation: int, data: Mapping[str, str] | None) -> bool:
        """Whether to GET this grant: the list holds no record of ``generation``, and it was
        not read for it yet (at most one GET per SpecServer generation)."""
        if data is not None and f"{GENERATION_KEY}{generation}" in data:
            return False
        if (uid, generation) in self.read:
            return False
        self.read.add((uid, generation))
        return True


class GrantClient(Protocol):
    """What ``Recorder`` and ``keep`` need of the client (client.KubeClient)."""

    def get_secret_grant(
        self, namespace: str, uid: str, generation: int | None = None
    ) -> dict[str, str] | None: ...

    def put_secret_grant(
        self, namespace: str, uid: str, patch: dict[str, str | None], labels: dict[str, str]
    ) -> None: ...

    def list_secret_grants(self, namespace: str) -> dict[str, tuple[dict[str, str], float]]: ...

    def delete_secret_grant(self, namespace: str, uid: str) -> None: ...

    def get_specserver(self, namespace: str, name: str) -> dict[str, Any] | None: ...


def names_secret(body: Mapping[str, Any]) -> bool:
    """Whether a SpecServer names spec.modelSource.hfTokenSecretRef."""
    source = (body.get("spec") or {}).get("modelSource")
    return isinstance(source, dict) and bool(source.get("hfTokenSecretRef"))


def keep(
    book: Book,
    client: GrantClient,
    bodies: list[dict[str, Any]],
    namespaces: Iterable[str],
    leading: bool,
) -> None:
    """The cycle's upkeep of ``book`` (cycle.py, once a cycle): one LIST every ``RELIST_S``
    while a SpecServer names a Secret or grants are held (none otherwise: a new generation's
    grant is read by its pass, cachedclient.CachedClient), and, while ``leading``, naming the
    grants of SpecServers that are gone for the ``Sweeper`` to delete (``book.doomed``; no
    deletion is made here, so no number of grants slows the cycle). A LIST that fails keeps
    the last one until the next is due (it can only lack grants: a pass then reads its own, or
    refuses; it never renders without)."""
    where = grant_namespace()
    due = book.listed_at is None or time.monotonic() - book.listed_at >= RELIST_S
    if due and (book.grants or any(names_secret(b) for b in bodies)):
        book.listed_at = time.monotonic()
        try:
            book.grants = client.list_secret_grants(where)
        except (ApiError, NotFoundError) as exc:  # the next LIST is RELIST_S away
            log.warning("Secret grants not listed: %s", exc)
    live = {b["metadata"]["uid"] for b in bodies}
    with book.lock:
        for uid in book.deleted:
            book.grants.pop(uid, None)
        book.deleted.clear()
        # Only deletions still due: a SpecServer seen again (a relist's late view) keeps its.
        book.doomed = (
            set(stale(book.grants, live, book.seen, namespaces, time.time())) if leading else set()
        )
    book.seen = (book.seen | live) & (live | set(book.grants))
    book.read = {(uid, g) for uid, g in book.read if uid in live}


@dataclass
class Sweeper:
    """Deletes the grants ``keep`` named stale, on a thread of its own (handlers.py): at most
    ``DELETE_BATCH`` every ``SWEEP_S``, so 4,000 stale grants (a flood of refused CREATEs
    before the rate limit) cost the API ~4 deletions a second and the shared cycle nothing."""

    book: Book
    client: GrantClient
    namespace: str

    def sweep_once(self) -> int:
        """Delete up to ``DELETE_BATCH`` doomed grants; how many were deleted."""
        with self.book.lock:
            batch = sorted(self.book.doomed)[:DELETE_BATCH]
        done = 0
        for uid in batch:
            try:
                self.client.delete_secret_grant(self.namespace, uid)
            except NotFoundError:
                pass
            except ApiError as exc:  # named again by the next cycle
                log.warning("grant of %s not deleted: %s", uid, exc)
                continue
            done += 1
            with self.book.lock:
                self.book.doomed.discard(uid)
                self.book.deleted.add(uid)
        return done

    def run_forever(self, stop: threading.Event) -> None:
        while not stop.wait(SWEEP_S):
            try:
                self.sweep_once()
            except Exception:  # the sweeper outlives any one failure
                log.exception("grant sweep failed")


class GrantsRefused(Exception):
    """No grant is written for this review (the namespace wrote too many of late)."""


@dataclass
class RateLimit:
    """A token bucket per namespace: ``burst`` grant writes at once, refilled at ``per_s``."""

    burst: float = WRITE_BURST
    per_s: float = WRITE_RATE_PER_S
    buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # ns -> (tokens, at)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, namespace: str, now: float) -> bool:
        """Whether ``namespace`` may write one more grant now (taking it if so)."""
        with self.lock:
            tokens, at = self.buckets.get(namespace, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.per_s)
            if len(self.buckets) > MAX_BUCKETS:  # full buckets carry no state: forget them
                self.buckets = {
                    k: v
                    for k, v in self.buckets.items()
                    if v[0] + (now - v[1]) * self.per_s < self.burst
                }
            if tokens < 1.0:
                self.buckets[namespace] = (tokens, now)
                return False
            self.buckets[namespace] = (tokens - 1.0, now)
            return True


def recorded(data: Mapping[str, str] | None, uid: str, generation: int, secret: str) -> bool:
    """Whether the grant already approves exactly this (a repeated review writes nothing)."""
    return approved(data, uid, generation, secret)


@dataclass
class Recorder:
    """The webhook's grant writer: called by admission.py for an allowed review that asked
    the API server about the Secret. An API error propagates (the review then refuses).

    Only for what the API server will store: a CREATE whose name is taken by another object
    (another uid) ends in 409 AlreadyExists after admission, so it records nothing; a grant
    already holding this uid, generation and Secret is not written again; and one namespace
    writes at most ``WRITE_BURST`` grants at once, ``WRITE_RATE_PER_S`` after that (past it the
    review is refused, naming the namespace: ``GrantsRefused``)."""

    client: GrantClient
    namespace: str
    limit: RateLimit = field(default_factory=RateLimit)

    def __call__(
        self, namespace: str, name: str, uid: str, generation: int, secret: str, user: str
    ) -> None:
        started = time.monotonic()
        stored = self.client.get_specserver(namespace, name)
        stored_uid = ((stored or {}).get("metadata") or {}).get("uid")
        if stored_uid is not None and stored_uid != uid:
            log.info(
                "grant: none for %s/%s uid %s: the name is taken by uid %s (the CREATE fails)",
                namespace,
                name,
                uid,
                stored_uid,
            )
            return
        existing = self.client.get_secret_grant(self.namespace, uid)
        if recorded(existing, uid, generation, secret):
            return
        if not self.limit.take(namespace, started):
            raise GrantsRefused(
                f"namespace {namespace} asked for more than {WRITE_BURST:g} Secret approvals "
                f"at once ({WRITE_RATE_PER_S * 60:g} a minute after that); try again shortly"
            )
        patch = grant_patch(existing, namespace, name, uid, generation, secret, user)
        self.client.put_secret_grant(self.namespace, uid, patch, LABELS)
        log.info(
            "grant: %s may get Secret %s/%s: generation %d of %s/%s approved (%.0f ms)",
            user,
            namespace,
            secret,
            generation,
            namespace,
            name,
            (time.monotonic() - started) * 1000,
        )


def created_at(meta: Mapping[str, Any]) -> float:
    """A ConfigMap's creationTimestamp as epoch seconds (0: unknown, so never young)."""
    stamp = meta.get("creationTimestamp")
    if not isinstance(stamp, str):
        return 0.0
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return 0.0
