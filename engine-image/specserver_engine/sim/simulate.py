"""``specserver-engine simulate``: start the simulated engine's HTTP server. Called by cli.py."""

from __future__ import annotations

import sys

from aiohttp import web

from specserver_engine.sim.config import SimConfigError, build_sim_config
from specserver_engine.sim.server import build_app


def run_simulator(argv: list[str]) -> int:
    """Resolve the flags like SGLang would and serve until SIGTERM/SIGINT."""
    try:
        cfg = build_sim_config(argv)
    except SimConfigError as exc:
        print(f"specserver-engine simulate: error: {exc}", file=sys.stderr)
        return 2
    r = cfg.plan.resolution
    print(
        f"simulated SGLang {cfg.served_model_name} on {cfg.host}:{cfg.port}: "
        f"speculative={r.algorithm or 'off'} max_running_requests={cfg.max_running_requests} "
        f"kv_pool={cfg.pool_tokens} time_scale={cfg.time_scale}",
        flush=True,
    )
    web.run_app(
        build_app(cfg),
        host=cfg.host,
        port=cfg.port,
        print=None,
        handle_signals=True,
        access_log=None,
    )
    return 0
