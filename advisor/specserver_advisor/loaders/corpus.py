"""The bundled public validation corpus and the model configs its figures name (package data)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

CORPUS = "data/validation-corpus.json"


def load_corpus() -> dict[str, Any]:
    """``data/validation-corpus.json``: sources, setups and figures (``perf.validation``)."""
    text = resources.files("specserver_advisor").joinpath(CORPUS).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def model_config(name: str) -> dict[str, Any]:
    """A bundled published model config (``data/configs/NAME.json``)."""
    text = resources.files("specserver_advisor").joinpath(f"data/configs/{name}.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data
