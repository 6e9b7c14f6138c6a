"""plan's SpecServer snippet round-trips (issue 40): from every launch form lint reads
(``--flag value``, ``--flag=value``, abbreviations, values from the file's environment, an SGLang
``--config`` file) the snippet names the same model, draft, shape and engine settings; the
operator's own validation admits it; ``plan --from`` the snippet plans the same launch; it never
carries a credential's value, and in mode Auto it pins no cap binding both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserver_advisor.cli.main import main
from specserver_advisor.sglang.flagtable import default_of
from specserver_operator.core import speccheck

#: What the operator renders for every SpecServer (or decides itself), not the launch's own.
OPERATOR_OWNED = {"host", "port", "enable_metrics", "max_running_requests"}
#: What the snippet states explicitly that the launch left to SGLang (same values resolved).
EXPLICIT = {
    "mem_fraction_static",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "tp_size",
}
SECRETS = ("sk-verysecret-123", "hf_abcdefSECRET", "keykeykeySECRET", "pa55wordSECRET")


def _deployment(args: list[str], env: dict[str, str] | None = None) -> str:
    container: dict[str, Any] = {
        "name": "sglang",
        "image": "lmsysorg/sglang:v0.5.23-runtime",
        "command": ["python3", "-m", "sglang.launch_server"],
        "args": args,
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "served"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    return yaml.safe_dump(doc)


EAGLE = [
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "Tengyunw/qwen3_8b_eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]
#: Each form: (files by name, the file planned). All are Qwen3-8B + its EAGLE3 draft, or
#: Llama-3.1-8B NGRAM, on one H100, with engine settings of their own.
FORMS: dict[str, tuple[dict[str, str], str]] = {
    "flag-space-shell": (
        {
            "serve.sh": "#!/bin/sh\npython -m sglang.launch_server --model-path Qwen/Qwen3-8B "
            + " ".join(EAGLE)
            + " --kv-cache-dtype fp8_e4m3 --context-length 16384 --chunked-prefill-size 4096\n"
        },
        "serve.sh",
    ),
    "flag-equals-deployment": (
        {
            "deploy.yaml": _deployment(
                [
                    "--model-path=Qwen/Qwen3-8B",
                    *[f"{EAGLE[k]}={EAGLE[k + 1]}" for k in range(0, len(EAGLE), 2)],
                    "--mem-fraction-static=0.8",
                    "--page-size=16",
                    "--host=0.0.0.0",
                ]
            )
        },
        "deploy.yaml",
    ),
    "abbreviations": (
        {
            "serve.sh": "python3 -m sglang.launch_server --model-p meta-llama/Llama-3.1-8B-Instruct"
            " --speculative-algo NGRAM --speculative-num-draft 8 --kv-cache-dt fp8_e5m2"
            " --context-len 8192 --schedule-pol lpm\n"
        },
        "serve.sh",
    ),
    "environment": (
        {
            "deploy.yaml": _deployment(
                [
                    "--model-path",
                    "$(MODEL)",
                    "--speculative-algorithm",
                    "$(ALGO)",
                    "--speculative-draft-model-path",
                    "$(DRAFT)",
                    "--dtype",
                    "bfloat16",
                ],
                {
                    "MODEL": "Qwen/Qwen3-8B",
                    "ALGO": "EAGLE3",
                    "DRAFT": "Tengyunw/qwen3_8b_eagle3",
                    "SGLANG_ENABLE_TORCH_COMPILE": "0",
                },
            )
        },
        "deploy.yaml",
    ),
    "config-file": (
        {
            "serve.sh": "#!/bin/sh\nsglang serve --config sglang.yaml --port 8080\n",
            "sglang.yaml": "model-path: meta-llama/Llama-3.1-8B-Instruct\n"
            "speculative-algorithm: NGRAM\nspeculative-ngram-max-bfs-breadth: 6\n"
            "context-length: 4096\nmax-prefill-tokens: 8192\n",
        },
        "serve.sh",
    ),
}


def _write(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["plan", *args])
    return rc, capsys.readouterr().out


def snippet_doc(text: str) -> dict[str, Any]:
    """The printed ``# SpecServer`` snippet as a whole SpecServer document."""
    lines = text.splitlines()
    start = lines.index("spec:")
    end = lines.index("", start)
    body = yaml.safe_load("\n".join(lines[start:end]))
    assert isinstance(body, dict)
    return {
        "apiVersion": "specserver.io/v1alpha1",
        "kind": "SpecServer",
        "metadata": {"name": "from-plan", "namespace": "default"},
        **body,
    }


