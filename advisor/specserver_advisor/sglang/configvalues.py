"""Typed reads of HF ``config.json`` values: every value the advisor uses comes through these.

A config is someone else's JSON (a hub, a directory, a tenant's inline spec): ``architectures``
may not be a list, ``max_position_embeddings`` may be ``"NaN"``, ``num_attention_heads`` 0,
``rope_scaling`` a list. Each reader here returns the value as the advisor uses it or raises
:class:`ConfigShapeError` (a ValueError) naming the key path, so no caller sees a KeyError,
ZeroDivisionError or AttributeError. ``configcheck.check_model_config`` runs them over a whole
config once, where a config is read; ``modelshape``, ``sglang.context``, ``sglang.resolve``,
``drafts`` and ``launch_args`` read through them. Pure; imports nothing of the advisor.
"""

from __future__ import annotations

import math
from typing import Any

#: Integers larger than this are no model's (a hostile 10^300 would overflow float maths).
MAX_INTEGER = 2**40


class ConfigShapeError(ValueError):
    """A model config lacks a value the advisor needs, or has one of the wrong type or range;
    the message names the key path (and, from ``check_model_config``, the config)."""


def shown(value: Any) -> str:
    """``repr(value)``, cut short (a hostile value may be megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _path(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def integer(cfg: dict[str, Any], key: str, minimum: int = 0, prefix: str = "") -> int | None:
    """``cfg[key]`` as an int (None when absent or null): an int, an integral-valued number or a
    numeric string, at least ``minimum`` and at most ``MAX_INTEGER``."""
    value = cfg.get(key)
    if value is None:
        return None
    where = _path(prefix, key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigShapeError(f"{where}: {shown(value)} is not an integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigShapeError(f"{where}: {shown(value)} is not an integer")
    try:
        number = int(value)
    except (ValueError, OverflowError):
        raise ConfigShapeError(f"{where}: {shown(value)} is not an integer") from None
    if not minimum <= number <= MAX_INTEGER:
        raise ConfigShapeError(
            f"{where}: {number} is out of range (at least {minimum}, at most {MAX_INTEGER})"
        )
    return number


def number(cfg: dict[str, Any], key: str, prefix: str = "") -> float | None:
    """``cfg[key]`` as a finite positive float (None when absent, null or 0: SGLang's ``or 1``)."""
    value = cfg.get(key)
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    where = _path(prefix, key)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigShapeError(f"{where}: {shown(value)} is not a number")
    try:
        out = float(value)
    except (ValueError, OverflowError):
        raise ConfigShapeError(f"{where}: {shown(value)} is not a number") from None
    if not math.isfinite(out) or out <= 0 or out > MAX_INTEGER:
        raise ConfigShapeError(f"{where}: {shown(value)} is not a finite positive number")
    return out


def mapping(cfg: dict[str, Any], key: str, prefix: str = "") -> dict[str, Any] | None:
    """``cfg[key]`` when it is an object (None when absent, null or empty)."""
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigShapeError(
            f"{_path(prefix, key)}: expected an object, got {type(value).__name__} {shown(value)}"
        )
    return value or None


def string(cfg: dict[str, Any], key: str, prefix: str = "") -> str | None:
    """``cfg[key]`` when it is a string (None when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigShapeError(
            f"{_path(prefix, key)}: expected a string, got {type(value).__name__} {shown(value)}"
        )
    return value


def flag(cfg: dict[str, Any], key: str, prefix: str = "") -> bool | None:
    """``cfg[key]`` when it is true or false (None when absent or null)."""
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ConfigShapeError(f"{_path(prefix, key)}: {shown(value)} is not true or false")
    return value


def architectures(config: dict[str, Any] | None, prefix: str = "") -> list[str]:
    """``architectures``: a list of strings ([] when absent or null)."""
    value = (config or {}).get("architectures")
    if value is None:
        return []
    where = _path(prefix, "architectures")
    if not isinstance(value, list):
        raise ConfigShapeError(
            f"{where}: expected a list of strings, got {type(value).__name__} {shown(value)}"
        )
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigShapeError(f"{where}.{index}: {shown(item)} is not a string")
    return value


def architecture(config: dict[str, Any] | None, default: str = "") -> str:
    """The first of ``architectures`` (``default`` when there is none)."""
    archs = architectures(config)
    return archs[0] if archs else default
