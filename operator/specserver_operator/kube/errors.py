"""What the Kubernetes API's answers mean to the operator (pure): its errors, and which writes
are worth another try.

client.py raises these; callers tell a missing object (``NotFoundError``) from a refusal or an
unreachable API server (``ApiError``, whose ``status`` is 0 when there was no answer at all).
"""

from __future__ import annotations

import json

#: Tries a write gets in all when the API server answers 409 Conflict.
CONFLICT_RETRIES = 5


class NotFoundError(LookupError):
    """The object does not exist."""


class InvalidNameError(NotFoundError):
    """A name no Kubernetes object can have (so none is asked for: no traversal, no query)."""


class ApiError(RuntimeError):
    """The API server refused a request (or could not be reached); the message says why."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def answer_error(
    what: str, status: int, data: bytes | None, reason: str | None
) -> Exception | None:
    """The error an answer with HTTP ``status`` means (None for a success): 404 is
    NotFoundError, any other 4xx or 5xx an ApiError with the API server's own message."""
    if status == 404:
        return NotFoundError(f"{what} not found")
    if status < 400:
        return None
    try:
        message = json.loads(data or b"{}").get("message") or reason
    except ValueError:
        message = reason
    return ApiError(f"{what}: {status} {message}", status)


def no_answer(what: str, cause: Exception, expired: bool, budget_s: float) -> ApiError:
    """The error of a call that got no answer: cut off at its deadline, or unreachable."""
    if expired:
        return ApiError(f"{what}: no complete answer within {round(budget_s, 1):g}s")
    return ApiError(f"{what}: API server unreachable: {cause}")


def conflict_backoff_s(error: ApiError, attempt: int) -> float | None:
    """Seconds to wait before writing again after ``error`` on try ``attempt`` (from 0), or
    None to give up: only a conflict (409) is tried again, ``CONFLICT_RETRIES`` tries in all,
    each wait 0.2 s longer than the last."""
    if error.status == 409 and attempt < CONFLICT_RETRIES - 1:
        return 0.2 * (attempt + 1)
    return None
