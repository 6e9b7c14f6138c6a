"""Generate ``docs/rules.md`` from the rule registry (``python -m specserver_advisor.lint.docgen``).

A test regenerates it and fails on drift. The "Input limits" section is written from the shell
budget's constants (``shellbudget``), so the document states the limits the code enforces.
"""

from __future__ import annotations

import sys
from pathlib import Path

from specserver_advisor.lint.argv import WRAPPERS
from specserver_advisor.lint.render import anchor
from specserver_advisor.lint.rules import documentation
from specserver_advisor.lint.shell import budget as sb
from specserver_advisor.lint.shell.expand import MAX_ARITH


def input_limits() -> list[str]:
    """The "Input limits" section: the shell budget, what the tool says, what holds it."""
    rows = [
        ("evaluation steps (loops, branches, function calls, copies of variables)", sb.MAX_STEPS),
        ("shell words read and arguments expanded", sb.MAX_WORDS),
        ("characters of the values built", sb.MAX_CHARS),
        ("one variable's value, in characters (a larger one is unknown)", sb.MAX_VALUE),
        ("arguments linted on one launch line (the rest: INFO004)", sb.MAX_ARGS),
        ("nested blocks (`if`, `for`, `{`, calls); deeper is INPUT001", sb.MAX_NESTING),
        ("`${V:-${W:-...}}` nesting; deeper is an unknown value", sb.MAX_EXPANSION_NESTING),
        ("characters of one `$(( ))`, 64-bit; beyond either it is unknown (INFO002)", MAX_ARITH),
    ]
    example = sb.Budget(spent="steps").reason()
    return [
        "",
        "## Input limits",
        "",
        "The linter runs in other people's CI on files it did not write. Each shell script, and "
        "all the `bash -c` commands of one YAML file together, is evaluated within one budget "
        "that every construct spends: loops and nested loops, function calls and recursion, "
        "`if`/`case` branches and the copies of the variables they make, words and expanded "
        "arguments, and the size of every value built.",
        "",
        "| budget or limit (per file unless said) | value |",
        "|---|---|",
        *(f"| {what} | {limit:,} |" for what, limit in rows),
        "",
        "When the budget runs out, the rest of the file is evaluated along one path (one world, "
        "one value per loop, each function once) with a reserve of the same size; when that is "
        "spent too, the evaluation stops. Every launch found in such a file is reported once, "
        "as INFO004 not-fully-evaluated naming the limit, for example "
        f"`not fully evaluated: {example}; the flags it decided are checked`, and every rule "
        "still checks the flags already decided. A launch script of a few hundred lines spends "
        "well under a thousandth of the budget; a file that spends all of it finishes in about "
        "a second.",
        "",
        "The limits on reading files (size, encoding, JSON and YAML depth, YAML aliases) and on "
        "model configs are in docs/advisor.md (Input limits).",
        "",
        "The fuzz suite holds these promises: `tests/advisor/lint/test_fuzz_lint.py` and "
        "`tests/advisor/cli/test_fuzz_plan_replay.py` run `lint`, `plan` and `replay` on mutated "
        "corpus files, binary bytes, deep nesting, YAML anchors and tags, pathological shell and "
        "broken model configs, each within 10 s and 1 GiB, and assert exit 0, 1 or 2 and no "
        "traceback; `tests/advisor/lint/test_shell_budget.py` holds the shell cases (six nested "
        "loops, a recursive function around a loop, a variable doubled 25 times, 2,000 "
        "`if`/`else` lines, a launch line with 400,000 arguments) under a hard memory limit.",
    ]


