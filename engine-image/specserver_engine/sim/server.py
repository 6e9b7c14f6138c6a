"""SGLang 0.5.23's HTTP API over the simulated engine (aiohttp).

``/health``, ``/health_generate``, ``/ready``, ``/server_info`` (and the deprecated
``/get_server_info``), ``/model_info``, ``/v1/models``, ``/generate``, ``/v1/completions``,
``/v1/chat/completions`` (streaming and not), ``/flush_cache``, and ``/metrics`` only with
``--enable-metrics``. The prompt kind (code / math / chat / random) that sets acceptance comes
from the request field ``prompt_kind`` or the ``X-Prompt-Kind`` header.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from specserver_advisor import SGLANG_VERSION
from specserver_engine.sim.config import SimConfig
from specserver_engine.sim.engine import Chunk, SimEngine, SimRequest
from specserver_engine.sim.metrics import EngineMetrics

ENGINE_KEY = web.AppKey("engine", SimEngine)
METRICS_KEY = web.AppKey("metrics", EngineMetrics)
_counter = itertools.count()


def _words(n: int) -> str:
    return " tok" * n


def _prompt_tokens(body: dict[str, Any], text: str) -> int:
    ids = body.get("input_ids")
    if isinstance(ids, list):
        return len(ids)
    # The simulator counts one token per whitespace-separated word.
    return max(1, len(text.split()))


def _kind(request: web.Request, body: dict[str, Any]) -> str:
    return str(body.get("prompt_kind") or request.headers.get("X-Prompt-Kind") or "random")


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"invalid JSON: {exc}"}), content_type="application/json"
        ) from exc
    if not isinstance(data, dict):
        raise web.HTTPBadRequest(
            text='{"error": "expected a JSON object"}', content_type="application/json"
        )
    return data


def _not_ready(engine: SimEngine) -> web.Response | None:
    if engine.ready():
        return None
    return web.json_response({"status": "loading"}, status=503)


async def health(request: web.Request) -> web.Response:
    return _not_ready(request.app[ENGINE_KEY]) or web.Response(text="")


async def ready(request: web.Request) -> web.Response:
    return _not_ready(request.app[ENGINE_KEY]) or web.json_response({"status": "ready"})


def server_info_payload(engine: SimEngine) -> dict[str, Any]:
    """Top level: every resolved field flat; plus scheduler info and internal states."""
    cfg = engine.cfg
    info = cfg.resolved_args()
    mem = cfg.plan.mem
    state = dict(info)
    state.update(
        {
            "world_size": int(info.get("tp_size") or 1),
            "effective_max_running_requests_per_dp": cfg.max_running_requests,
            "last_gen_throughput": 0.0,
            "memory_usage": {
                "weight": round(mem.target_weight_gib + mem.draft_weight_gib, 2),
                "kvcache": round(cfg.pool_tokens * mem.cell_bytes_with_draft / 2**30, 2),
                "token_capacity": cfg.pool_tokens,
                "graph": {},
            },
        }
    )
    if cfg.speculative:
        state["avg_spec_accept_length"] = engine.avg_accept_length()
    info.update(
        {
            "launch_command": "sglang serve " + " ".join(cfg.argv),
            "max_total_num_tokens": cfg.pool_tokens,
            "max_req_input_len": min(cfg.context_len - 1, cfg.pool_tokens - 1) - 5,
            "status": "ready" if engine.ready() else "starting",
            "version": SGLANG_VERSION,
            "frontend": "python",
            "internal_states": [state],
        }
    )
    return info


async def server_info(request: web.Request) -> web.Response:
    return web.json_response(server_info_payload(request.app[ENGINE_KEY]))


async def model_info(request: web.Request) -> web.Response:
    cfg = request.app[ENGINE_KEY].cfg
    target = cfg.plan.scenario.target
    return web.json_response(
        {
            "model_path": cfg.model_path,
            "served_model_name": cfg.served_model_name,
            "architectures": [target.architecture],
            "is_generation": True,
            "model_type": None,
            "weight_version": "default",
        }
    )


async def models(request: web.Request) -> web.Response:
    cfg = request.app[ENGINE_KEY].cfg
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": cfg.served_model_name,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "sglang",
                    "root": cfg.served_model_name,
                    "max_model_len": cfg.context_len,
                }
            ],
        }
    )


async def flush_cache(request: web.Request) -> web.Response:
    ok = request.app[ENGINE_KEY].flush()
    return web.Response(
        text="Cache flushed.\n" if ok else "Cache not flushed: busy.\n", status=200 if ok else 400
    )


async def metrics(request: web.Request) -> web.Response:
    registry = request.app[METRICS_KEY].registry
    accept = {
        "auto": request.headers.get("Accept", ""),
        "classic": "text/plain",
        "openmetrics": "application/openmetrics-text; version=1.0.0",
    }[request.app[ENGINE_KEY].cfg.metrics_format]
    encoder, content_type = choose_encoder(accept)
    return web.Response(body=encoder(registry), headers={"Content-Type": content_type})


async def _chunks(req: SimRequest) -> AsyncIterator[Chunk]:
    while True:
        chunk = await req.chunks.get()
        yield chunk
        if chunk.finished:
            return


def _submit(
    request: web.Request,
    body: dict[str, Any],
    text: str,
    max_new: int,
    ignore_eos: bool,
    stream: bool,
) -> SimRequest:
    engine = request.app[ENGINE_KEY]
    rid = body.get("rid") or uuid.uuid4().hex
    return engine.submit(
        _prompt_tokens(body, text), max_new, ignore_eos, _kind(request, body), stream, str(rid)
    )


async def generate(request: web.Request) -> web.StreamResponse:
    if (resp := _not_ready(request.app[ENGINE_KEY])) is not None:
        return resp
    body = await _body(request)
    params = body.get("sampling_params") or {}
    stream = bool(body.get("stream"))
    req = _submit(
        request,
        body,
        str(body.get("text") or ""),
        int(params.get("max_new_tokens", 128)),
        bool(params.get("ignore_eos")),
        stream,
    )
    if not stream:
        total, meta = 0, {}
        async for chunk in _chunks(req):
            total += chunk.tokens
            meta = chunk.meta
        return web.json_response(
            {"text": _words(total), "output_ids": list(range(total)), "meta_info": meta}
        )
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    total = 0
    async for chunk in _chunks(req):
        total += chunk.tokens
        meta = chunk.meta or {
            "id": req.rid,
            "finish_reason": None,
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": total,
        }
        payload = {"text": _words(total), "output_ids": list(range(total)), "meta_info": meta}
        await out.write(f"data: {json.dumps(payload)}\n\n".encode())
    await out.write(b"data: [DONE]\n\n")
    return out


async def openai(request: web.Request) -> web.StreamResponse:
    """``/v1/completions`` and ``/v1/chat/completions``."""
    if (resp := _not_ready(request.app[ENGINE_KEY])) is not None:
        return resp
    body = await _body(request)
    chat = request.path.endswith("chat/completions")
    if chat:
        messages = body.get("messages") or []
        text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    else:
        text = str(body.get("prompt") or "")
    max_new = int(body.get("max_tokens") or body.get("max_completion_tokens") or 128)
    stream = bool(body.get("stream"))
    req = _submit(request, body, text, max_new, bool(body.get("ignore_eos")), stream)
    cfg = request.app[ENGINE_KEY].cfg
    oid = f"{'chatcmpl' if chat else 'cmpl'}-{next(_counter)}"
    kind = "chat.completion" if chat else "text_completion"

    def choice(n: int, finish: str | None, delta: bool) -> dict[str, Any]:
        content = _words(n)
        if chat:
            key = "delta" if delta else "message"
            return {
                "index": 0,
                key: {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        return {"index": 0, "text": content, "finish_reason": finish}

    if not stream:
        total, meta = 0, {}
        async for chunk in _chunks(req):
            total += chunk.tokens
            meta = chunk.meta
        payload: dict[str, Any] = {
            "id": oid,
            "object": kind,
            "created": int(time.time()),
            "model": cfg.served_model_name,
            "choices": [choice(total, "length" if total >= req.max_new_tokens else "stop", False)],
            "usage": {
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": total,
                "total_tokens": req.prompt_tokens + total,
            },
        }
        if body.get("return_spec_tokens_details") and "spec_verify_ct" in meta:
            payload["sglext"] = {
                "spec_tokens_details": {k: v for k, v in meta.items() if k.startswith("spec_")}
            }
        return web.json_response(payload)
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    async for chunk in _chunks(req):
        finish = (
            ("length" if req.generated >= req.max_new_tokens else "stop")
            if chunk.finished
            else None
        )
        event = {
            "id": oid,
            "object": f"{kind}.chunk" if chat else kind,
            "created": int(time.time()),
            "model": cfg.served_model_name,
            "choices": [choice(chunk.tokens, finish, True)],
        }
        await out.write(f"data: {json.dumps(event)}\n\n".encode())
    await out.write(b"data: [DONE]\n\n")
    return out


def build_app(cfg: SimConfig) -> web.Application:
    """The aiohttp application; the scheduler runs as a background task of the app."""
    app = web.Application()
    engine_metrics = EngineMetrics(cfg.served_model_name)
    engine = SimEngine(cfg, engine_metrics if cfg.enable_metrics else None)
    app[ENGINE_KEY] = engine
    app[METRICS_KEY] = engine_metrics

    async def scheduler(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(engine.run())
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    app.cleanup_ctx.append(scheduler)
    routes = [
        web.get("/health", health),
        web.get("/health_generate", health),
        web.get("/ready", ready),
        web.get("/server_info", server_info),
        web.get("/get_server_info", server_info),
        web.get("/model_info", model_info),
        web.get("/v1/models", models),
        web.post("/generate", generate),
        web.post("/v1/completions", openai),
        web.post("/v1/chat/completions", openai),
        web.post("/flush_cache", flush_cache),
        web.get("/flush_cache", flush_cache),
    ]
    if cfg.enable_metrics:
        routes.append(web.get("/metrics", metrics))
    app.add_routes(routes)
    return app
