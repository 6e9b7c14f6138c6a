"""kopf's paged initial LIST starts again when its continue token expires, instead of ending
the operator.

handlers.py has kopf list each watched kind in pages of ``client.LIST_PAGE``
(``settings.watching.chunk_size``: a whole LIST of a thousand Deployments parsed at once was the
operator's peak RSS). kopf 1.45 pages in ``kopf._cogs.clients.fetching.fetch_objs``; a page
asked for with a continue token that etcd has compacted past (an event loop starved between
pages, on a loaded node) is answered 410 Gone ("The provided continue parameter is too old"),
which kopf raises as ``APIClientError``. Neither ``watching.continuous_watch`` (connection errors
and timeouts only) nor ``watching.infinite_watch`` (429 only) catches it: the watcher task
fails and kopf stops the operator.

``install`` wraps ``fetch_objs`` (``continuous_watch`` calls it through the module, so the
wrapper is what it runs): a listing whose token expired starts again from the first page, and
after ``PAGED_ATTEMPTS`` expired listings it lists in one request (no continue token to expire).
The objects of the pages already yielded are yielded again; kopf passes them on as initial
listing events (type None), which the object cache takes as the same objects. One deleted in
between stays in the cache until the cycle's own LIST replaces it (objectcache.py, at most
``RESYNC_S`` later); the watch starts from the last listing's resourceVersion.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from kopf._cogs.clients import errors, fetching

log = logging.getLogger("specserver.kopfpaging")
#: Paged listings whose token expired before one listing is done in a single request.
PAGED_ATTEMPTS = 2
GONE = 410

Fetch = Callable[..., AsyncIterator[Any]]


def restarting(fetch: Fetch) -> Fetch:
    """``fetch`` (kopf's ``fetch_objs``), started again when a page answers 410 Gone."""

    async def fetch_objs(**kwargs: Any) -> AsyncIterator[Any]:
        attempt = 0
        while True:
            attempt += 1
            if attempt > PAGED_ATTEMPTS:
                settings = kwargs["settings"]
                watching = dataclasses.replace(settings.watching, chunk_size=None)
                kwargs = dict(kwargs, settings=dataclasses.replace(settings, watching=watching))
            try:
                async for page in fetch(**kwargs):
                    yield page
                return
            except errors.APIClientError as exc:
                if exc.status != GONE or attempt > PAGED_ATTEMPTS:
                    raise
                log.warning(
                    "listing %s: continue token expired (410 Gone); listing again%s",
                    kwargs.get("resource"),
                    " in one request" if attempt == PAGED_ATTEMPTS else "",
                )

    fetch_objs.wrapped = fetch  # type: ignore[attr-defined]
    return fetch_objs


def install() -> None:
    """Wrap kopf's ``fetch_objs`` (once; a second call changes nothing)."""
    if not hasattr(fetching.fetch_objs, "wrapped"):
        fetching.fetch_objs = restarting(fetching.fetch_objs)
