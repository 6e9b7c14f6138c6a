"""``specserver-advisor plan``: config discovery (directory, HF cache, endpoint), output, errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specserver_advisor.cli.main import main
from specserver_advisor.loaders.configs import ConfigNotFoundError
from specserver_advisor.loaders.configs import load_config as load
from stack import load_config

L4_ARGS = [
    "--gpu",
    "L4",
    "--steps",
    "3",
    "--topk",
    "1",
    "--draft-tokens",
    "4",
    "--accept-length",
    "2.73",
    "--mem-fraction-static",
    "0.85",
]


def write_model(root: Path, name: str, config: str, total_size: int | None = None) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(load_config(config)))
    if total_size:
        (path / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total_size}, "weight_map": {}})
        )
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    rc = main(["plan", *argv, "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


def test_plan_json_has_the_documented_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = write_model(tmp_path, "qwen", "qwen3-8b")
    draft = write_model(tmp_path, "draft", "qwen3-8b-eagle3")
    rc, out = run_json(
        capsys, "--model", str(target), "--draft", str(draft), *L4_ARGS, "--concurrency", "1,8,32"
    )
    assert rc == 0
    assert set(out) >= {
        "resolved",
        "context",
        "kv_pool_tokens",
        "max_running_requests",
        "curves",
        "crossover_concurrency",
    }
    resolved = out["resolved"]
    assert isinstance(resolved, dict)
    for key in (
        "algorithm",
        "num_steps",
        "eagle_topk",
        "num_draft_tokens",
        "max_running_requests",
        "notes",
    ):
        assert key in resolved
    assert resolved["max_running_requests"] == 48  # SGLang's silent reset
    assert out["context"]["verdict"] == "compatible"  # type: ignore[index]
    assert [c["concurrency"] for c in out["curves"]] == [1, 8, 32]  # type: ignore[attr-defined]
    mrr = out["max_running_requests"]
    assert mrr["recommended"] <= mrr["fits"] < mrr["sglang_default"]  # type: ignore[index]


def test_index_total_size_is_used_for_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = write_model(tmp_path, "small", "qwen3-8b", total_size=8 * 2**30)
    rc, out = run_json(capsys, "--model", str(small), "--algorithm", "NGRAM", *L4_ARGS[:2])
    assert rc in (0, 1)
    assert out["memory"]["target_weights_gib"] == 8.0  # type: ignore[index]


def test_hf_cache_layout_is_found(tmp_path: Path) -> None:
    snap = tmp_path / "hub" / "models--Org--M" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(load_config("qwen3-8b")))
    (tmp_path / "hub" / "models--Org--M" / "refs").mkdir()
    (tmp_path / "hub" / "models--Org--M" / "refs" / "main").write_text("abc123")
    found = load("Org/M", env={"HF_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert found.source.startswith("directory") and "abc123" in found.source


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[str]:
    """A loopback HTTP server laid out like an HF endpoint's resolve URLs."""
    root = tmp_path / "hub"
    files = root / "Org" / "Draft" / "resolve" / "main"
    files.mkdir(parents=True)
    (files / "config.json").write_text(json.dumps(load_config("eagle3-2048-positions")))
    handler = partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_endpoint_fetch_and_context_failure_exit_code(
    tmp_path: Path, hub: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = write_model(tmp_path, "llama", "llama-3.1-8b")
    rc, out = run_json(
        capsys,
        "--model",
        str(target),
        "--draft",
        "Org/Draft",
        "--gpu",
        "H100",
        "--hf-endpoint",
        hub,
        "--context-length",
        "40960",
    )
    assert rc == 1
    assert out["context"]["verdict"] == "startup_fails"  # type: ignore[index]
    assert out["context"]["draft"] == 2048  # type: ignore[index]


def test_offline_by_default_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    rc = main(["plan", "--model", "Unknown/Model", "--gpu", "L4"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "no config.json for 'Unknown/Model'" in err and "offline" in err
    with pytest.raises(ConfigNotFoundError):
        load("Unknown/Model", env={"HOME": str(tmp_path)})


def test_bad_inputs_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert main(["plan", "--model", str(broken), "--gpu", "L4"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "TPUv9"]) == 2
    assert "unknown GPU 'TPUv9'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "L4", "--concurrency", "a,b"])
    assert exc.value.code == 2


def test_text_output_reports_reset_and_crossover(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["plan", "--model", "Qwen/Qwen3-8B", "--draft", "Tengyunw/qwen3_8b_eagle3", *L4_ARGS])
    text = capsys.readouterr().out
    assert rc == 0
    assert "KV pool:" in text and "throughput crossover (out tok/s on = off):" in text
    assert "SGLang resets it to 48" in text
