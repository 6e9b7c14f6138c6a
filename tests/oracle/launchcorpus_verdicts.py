"""Ask SGLang 0.5.23 for the verdict on every launch of the launch corpus; store it as data.

Run from the repository root with the project venv (the oracle env must be built,
``scripts/oracle-env install``): ``.venv/bin/python tests/oracle/launchcorpus_verdicts.py``.
Reads ``tests/advisor/lint/launchcorpus/launches.json`` (written by its ``make.py``), gives
each argv to SGLang's own parser, resolution and draft-context check in the oracle worker
(``sglang_worker.py``: ``prepare_server_args``, ``resolve_once``, ``ModelConfig`` for the
target and the draft) on the launch's GPU, with every model reference replaced by a local
directory holding its bundled ``config.json``, and writes ``verdicts.json``:

- ``refused``: SGLang's argparse exits (an unknown, removed or ambiguous flag, a bad value);
- ``fails``: resolution, the target's or the draft's ``ModelConfig`` raises; or an EAGLE/EAGLE3
  launch resolves to no draft path: SGLang 0.5.23 sets ``speculative_draft_model_path`` only
  for targets that carry MTP layers (``arg_groups/speculative_hook.py``, the
  ``_handle_eagle_family`` architecture list), and the draft worker then builds its model from
  ``ModelConfig(model_path=None)``, i.e. ``cfg.model_path``, the target checkpoint, whose
  architecture ``_config_draft_model`` leaves as it is (``managers/tp_worker.py``,
  ``configs/model_config.py``): the target is loaded as its own EAGLE draft and start-up fails;
- ``accepted`` otherwise, ``capped`` when SGLang resolved ``max_running_requests`` to 48 and the
  launch did not set it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import Oracle, missing
from specserver_advisor.gpus import lookup_gpu
from specserver_advisor.loaders.configs import bundled

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "advisor" / "lint" / "launchcorpus"
MODEL_FLAGS = ("--model-path", "--model", "--speculative-draft-model-path")
TARGET_AS_DRAFT = (
    "EAGLE-family launch without a draft on a target without MTP layers: SGLang resolves no "
    "draft path and its draft worker loads the target checkpoint ({model}) as the draft"
)


def local_models(argv: list[str], root: Path) -> list[str]:
    """The argv with each model reference that has a bundled config replaced by a directory
    holding it (SGLang reads config.json from a local path, offline)."""
    out = list(argv)
    for k, tok in enumerate(out[:-1]):
        if tok in MODEL_FLAGS:
            found = bundled(out[k + 1])
            if found is not None:
                folder = root / out[k + 1].replace("/", "--")
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "config.json").write_text(json.dumps(found.config))
                out[k + 1] = str(folder)
    return out


def verdict(answer: dict, argv: list[str]) -> dict:
    outcome = answer.get("outcome")
    message = str(answer.get("message") or "")
    fields = answer.get("fields") or {}
    draft = answer.get("draft") or {}
    if outcome == "argparse":
        return {"verdict": "refused", "capped": False, "message": message}
    if outcome != "accepted":
        return {"verdict": "fails", "capped": False, "message": f"{outcome}: {message}"}
    if draft and draft.get("outcome") not in (None, "accepted"):
        text = f"draft {draft.get('outcome')}: {draft.get('message')}"
        return {"verdict": "fails", "capped": False, "message": text}
    algorithm = fields.get("speculative_algorithm")
    if algorithm in ("EAGLE", "EAGLE3") and not fields.get("speculative_draft_model_path"):
        model = argv[argv.index("--model-path") + 1] if "--model-path" in argv else "?"
        return {"verdict": "fails", "capped": False, "message": TARGET_AS_DRAFT.format(model=model)}
    explicit = any(t.startswith("--max-running-requests") for t in argv)
    capped = fields.get("max_running_requests") == 48 and not explicit
    return {"verdict": "accepted", "capped": capped, "message": ""}


def main() -> int:
    why = missing()
    if why:
        print(why, file=sys.stderr)
        return 2
    launches = json.loads((CORPUS / "launches.json").read_text())["launches"]
    oracle = Oracle()
    out = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for entry in launches:
                argv = local_models(entry["argv"], Path(tmp))
                answer = oracle.resolve(argv, lookup_gpu(entry["gpu"]), entry["env"])
                out.append(
                    {
                        "file": entry["file"],
                        "lines": entry["lines"],
                        **verdict(answer, entry["argv"]),
                    }
                )
    finally:
        oracle.close()
    data = {"sglang": "0.5.23", "script": "tests/oracle/launchcorpus_verdicts.py", "verdicts": out}
    (CORPUS / "verdicts.json").write_text(json.dumps(data, indent=1) + "\n")
    counts: dict[str, int] = {}
    for v in out:
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    print(f"{len(out)} verdicts: {counts}, capped {sum(v['capped'] for v in out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
