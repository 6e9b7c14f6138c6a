"""A tiny HTTP server on loopback for the tests that need something to answer GETs (an
exporter's ``/metrics``, Prometheus's query API, a hostile config endpoint):
``serve(respond)`` starts it on its own thread; ``respond`` gets each request's path and
headers and returns what to answer."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from typing import Any

#: (HTTP status, headers, body) of one answer; Content-Length is added.
Answer = tuple[int, dict[str, str], bytes]


def serve(
    respond: Callable[[str, dict[str, str]], Answer], port: int = 0, reason: str | None = None
) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A server answering every GET with ``respond(path, headers)``, and its URL
    (``http://127.0.0.1:P``); ``port`` 0 picks a free one, ``reason`` replaces every answer's
    reason phrase. Stop it with ``stop``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, headers, body = respond(self.path, dict(self.headers.items()))
            self.send_response(status, reason)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop(server: http.server.ThreadingHTTPServer) -> None:
    """Stop serving and close the listening socket."""
    server.shutdown()
    server.server_close()