def _same_launch(given: dict[str, Any], again: dict[str, Any]) -> None:
    """The launch ``plan --from`` the snippet plans is the given one: every flag the launch
    set, and the values the snippet makes explicit as SGLang resolved them."""
    flags, flags_again = given["flags"], again["flags"]
    for name, value in flags.items():
        if name in OPERATOR_OWNED or name == "config_file":
            continue
        assert flags_again.get(name) == value, name
    extra = {
        name: value
        for name, value in flags_again.items()
        if name not in flags
        and name not in OPERATOR_OWNED | EXPLICIT
        and value != default_of(name)  # the operator renders some defaults explicitly
    }
    assert not extra, f"the snippet's launch sets {extra}, the given one does not"
    keys = ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens", "mem_fraction_static")
    for key in keys:
        assert again["resolved"][key] == given["resolved"][key], key
    assert again["context"]["effective"] == given["context"]["effective"]
    assert again["memory"]["mem_fraction_static"] == given["memory"]["mem_fraction_static"]


@pytest.mark.parametrize("form", FORMS)
def test_the_snippet_round_trips_from_each_launch_form(
    form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files, planned = FORMS[form]
    _write(tmp_path, files)
    source = str(tmp_path / planned)
    rc, text = _plan(capsys, "--from", source, "--gpu", "H100")
    assert rc == 0, text
    doc = snippet_doc(text)
    # The operator's own validation (ConfigValid, the webhook) admits it.
    server, problems = speccheck.parse(doc)
    assert server is not None and problems == [], problems
    rc, given_json = _plan(capsys, "--from", source, "--gpu", "H100", "--format", "json")
    assert rc == 0
    given = json.loads(given_json)
    (tmp_path / "specserver.yaml").write_text(yaml.safe_dump(doc))
    rc, again_json = _plan(capsys, "--from", str(tmp_path / "specserver.yaml"), "--format", "json")
    assert rc == 0, again_json
    again = json.loads(again_json)
    _same_launch(given, again)
    assert again["verdict"]["starts"] is True
    if given["resolved"]["algorithm"]:
        # mode Auto: no fixed cap; the operator renders the cap plan recommends
        assert server.spec.mode.value == "Auto"
        assert server.spec.engine.max_running_requests is None
        recommended = given["max_running_requests"]["recommended"]
        assert again["flags"]["max_running_requests"] == recommended


def test_the_snippet_reads_each_spelling_as_sglang_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The measured case: ``--flag=value`` args gave ``model: {path: 0.9}`` and no draft."""
    files, planned = FORMS["flag-equals-deployment"]
    _write(tmp_path, files)
    _, text = _plan(capsys, "--from", str(tmp_path / planned), "--gpu", "H100")
    spec = snippet_doc(text)["spec"]
    assert spec["model"] == {"path": "Qwen/Qwen3-8B"}
    assert spec["draft"] == {"path": "Tengyunw/qwen3_8b_eagle3"}
    assert spec["speculative"] == {
        "algorithm": "EAGLE3",
        "numSteps": 3,
        "eagleTopk": 1,
        "numDraftTokens": 4,
    }
    assert spec["engine"]["memFractionStatic"] == 0.8
    assert spec["engine"]["extraArgs"] == ["--page-size=16"]
    files, planned = FORMS["abbreviations"]
    _write(tmp_path, files)
    _, text = _plan(capsys, "--from", str(tmp_path / planned), "--gpu", "H100")
    spec = snippet_doc(text)["spec"]
    assert spec["model"] == {"path": "meta-llama/Llama-3.1-8B-Instruct"}
    assert spec["speculative"] == {"algorithm": "NGRAM", "numDraftTokens": 8}
    assert spec["engine"]["contextLength"] == 8192
    # abbreviations are spelled out: the operator's extraArgs check knows every spelling
    assert spec["engine"]["extraArgs"] == [
        "--kv-cache-dtype",
        "fp8_e5m2",
        "--schedule-policy",
        "lpm",
    ]


def _secret_launch(tmp_path: Path) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text(
        _deployment(
            [
                "--model-path=Qwen/Qwen3-8B",
                "--speculative-algorithm=NGRAM",
                f"--api-k={SECRETS[0]}",
                "--ssl-keyfile-password",
                SECRETS[3],
            ],
            {
                "HF_TOKEN": SECRETS[1],
                "MY_SERVICE_KEY": SECRETS[2],
                "HF_HOME": "/models",
                "SGLANG_LOG_LEVEL": "info",
            },
        )
    )
    return path


def test_plan_and_lint_never_print_a_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _secret_launch(tmp_path)
    outputs = []
    for fmt in ("text", "json"):
        rc, out = _plan(capsys, "--from", str(path), "--gpu", "H100", "--format", fmt)
        assert rc == 0, out
        outputs.append(out)
    for fmt in ("text", "json", "sarif"):
        main(["lint", str(path), "--gpu", "H100", "--format", fmt])
        captured = capsys.readouterr()
        outputs.append(captured.out + captured.err)
    for out in outputs:
        for secret in SECRETS:
            assert secret not in out
    doc = snippet_doc(outputs[0])
    engine = doc["spec"]["engine"]
    assert engine["env"] == [{"name": "SGLANG_LOG_LEVEL", "value": "info"}]
    assert "extraArgs" not in engine
    text = outputs[0]
    for name in ("HF_TOKEN", "MY_SERVICE_KEY", "HF_HOME", "--api-key", "--ssl-keyfile-password"):
        assert any(line.startswith(f"# {name} is left out") for line in text.splitlines()), name
    # and the operator admits what is left
    assert speccheck.parse(doc)[1] == []


def test_lint_runs_the_operators_validation_on_a_specserver(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SpecServer the operator refuses (HF_TOKEN set in env, a toleration operator Kubernetes
    does not know) is a lint error naming each field, on the field's line (INPUT001, exit 2:
    nothing is rendered from it, as for a SpecServer the schema refuses)."""
    path = tmp_path / "sps.yaml"
    path.write_text(
        "apiVersion: specserver.io/v1alpha1\nkind: SpecServer\nmetadata: {name: demo}\n"
        "spec:\n  model: {path: Qwen/Qwen3-8B}\n  speculative: {algorithm: NGRAM}\n"
        "  engine:\n    env:\n    - {name: HF_TOKEN, value: hf_xyz}\n"
        "  resources:\n    gpus: 1\n    gpuType: H100\n"
        "    tolerations:\n    - {key: gpu, operator: Maybe}\n"
    )
    doc = yaml.safe_load(path.read_text())
    _, problems = speccheck.parse(doc)
    assert len(problems) == 2
    assert main(["lint", str(path), "--format", "json"]) == 2
    found = json.loads(capsys.readouterr().out)
    errors = [d for d in found if d["severity"] == "error"]
    assert sorted(d["message"] for d in errors) == sorted(
        f"invalid SpecServer: {p}" for p in problems
    )
    lines = {d["message"].split(":")[1].strip(): d["line"] for d in errors}
    assert lines["spec.engine.env[0].name"] == 9
    assert lines["spec.resources.tolerations[0].operator"] == 14
    # the same SpecServer without them: lint and the operator both admit it
    path.write_text(path.read_text().replace("HF_TOKEN", "LOG").replace("Maybe", "Exists"))
    assert speccheck.parse(yaml.safe_load(path.read_text()))[1] == []
    assert main(["lint", str(path), "--format", "json"]) == 0


def test_lint_refuses_what_the_default_operator_refuses_at_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """POD009: the pod policy and the expected tokens against the context, the same functions
    the operator's render checks call (``speccheck.render_problems`` under default settings)."""
    from specserver_operator.core.podpolicy import PodPolicy

    base = (
        "apiVersion: specserver.io/v1alpha1\nkind: SpecServer\nmetadata: {name: demo}\n"
        "spec:\n  model: {path: Qwen/Qwen3-8B}\n  speculative: {algorithm: NGRAM}\n"
        "  resources: {gpus: 1, gpuType: H100}\n"
    )
    cases = {
        "hostPath": "  modelSource:\n    volume: {hostPath: /data, mountPath: /models}\n",
        "tolerations": "  engine: {}\n",
        "expected": "  engine: {expectedInputTokens: 50000}\n",
    }
    for name, extra in cases.items():
        text = base + extra
        if name == "tolerations":
            text = text.replace(
                "gpuType: H100}", "gpuType: H100, tolerations: [{operator: Exists}]}"
            )
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        server, problems = speccheck.parse(yaml.safe_load(text))
        assert server is not None and problems == []
        refused = speccheck.render_problems(server, None, PodPolicy())
        assert main(["lint", str(path), "--format", "json", "--select", "POD009"]) == 1
        found = json.loads(capsys.readouterr().out)
        assert [d["code"] for d in found] == ["POD009"] * len(found) and found, name
        if refused:  # the render's own checks (the context needs the model: asserted by lint)
            assert found[0]["message"] == refused[0][1]
