"""MN006/MN004 against SGLang 0.5.23: what a LeaderWorkerSet worker (node rank >= 1) serves.

SGLang's ``srt/entrypoints/engine.py`` starts, on a node rank >= 1 once its schedulers are ready,
``launch_dummy_health_check_server(host, port, enable_metrics)`` from ``srt/utils/common.py``:
a FastAPI app on the node's own ``--host``/``--port``. The oracle environment has no FastAPI or
uvicorn (it installs only what a resolution needs), so the app is read from SGLang's installed
source, not started: its routes, the metrics mount, the plain-HTTP server, and the call site
with the node's own serving host and port; then the rule's idea of the worker's answers
(``mn006.answers``) is compared with them and with the API server's routes, which a worker
does not serve.
"""

from __future__ import annotations

import ast
from pathlib import Path

import oracle
from specserver_advisor.lint.rules import mn006_worker_probe_never_passes as mn006


def _function(path: Path, name: str) -> ast.FunctionDef:
    (fn,) = [
        node
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == name
    ]
    return fn


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [
        c
        for c in ast.walk(node)
        if isinstance(c, ast.Call) and ast.unparse(c.func).split(".")[-1] == name
    ]


def _routes(node: ast.AST) -> set[str]:
    """The literal paths of ``@app.<method>("...")`` decorators under ``node``."""
    out = set()
    for fn in ast.walk(node):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in fn.decorator_list:
            if (
                isinstance(dec, ast.Call)
                and ast.unparse(dec.func).startswith("app.")
                and dec.args
                and isinstance(dec.args[0], ast.Constant)
            ):
                out.add(str(dec.args[0].value))
    return out


def test_the_worker_health_server_answers_what_the_rule_says() -> None:
    common = oracle.sglang_file("srt/utils/common.py")
    fn = _function(common, "launch_dummy_health_check_server")
    assert [a.arg for a in fn.args.args] == ["host", "port", "enable_metrics"]
    routes = _routes(fn)
    assert routes == set(mn006.HEALTH_PATHS)
    assert all(mn006.answers(r, False) for r in routes)
    # FastAPI's own docs routes stay: the app is built without docs_url/openapi_url/redoc_url.
    (app,) = _calls(fn, "FastAPI")
    assert not {k.arg for k in app.keywords} & {"docs_url", "openapi_url", "redoc_url"}
    # /metrics only with enable_metrics, mounted as a prefix.
    (guard,) = [
        n for n in ast.walk(fn) if isinstance(n, ast.If) and _calls(n, "add_prometheus_middleware")
    ]
    assert ast.unparse(guard.test) == "enable_metrics"
    mount = _function(common, "add_prometheus_middleware")
    assert ast.unparse(_calls(mount, "Mount")[0].args[0]) == repr(mn006.METRICS_PATH)
    assert "'^/metrics(?P<path>.*)$'" in ast.unparse(mount)
    assert mn006.answers("/metrics", True) and not mn006.answers("/metrics", False)
    # Plain HTTP on the host and port it is given.
    (config,) = _calls(fn, "Config")
    keywords = {k.arg: ast.unparse(k.value) for k in config.keywords}
    assert keywords["host"] == "host" and keywords["port"] == "port"
    assert not [k for k in keywords if k and k.startswith("ssl")]


def test_a_worker_runs_it_on_its_own_host_and_port_and_serves_no_api() -> None:
    engine = oracle.sglang_file("srt/entrypoints/engine.py")
    (branch,) = [
        n
        for n in ast.walk(ast.parse(engine.read_text()))
        if isinstance(n, ast.If) and ast.unparse(n.test) == "get_parallel().node_rank >= 1"
    ]
    (call,) = _calls(branch, "launch_dummy_health_check_server")
    assert [ast.unparse(a) for a in call.args] == [
        "get_serving().host",
        "get_serving().port",
        "get_observability().enable_metrics",
    ]
    api = _routes(ast.parse(oracle.sglang_file("srt/entrypoints/http_server.py").read_text()))
    assert {"/v1/models", "/get_model_info", "/health"} <= api
    served = set(mn006.HEALTH_PATHS)
    assert not [r for r in api - served if mn006.answers(r, True) and "metrics" not in r]
