"""The cached SGLang 0.5.23 environment the fidelity oracle runs in (never the project's venv).

``scripts/oracle-env install`` builds ``$SPECSERVER_CACHE/sglang-0.5.23`` once (a separate virtual
environment with SGLang 0.5.23, torch and transformers 5.19, see ../shared/reference/
sglang-oracle.md); later calls are a no-op. ``scripts/oracle-env path`` prints the interpreter.
``scripts/oracle-env flags`` regenerates the committed flag table
(``advisor/specserver_advisor/sglang/data/flags-0.5.23.json``) from SGLang's real argparse parser.
Standard library only: it runs before the project's virtual environment exists. When the package
index cannot be reached (or the cache cannot be written) the install fails with a message naming
what is missing; scripts/test then fails with it, and the oracle tests, run without scripts/test,
skip with it (``tests/oracle``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SGLANG_VERSION = "0.5.23"
CACHE = Path(
    os.environ.get("SPECSERVER_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specserver"
)
ENV_DIR = CACHE / f"sglang-{SGLANG_VERSION}"
PYTHON = ENV_DIR / "bin" / "python"
REPO = Path(__file__).resolve().parent.parent
WORKER = REPO / "tests" / "oracle" / "sglang_worker.py"
FLAG_TABLE = (
    REPO / "advisor" / "specserver_advisor" / "sglang" / "data" / f"flags-{SGLANG_VERSION}.json"
)
MARKER = ENV_DIR / "specserver-oracle-env.json"
FAILED = CACHE / f"sglang-{SGLANG_VERSION}.install-failed"
# What `import sglang.srt.server_args` and one resolution need (found by importing and resolving;
# SGLang's own dependency list is installed only in part: no CUDA kernels, no serving stack).
RUNTIME_PACKAGES = [
    "msgspec",
    "numpy",
    "orjson",
    "psutil",
    "pybase64",
    "requests",
    "torch==2.14.1",
    "packaging",
    "pillow",
    "starlette",
    "pydantic",
    "pyzmq",
    "tqdm",
    "ipython",
    "aiohttp",
    "transformers==5.19.0",
    "torchvision",
    "dill",
    "apache-tvm-ffi",
    "sentencepiece",
    "compressed-tensors",
    "gguf",
    "openai",
    "partial_json_parser",
]


def log(msg: str) -> None:
    """Progress line on stderr (stdout is kept for what callers parse)."""
    print(f"oracle-env: {msg}", file=sys.stderr, flush=True)


def _fingerprint() -> str:
    text = json.dumps({"sglang": SGLANG_VERSION, "packages": RUNTIME_PACKAGES}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ready() -> bool:
    """True when the cached environment exists and was built from this package list."""
    if not PYTHON.exists() or not MARKER.exists():
        return False
    try:
        return bool(json.loads(MARKER.read_text()).get("fingerprint") == _fingerprint())
    except (OSError, ValueError):
        return False


def _pip(*args: str) -> None:
    done = subprocess.run(
        [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-15:])
        raise RuntimeError(f"pip install {' '.join(args)} failed:\n{tail}")


def install() -> Path:
    """Build the environment once; return its interpreter. Raises RuntimeError with the reason."""
    if ready():
        return PYTHON
    if PYTHON.exists():
        log(f"updating {ENV_DIR} to the current package list")
    else:
        log(f"building {ENV_DIR} (SGLang {SGLANG_VERSION}, torch, transformers; minutes, ~6 GB)")
        shutil.rmtree(ENV_DIR, ignore_errors=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(ENV_DIR)], check=True)
    try:
        _pip("--no-deps", f"sglang=={SGLANG_VERSION}")
        _pip(*RUNTIME_PACKAGES)
        check = subprocess.run(
            [str(PYTHON), "-c", "import sglang.srt.server_args"],
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            raise RuntimeError(
                "import sglang.srt.server_args failed:\n" + check.stderr.strip()[-2000:]
            )
    except RuntimeError as exc:
        FAILED.write_text(str(exc) + "\n")
        raise
    MARKER.write_text(json.dumps({"fingerprint": _fingerprint(), "sglang": SGLANG_VERSION}))
    FAILED.unlink(missing_ok=True)
    log(f"cached the SGLang oracle environment in {ENV_DIR}")
    return PYTHON


def dump_flags() -> str:
    """SGLang's parser, every action, as the JSON the advisor commits (run in the oracle env)."""
    done = subprocess.run(
        [str(install()), str(WORKER), "flags"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")},
    )
    if done.returncode != 0:
        raise RuntimeError("dumping SGLang's parser failed:\n" + done.stderr[-2000:])
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    """Command line: install | path | status | flags."""
    parser = argparse.ArgumentParser(prog="scripts/oracle-env", description=__doc__)
    parser.add_argument("command", choices=["install", "path", "status", "flags"])
    args = parser.parse_args(argv)
    if args.command == "flags":
        try:
            FLAG_TABLE.write_text(dump_flags())
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            log(str(exc))
            return 1
        print(FLAG_TABLE)
        return 0
    if args.command == "install":
        try:
            print(install())
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            log(f"SGLang {SGLANG_VERSION} oracle environment not built: {exc}")
            return 1
        return 0
    if args.command == "path":
        print(PYTHON)
        return 0 if ready() else 1
    print("ready" if ready() else "missing")
    return 0 if ready() else 1


if __name__ == "__main__":
    sys.exit(main())
