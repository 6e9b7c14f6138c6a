"""A free TCP port on loopback, for simulated engines started by tools and tests."""

from __future__ import annotations

import socket


def free_loopback_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
