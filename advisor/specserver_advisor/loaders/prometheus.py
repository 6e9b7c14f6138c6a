"""Read auto-speculation signals for one SpecServer from Prometheus (range queries).

Thin I/O for ``specserver-advisor replay --prometheus``; the queries come from ``promql.py``.
TLS is always verified (the system's CAs, or ``--prometheus-ca-bundle``); a managed or
authenticated Prometheus gets a bearer token (``--prometheus-bearer-token-file``) or headers
(``--prometheus-headers-file``: ``Name: value`` lines) read from files, never from the command
line, where other users of the machine could read them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specserver_advisor.policy.model import Observation, SpecMode
from specserver_advisor.policy.promql import signal_queries

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class PrometheusReadError(RuntimeError):
    """Prometheus could not be queried; the message says which query and why."""


#: The longest token or headers file read (a token is a few KB at most).
MAX_SECRET_FILE_BYTES = 64 * 1024
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True)
class Access:
    """How to reach Prometheus: the CA bundle TLS is verified with (None: the system's) and
    the headers every query sends."""

    ca_bundle: str | None = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


def _read_small(path: Path, what: str) -> str:
    try:
        raw = path.read_bytes()[: MAX_SECRET_FILE_BYTES + 1]
    except OSError as exc:
        raise ValueError(f"{what} {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_SECRET_FILE_BYTES:
        raise ValueError(f"{what} {path}: larger than {MAX_SECRET_FILE_BYTES} bytes")
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {path}: not UTF-8") from exc


def read_access(
    ca_bundle: Path | None, token_file: Path | None, headers_file: Path | None
) -> Access:
    """The ``Access`` the options describe (ValueError naming the file and what is wrong; a
    token's or header's value is never quoted)."""
    headers: dict[str, str] = {}
    if headers_file is not None:
        for number, line in enumerate(
            _read_small(headers_file, "--prometheus-headers-file").splitlines(), start=1
        ):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, sep, value = line.partition(":")
            name, value = name.strip(), value.strip()
            if not sep or not _HEADER_NAME.fullmatch(name) or not value:
                raise ValueError(
                    f"--prometheus-headers-file {headers_file}:{number}: expected 'Name: value'"
                )
            headers[name] = value
    if token_file is not None:
        token = _read_small(token_file, "--prometheus-bearer-token-file").strip()
        if not token or any(c.isspace() or ord(c) < 32 for c in token):
            raise ValueError(
                f"--prometheus-bearer-token-file {token_file}: not one token on one line"
            )
        headers["Authorization"] = f"Bearer {token}"
    if any(ord(c) < 32 or ord(c) == 127 for v in headers.values() for c in v):
        raise ValueError(f"--prometheus-headers-file {headers_file}: control characters")
    if ca_bundle is not None and not ca_bundle.is_file():
        raise ValueError(f"--prometheus-ca-bundle {ca_bundle}: no such file")
    return Access(str(ca_bundle) if ca_bundle is not None else None, headers)


def parse_duration(text: str) -> float:
    """``30s``, ``5m``, ``6h``, ``1d`` -> seconds."""
    text = text.strip()
    if len(text) < 2 or text[-1] not in UNITS:
        raise ValueError(f"duration {text!r}: expected a number and one of s, m, h, d")
    try:
        return float(text[:-1]) * UNITS[text[-1]]
    except ValueError as exc:
        raise ValueError(f"duration {text!r}: {exc}") from exc


def range_observations(
    url: str,
    namespace: str,
    name: str,
    since_s: float,
    step_s: float,
    now: float | None = None,
    access: Access | None = None,
) -> list[Observation]:
    """One observation per step over the last ``since_s`` seconds (TLS verified: ``access``)."""
    import requests
    from prometheus_api_client import PrometheusConnect

    access = access or Access()
    end = now if now is not None else time.time()
    start = end - since_s
    session = requests.Session()
    session.verify = access.ca_bundle or True
    prom = PrometheusConnect(url=url, headers=dict(access.headers) or None, session=session)
    queries = signal_queries({"namespace": namespace, "specserver": name})
    series: dict[str, dict[float, float]] = {}
    for field, query in queries.items():
        try:
            result: list[dict[str, Any]] = prom.custom_query_range(
                query, start_time=_dt(start), end_time=_dt(end), step=f"{int(step_s)}s"
            )
        except Exception as exc:  # the client raises several unrelated types
            raise PrometheusReadError(f"{field}: {query}: {exc}") from exc
        values: dict[float, float] = {}
        for item in result:
            for ts, raw in item.get("values", []):
                value = float(raw)
                if not math.isnan(value):
                    values[float(ts)] = value
        series[field] = values
    stamps = sorted({ts for values in series.values() for ts in values})
    out = []
    for ts in stamps:
        obs = Observation(ts=ts)
        for field, values in series.items():
            setattr(obs, field, values.get(ts))
        obs.mode = SpecMode.of((obs.accept_length or 0) > 0)
        out.append(obs)
    return out


def _dt(ts: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, tz=UTC)
