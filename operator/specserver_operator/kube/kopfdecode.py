"""kopf's watch and initial LIST decode every object through ``apidecode``: one object that
no decoder can hold is skipped and logged, never the end of the operator (issue 25).

kopf 1.45 decodes a LIST page with ``response.json()`` in ``kopf._cogs.clients.api.get`` (called
by ``fetching.fetch_objs``) and each watch line with ``json.loads`` in ``api.stream`` (called by
``watching.watch_objs``). A SpecServer nested ~3,000 levels deep made either raise
RecursionError; nothing in kopf catches it, so the watcher task failed and kopf stopped the
operator, and every restart's initial LIST failed the same way until an admin deleted the
object. The webhook (same process) went with it.

``install`` replaces both decoders (the modules call them through ``api``, so the replacements
are what they run):

* ``get`` reads the answer and decodes it with ``apidecode.loads`` (no RecursionError at any
  depth); a LIST page drops the objects ``apidecode.too_deep`` refuses (``client.kept``).
* the watch lines are decoded by ``_WatchJson.loads``: an event whose object is too deep becomes
  a BOOKMARK carrying that object's resourceVersion, which kopf's watch keeps as its position
  (so a reconnect does not replay it) and its queueing skips.

Each skipped object is logged at most once per ``SkipLog.every_s`` (``apidecode.SKIPS``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kopf._cogs.clients import api

from specserver_operator.kube import decode as apidecode
from specserver_operator.kube.client import kept

log = logging.getLogger("specserver.kopfdecode")
EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")


async def get(url: str, **kwargs: Any) -> Any:
    """kopf's ``api.get``, decoding the answer with ``apidecode`` (LIST pages filtered)."""
    response = await api.request(method="get", url=url, **kwargs)
    async with response:
        raw = await response.read()
    answer = apidecode.loads(raw, f"GET {url}") if raw else {}
    if isinstance(answer, dict) and isinstance(answer.get("items"), list):
        answer["items"] = kept(answer["items"])
    return answer


def event(text: str) -> Any:
    """One watch line: the event, or a BOOKMARK in place of an object too deep to hold."""
    value = apidecode.loads(text, "watch event")
    if not isinstance(value, dict) or value.get("type") not in EVENT_TYPES:
        return value
    obj = value.get("object")
    if not apidecode.too_deep(obj):
        return value
    who = apidecode.identity(obj)
    if apidecode.SKIPS.due(who, time.monotonic()):
        log.error("%s: %s", who, apidecode.SKIP_REASON)
    version = apidecode.resource_version(obj)
    meta = {"resourceVersion": version} if version else {}  # none: the watch keeps its own
    return {"type": "BOOKMARK", "object": {"metadata": meta}}


class _WatchJson:
    """What ``api.stream`` finds under the name ``json``: only ``loads`` is used there."""

    loads = staticmethod(event)


def install() -> None:
    """Replace kopf's decoders (once; a second call changes nothing)."""
    if getattr(api.get, "__module__", None) != __name__:
        api.get = get
        api.json = _WatchJson  # type: ignore[attr-defined,assignment]
