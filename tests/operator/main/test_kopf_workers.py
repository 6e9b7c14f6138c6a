"""kopf's per-object worker does not keep its object's last event alive for seconds (handlers.tune).

kopf (``queueing.worker``) keeps the raw event it handled last, the whole body with its
managedFields, while it waits ``settings.queueing.idle_timeout`` for the next one. With the
default 5 s and a status write per SpecServer per cycle, every object's full body stayed alive
through a cycle's write phase and set the operator's RSS high-water mark. The real kopf worker
is driven here with the operator's settings; the processor is a recording fake at kopf's seam.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import kopf
from kopf._core.reactor import queueing

from specserver_operator import handlers


class Body(dict[str, Any]):
    """A raw event's object that can be watched with a weak reference."""


async def _idle_worker_lifetime(settings: kopf.OperatorSettings) -> tuple[float, bool]:
    """How long kopf's worker lives after one event, and whether the event's body outlived it."""
    body = Body(metadata={"uid": "u-1", "name": "a", "namespace": "t"})
    gone = weakref.ref(body)
    handled: list[str] = []

    async def processor(*, raw_event: Any, **_: Any) -> None:
        handled.append(raw_event["type"])

    key: Any = (object(), "u-1")
    streams: Any = {key: queueing.Stream(backlog=asyncio.Queue(), pressure=asyncio.Event())}
    await streams[key].backlog.put({"type": "MODIFIED", "object": body})
    del body
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(
        queueing.worker(
            signaller=asyncio.Condition(),
            settings=settings,
            processor=processor,
            streams=streams,
            key=key,
        ),
        timeout=10,
    )
    took = loop.time() - started
    gc.collect()
    assert handled == ["MODIFIED"] and key not in streams
    return took, gone() is None


def test_an_idle_worker_ends_within_a_second_and_lets_its_event_go() -> None:
    settings = kopf.OperatorSettings()
    handlers.tune(settings)
    took, freed = asyncio.run(_idle_worker_lifetime(settings))
    assert took < 1.0, took
    assert freed
    assert settings.watching.chunk_size == handlers.LIST_PAGE and not settings.posting.enabled