def values_section() -> list[str]:
    """The "What is decided without values" section: what a variable hides and what not."""
    return [
        "",
        "## What is decided without values",
        "",
        "Launch scripts and benchmark harnesses put a variable the file never sets in almost "
        "every value (`--cuda-graph-max-bs $CONC`). Only what such a variable supplies is "
        "unknowable, not the flag names around it, so every argv is parsed for names whatever "
        "its values hold:",
        "",
        "- Decided without values (reported even when the values are variables): option names, "
        "unique prefixes, ambiguous prefixes, flags 0.5.23 no longer has and unknown flags "
        "(SPEC015), including `--flag=$V`, `--flag=$(VAR)` and keys of a `--config` file; "
        "which flags are present at all (SPEC001 when `--max-running-requests` is absent, "
        "SPEC011, SPEC012, SPEC007's draft path given or missing, SPEC005's shape).",
        "- Waiting for values (not checked, said once per variable as INFO002 naming the "
        "options it gives a value to): a value's type and choices, the numbers the rules "
        "compare (the cap, the speculative shape, sizes and GPUs per pod), the model paths "
        "whose configs the context and memory rules read.",
        "- A `--config FILE` is merged as SGLang 0.5.23 merges it, only for the exact item "
        "`--config` (`--config=FILE` or an abbreviation is parsed and the file ignored, and "
        "two `--config` are refused: SPEC015): each key becomes `--KEY` as written (a true "
        "store_true key the bare flag, "
        "any other bool `--KEY true|false`, a list its items, a mapping its JSON), placed before "
        "the command line, whose flags win; a key SGLang cannot write (e.g. a deprecated "
        "switch) is its `Unsupported config option` error. The file is looked up relative to "
        "the launch file, beside it, or as a ConfigMap key of its base name in the same file; "
        "findings from its keys point at `--config` and name the key and its line. A file not "
        "found (or a path from a variable) leaves every flag unknown: INFO004 says so, and only "
        "SPEC015 and the pod-spec rules run for that launch.",
        "- Unknown as a whole: a word that is only an unquoted variable (`$EXTRA_ARGS`) may be "
        "any number of arguments; it is left out, and a bare word right after it is not "
        "reported (it may be a value of a flag in it). Findings about flags absent from the "
        "argv still stand: a caller's extra arguments are not assumed to supply them. An "
        "option name built from a variable (`--$KNOB`) is not checked.",
    ]


def launchers_section() -> list[str]:
    """The "Launchers and resources" section: what the linter reads a launch from."""
    wrappers = ", ".join(f"`python -m {m}`" for m in WRAPPERS)
    return [
        "",
        "## Launchers and resources",
        "",
        "A launch is `python -m sglang.launch_server` or `sglang serve`, or a wrapper that "
        f"hands its argv to SGLang's ServerArgs after taking its own flags out ({wrappers}): "
        "SGLang's parsing and resolution apply to the rest, so a wrapper launch gets the same "
        "rules, except that an unknown flag name may be the wrapper's and is not reported "
        "(ambiguous prefixes and flags 0.5.23 removed still are). It is found in shell scripts "
        "(including `bash -c '...'` run by `docker exec`/`docker run`/`kubectl exec`, whose "
        "single-quoted variables are the container's: unknown), docker-compose services, "
        "Kubernetes workloads (Deployment, StatefulSet, DaemonSet, Job, CronJob, ReplicaSet, "
        "Pod, LeaderWorkerSet leader and worker templates), OME ServingRuntime and "
        "ClusterServingRuntime (`engineConfig`/`decoderConfig` runners, leader and worker), "
        "NVIDIA Dynamo DynamoGraphDeployment services (`extraPodSpec.mainContainer`, the "
        "service's `resources` as its GPUs), SpecServers and SGLang `--config` YAML files.",
        "",
        "A process that serves no SGLang HTTP API (a LeaderWorkerSet worker, an OME worker "
        "runner, a Dynamo worker, whose frontend serves) gets neither SPEC011 nor SPEC012.",
        "",
        "### Multi-node launches (LeaderWorkerSet)",
        "",
        "A LeaderWorkerSet's containers get the environment LWS injects: `LWS_GROUP_SIZE` "
        "(`leaderWorkerTemplate.size`, default 1), `LWS_WORKER_INDEX` (0 on the leader, 1 on a "
        "worker) and `LWS_LEADER_ADDRESS` (a stand-in name), as `$(VAR)` in `command`/`args` "
        "and as shell variables in `bash -c` strings. A worker template is read a second time "
        "with another index: a `--node-rank` that changes with it comes from the index however "
        "the command builds it (MN002). Without a `leaderTemplate` LWS runs the worker "
        "template as the leader too: it serves HTTP there (SPEC011, SPEC012 apply) and its "
        "probes run on every worker (MN006). A worker (SGLang 0.5.23's node rank >= 1) serves "
        "no API, only a health server on its own `--host`/`--port` (`/ping`, `/health`, "
        "`/health_generate`, `/metrics` with `--enable-metrics`): MN006 holds worker probes "
        "to it. The Services of the same file are "
        "matched against the worker pods' labels (the template's, plus "
        "`leaderworkerset.sigs.k8s.io/name` and a `worker-index` other than 0; a selector on "
        "a label whose value the file does not show, such as the group key, is not judged) "
        "for MN004. MN003 and MN005 also apply to multi-node launches outside a "
        "LeaderWorkerSet (scripts, StatefulSets). The rank layout MN005 checks is SGLang "
        "0.5.23's `_calculate_rank_ranges`, compared with SGLang's own source by "
        "`tests/oracle/test_multinode_ranks.py`.",
    ]


#: The launch-corpus benchmark's last line (``scripts/bench-lint-corpus``), quoted in the docs.
CORPUS_FIGURE = (
    "22 forms, 204 launches in 42 files: lint agrees with SGLang 0.5.23 on 204 (100.0%); "
    "204 launches found, 0 silent files"
)


