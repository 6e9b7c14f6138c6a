"""The launch corpus's stored verdicts are SGLang 0.5.23's: a third of them (every third
launch) is asked of the oracle again and must come out the same (the rest by the script)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from launchcorpus_verdicts import CORPUS, local_models, verdict

from oracle import Oracle
from specserver_advisor.gpus import lookup_gpu


def test_stored_verdicts_are_sglangs(sglang: Oracle) -> None:
    launches = json.loads((CORPUS / "launches.json").read_text())["launches"]
    stored = json.loads((CORPUS / "verdicts.json").read_text())["verdicts"]
    with tempfile.TemporaryDirectory() as tmp:
        for entry, expected in list(zip(launches, stored, strict=True))[::3]:
            argv = local_models(entry["argv"], Path(tmp))
            answer = sglang.resolve(argv, lookup_gpu(entry["gpu"]), entry["env"])
            got = {"file": entry["file"], "lines": entry["lines"], **verdict(answer, entry["argv"])}
            assert got == expected
