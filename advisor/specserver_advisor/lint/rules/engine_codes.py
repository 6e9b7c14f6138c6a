"""Documentation of the codes the lint engine itself emits (not rules): what each means and
what to do, for ``explain``, docs/rules.md and SARIF. The registry in ``__init__`` holds their
names and severities.
"""

from __future__ import annotations


def _doc(what: str, why: str, example: str, instead: str) -> str:
    return (
        f"What it does:\n    {what}\nWhy it matters:\n    {why}\n"
        f"Example (fails):\n    {example}\nUse instead:\n    {instead}"
    )


#: code -> (summary, fix, documentation)
DOCS = {
    "INPUT001": (
        "A file that cannot be read or parsed: nothing in it was checked.",
        "Fix the file so it parses, or exclude it from the lint run.",
        _doc(
            "Reports a file the linter cannot read: invalid YAML (at the line and column the "
            "parser stopped), an invalid SpecServer (one the operator refuses: its own validation, "
            "every problem at its field, or the key of an inline "
            "model config of the wrong type), a shell script with an unterminated quote, a "
            "binary, non-UTF-8 or oversized file (over 2,000,000 bytes, stdin included), YAML "
            "whose aliases expand past 1,000,000 nodes or that nests past 100 levels, more "
            "than 10,000 YAML documents, a number written with more than 64 characters (any "
            "base, sexagesimal included), a recursive alias, or a tag that does not fit its "
            "value (docs/advisor.md, Input limits).",
            "Nothing in such a file was checked, so the run exits 2 instead of passing.",
            "a YAML file with `args: [--tp, 2` (unclosed flow sequence)",
            "fix the file, or --extend-exclude it",
        ),
    ),
    "INFO001": (
        "Model configs not found: the context and memory rules did not run for a launch.",
        "Pass --model-dir DIR, populate the HF cache, or use --fetch-configs.",
        _doc(
            "Reports, once per launch, that the target's or the draft's config.json was not "
            "found, naming the model and the rules that did not run (a draft path SGLang "
            "ignores, beside an MTP target, needs no config). A model at an absolute path in "
            "the container (/models/org/name) is found with --model-dir PATH=DIR (or the "
            "settings' model-dirs), DIR being the local folder for PATH.",
            "SPEC002, SPEC009, SPEC014 and SPEC016 need the target's config, SPEC002 and SPEC014 "
            "the draft's too; without them they are skipped, not passed.",
            "--model-path org/private-model (not in the HF cache, no --model-dir)",
            "specserver-advisor lint --model-dir /models ...",
        ),
    ),
    "INFO002": (
        "A shell variable the file never sets: the values it supplies are not checked.",
        "Set the variable in the script, or give a default with ${NAME:-value}.",
        _doc(
            "Reports, once per variable, a value a launch uses that the file does not "
            "determine: a shell variable the script does not set (e.g. one exported by the "
            "caller), a command's output, a Kubernetes $(VAR) whose env comes from a Secret or "
            "ConfigMap, or a quoted template expression such as {{ .Values.tp }}. It names the "
            "options whose value the variable gives.",
            "The linter does not guess values: a word that is only that variable is left out of "
            "the argv and a flag value from it is not checked (its type, SPEC001's cap, the "
            "memory rules), so mistakes in it can pass. Flag names are decided without values "
            "and stay checked: `--cuda-graph-max-bs $BS` is still SPEC015.",
            'python -m sglang.launch_server --model-path "$MODEL" $EXTRA_ARGS',
            'MODEL="${MODEL:-Qwen/Qwen3-8B}" (a default the linter can read)',
        ),
    ),
    "INFO003": (
        "A template (`{{ }}` outside YAML values, a chart's templates/): not linted as YAML.",
        "Lint the rendered output: helm template CHART | specserver-advisor lint -.",
        _doc(
            "Reports a file that does not parse as YAML because of template syntax (Helm, "
            "Jinja), and a Helm chart whose templates/ the default excludes skipped (once per "
            "chart, at its Chart.yaml, naming the helm template command): a chart is never "
            "reported clean when nothing in it was linted.",
            "Template source is not what the cluster runs; its rendered output is.",
            "{{- if .Values.speculative }} on its own line in templates/deployment.yaml",
            "helm template charts/engine | specserver-advisor lint --stdin-filename out.yaml -",
        ),
    ),
    "INFO004": (
        "A launch the shell evaluator did not fully evaluate: its budget ran out.",
        "Simplify the script around the launch, or lint the command it runs.",
        _doc(
            "Reports, once per launch, that the file's shell evaluation reached a limit: its "
            "budget of steps (loops, branches, function calls), words and arguments, or "
            "characters of variable values; a variable's value too large to keep; blocks "
            "nested too deep; a launch line with more arguments than are linted; or a "
            "`--config` file that was not found (relative to the launch file, beside it, or "
            "as a ConfigMap key of its base name in the same file) or whose path is a "
            "variable (then only SPEC015, decided by flag names, and the pod-spec rules run "
            "for that launch). The message names the limit or the file. The flags already "
            "decided are still checked.",
            "Past the limit the script is evaluated along one path (one value per loop, one "
            "call per function) and over-large values are unknown, so a mistake on another "
            "path or in the arguments left out can pass.",
            'for a in $L; do for b in $L; do ... python3 -m sglang.launch_server "$a" ... '
            "(six loops deep)",
            "build the launch line from a few variables; lint what the loop generates",
        ),
    ),
    "INFO005": (
        "A GPU type the memory rules do not know: SPEC009 and SPEC016 did not run.",
        "Pass --gpu (or the SpecServer's gpuType) as one of the names the message lists.",
        _doc(
            "Reports, once per launch, that the GPU type given by --gpu, the settings or a "
            "SpecServer's resources.gpuType is not in the GPU table, listing the valid names.",
            "The KV-pool and memory rules need the GPU's memory; with a mistyped or unknown "
            "name they are skipped, not passed.",
            "specserver-advisor lint --gpu L4x serve.sh",
            "specserver-advisor lint --gpu L4 serve.sh",
        ),
    ),
    "INFO006": (
        "A file that names SGLang (or is a form the finder reads) but writes out no launch.",
        "Write the launch out (a command, an argv list, Engine/ServerArgs keywords, a flag map), "
        "or exclude the file from the lint run.",
        _doc(
            "Reports, once per file, the form the file was read as (Markdown, Jupyter notebook, "
            "Python source, Dockerfile, Makefile, YAML or JSON document, shell script) and why no "
            "launch could be taken from it: it never names SGLang, it names SGLang only in prose "
            "or a `pip install`, its notebook code cells write no launch, or its Python does not "
            "parse.",
            "A file lint read and found nothing in is not a file it checked: saying so keeps a "
            "launch written in a form lint does not read from passing as clean.",
            "lint README.md (SGLang named only in `pip install sglang`)",
            "lint the file that holds the launch",
        ),
    ),
    "SUPP001": (
        "A suppression that suppresses nothing.",
        "Remove the stale suppression comment or annotation entry.",
        _doc(
            "Reports a `# specserver-advisor: ignore[...]` comment or a `specserver.io/ignore` "
            "annotation entry that matched no finding of an enabled rule, or names no rule.",
            "A stale suppression hides the next, different mistake on that command or object.",
            "# specserver-advisor: ignore[SPEC013] (no SPEC013 finding on that command)",
            "delete the comment",
        ),
    ),
}