def forms_section() -> list[str]:
    """The "Where launches are found" section: the forms the finder reads, and the corpus."""
    return [
        "",
        "## Where launches are found",
        "",
        "Any text file is read by its own syntax (`lint.finder`), and a launch is found by what "
        "it is, not by where a known format keeps it: `python -m sglang.launch_server ...` (or a "
        "wrapper above), `sglang serve ...`, an argv list that holds one, `sglang.Engine(...)` / "
        "`ServerArgs(...)` / `Runtime(...)` keyword arguments (`model_path=` becomes "
        "`--model-path`, `True` a bare flag, a literal bound earlier in the file its value), and "
        "argv lists, command strings, container-like maps (`command`/`args`) and flag maps under "
        "any key of any YAML or JSON document (Helm values, SkyPilot `run:`, GitHub Actions "
        "`run:`, Ray Serve or other JSON configs). The container forms: Markdown fences (by "
        "language: shell, Python, YAML/JSON, Dockerfile, Makefile) and inline code; Jupyter "
        "notebook code cells (IPython `!` lines and `%%bash` cells as shell, the rest as "
        "Python); Python source (read with `ast`, never run: `subprocess`/`os.system` strings, "
        'notebook helpers such as `launch_server_cmd("""...""")`, f-strings whose '
        "unknown parts are INFO002, `sys.executable` as the interpreter); Dockerfile `CMD`/"
        "`ENTRYPOINT`/`RUN` (an exec `ENTRYPOINT` and an exec `CMD` are one argv; `ENV`/`ARG` "
        "values are the shell's environment); Makefile recipes (simple variables substituted, "
        "`$$` as `$`); SGLang cookbook model YAML, generated form (`model_path`, each "
        "hardware's `configurations` with `engine.tp`/`dp`/`ep`/`extra_args`) and source form "
        "(`defaults.configurations` crossed with each family's models and hardware), one "
        "launch per configuration with that GPU; shell scripts.",
        "",
        "Every launch is reported at its line (and column) in the file the user opened, also "
        "inside a notebook's JSON or a string in Python, and its findings name the form they "
        "were read from: `(in notebook cell 7, Python string at line 19)`, `(in README.md "
        "fence at line 40)`, `(in cookbook configuration Qwen3-8B H200/latency)`. A file of "
        "these forms, or any file that names SGLang, in which no launch can be taken gets one "
        "INFO006 saying which form it was read as and why; a Markdown file is never reported "
        "as invalid YAML. A launch that elides arguments (`python -m sglang.launch_server "
        "...`) is checked on what it writes and reported INFO004, not as an unknown argument. "
        "Inputs are bounded before parsing (the file size, then cells, snippets and nodes).",
        "",
        "The launch corpus (`tests/advisor/lint/launchcorpus`: launches written in the shapes "
        "published repositories use, each file naming its source) is judged by SGLang 0.5.23 "
        "itself: `tests/oracle/launchcorpus_verdicts.py` gives each argv to SGLang's parser, "
        "resolution and draft-context check in the oracle environment and stores the verdict "
        "(accepted, capped at 48, refused by the parser, or failing at resolution or start-up, "
        "including an EAGLE/EAGLE3 launch whose target carries no MTP layers and gets no draft "
        "path, so the target checkpoint is loaded as the draft). `scripts/bench-lint-corpus` "
        "prints launches and agreement per form; its last line:",
        "",
        "```text",
        CORPUS_FIGURE,
        "```",
    ]


def render() -> str:
    """The whole rules document: a table, then one section per code (rules and engine codes)."""
    docs = documentation()
    lines = [
        "# specserver-advisor lint rules",
        "",
        "Generated by `python -m specserver_advisor.lint.docgen` from the rule registry; "
        "do not edit. `specserver-advisor explain CODE` prints a section.",
        "",
        "| code | name | severity | what it catches |",
        "|---|---|---|---|",
    ]
    for code, doc in docs.items():
        link = f"[{code}](#{anchor(code, doc.name)})"
        lines.append(f"| {link} | {doc.name} | {doc.severity} | {doc.summary} |")
    for code, doc in docs.items():
        lines += ["", f"## {code} {doc.name}", "", f"Severity: {doc.severity}.", ""]
        lines += ["```text", doc.doc, "```", "", f"Fix: {doc.fix}"]
    lines += values_section()
    lines += launchers_section()
    lines += forms_section()
    lines += input_limits()
    return "\n".join(lines) + "\n"


def main() -> int:
    """Write docs/rules.md (or --check)."""
    target = Path("docs/rules.md")
    text = render()
    if "--check" in sys.argv[1:]:
        return 0 if target.exists() and target.read_text() == text else 1
    target.write_text(text)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
