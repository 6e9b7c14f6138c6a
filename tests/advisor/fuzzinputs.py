"""Hypothesis strategies for hostile advisor inputs: mutated corpus files, binary bytes, deep
nesting, YAML anchors and tags, pathological shell and broken model configs (issue 31).

Used by ``test_fuzz_lint.py`` and ``test_fuzz_plan_replay.py``; every strategy is bounded so an
example is at most a couple of megabytes (the advisor's file limit) and quick to generate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

HERE = Path(__file__).parent
CORPUS = sorted(
    p
    for root in (HERE / "corpus", HERE / "fixtures")
    for p in root.rglob("*")
    if p.is_file() and p.suffix in (".sh", ".yaml", ".yml", ".json")
)
LLAMA = json.loads((HERE / "fixtures" / "models" / "llama" / "config.json").read_text())
LAUNCH = (
    "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --host 0.0.0.0"
)
SUFFIXES = (".sh", ".yaml", ".yml", ".json", "", ".bash")


class Payload:
    """An input's bytes (and the file suffix it is written under), shown short in reports (a
    plain class: Hypothesis would print a dataclass field by field, megabytes of it)."""

    __slots__ = ("data", "suffix")

    def __init__(self, data: bytes, suffix: str = "") -> None:
        self.data, self.suffix = data, suffix

    def __repr__(self) -> str:
        head = self.data[:80]
        more = f" ... {len(self.data):,} bytes" if len(self.data) > 80 else ""
        return f"Payload({head!r}{more}, suffix={self.suffix!r})"


def laughs(levels: int, width: int) -> str:
    """A YAML alias bomb: ``width ** levels`` items from a few hundred bytes."""
    lines = ['a0: &a0 ["lol"]']
    for k in range(1, levels + 1):
        lines.append(f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


YAML_SNIPPETS = (
    laughs(9, 9),
    "a: &a [*a]\n",
    "dryRun: !!int yes\n",
    "x: !!python/object/apply:os.system ['true']\n",
    "base: &b {kind: Pod}\nmerged: {<<: *b, <<: *b}\n",
    "--- !!set\n? a\n? b\n",
    "? [a, b]\n: c\n",
    "k: !!binary AAAA\n",
    "k: v\nk: w\n",
    "\t- tab\n",
    "spec: {containers: [{command: [bash, -c, 'for a in 1 2; do " + LAUNCH + "; done']}]}\n",
    "args: *nowhere\n",
)
SHELL_SNIPPETS = (
    "$(" * 300,
    "${A:-" * 300,
    "for i in a b c d e f g h; do\n" * 6 + LAUNCH + "\n" + "done\n" * 6,
    "V0=x\n" + "".join(f'V{i + 1}="$V{i} $V{i}"\n' for i in range(30)),
    "if x; then\n" * 150,
    "\\\n" * 1000,
    '"unterminated',
    "cat <<EOF\nno end\n",
    'eval "$X"\n',
    "f() { f; f; }\nf\n",
    "echo $((2**64)) $((9223372036854775807 * 9))\n",
    "A=(" + "x " * 10_000 + ")\n" + LAUNCH + ' "${A[@]}"\n',
    "seq 1 10000000\n",
    LAUNCH + " --port $((1/0)) ${X:?unset} ${#A[@]} ${A[@]:1}\n",
)


@st.composite
def mutated_corpus(draw: st.DrawFn) -> Payload:
    """A corpus or fixture file, mutated a few times; its suffix, sometimes another one."""
    path = draw(st.sampled_from(CORPUS))
    data = bytearray(path.read_bytes())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "cut", "repeat", "snippet", "bytes", "truncate"]))
        if kind == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 200))]
        elif kind == "repeat":
            chunk = data[at : at + draw(st.integers(1, 300))]
            data[at:at] = chunk * draw(st.integers(1, 200))
        elif kind == "snippet":
            snippet = draw(st.sampled_from(YAML_SNIPPETS + SHELL_SNIPPETS))
            data[at:at] = snippet.encode()
        elif kind == "bytes":
            data[at:at] = draw(st.binary(max_size=64))
        else:
            del data[at:]
    suffix = draw(st.sampled_from([path.suffix, path.suffix, *SUFFIXES]))
    return Payload(bytes(data), suffix)


def nested(kind: str, depth: int) -> str:
    """Text nested ``depth`` deep in one of the ways parsers recurse."""
    if kind == "flow-seq":
        return "args: " + "[" * depth + "]" * depth + "\n"
    if kind == "flow-map":
        return "a: " + "{a: " * depth + "1" + "}" * depth + "\n"
    if kind == "block":
        return "".join(" " * k + "- \n" for k in range(0, min(depth, 3000)))
    if kind == "json":
        return "[" * depth + "]" * depth
    if kind == "subst":
        return LAUNCH + " " + "$(" * depth + ")" * depth + "\n"
    if kind == "braces":
        return "{ " * depth + LAUNCH + "; " + "}; " * depth + "\n"
    if kind == "subshell":
        return "(" * depth + LAUNCH + ")" * depth + "\n"
    if kind == "if":
        return "if x; then " * depth + LAUNCH + "; " + "fi; " * depth + "\n"
    return "${A:-" * depth + "x" + "}" * depth + "\n"


NESTING_KINDS = (
    "flow-seq",
    "flow-map",
    "block",
    "json",
    "subst",
    "braces",
    "subshell",
    "if",
    "var",
)


@st.composite
def pathological_shell(draw: st.DrawFn) -> Payload:
    """The shell classes that spend the evaluator's budget, with drawn sizes, around a launch."""
    return Payload(draw(_shell()).encode(), draw(st.sampled_from([".sh", ".bash"])))


@st.composite
def _shell(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["loops", "recursion", "doubling", "ifs", "args", "mixed"]))
    width = draw(st.integers(1, 20))
    items = " ".join(f"v{k}" for k in range(width))
    if kind == "loops":
        depth = draw(st.integers(1, 8))
        body = "".join(f"for x{k} in {items}; do\n" for k in range(depth))
        return body + LAUNCH + " --port $x0\n" + "done\n" * depth
    if kind == "recursion":
        calls = " ".join(["f $x"] * draw(st.integers(1, 4)))
        return f"f() {{\n for x in {items}; do {calls}; done\n {LAUNCH}\n}}\nf\n"
    if kind == "doubling":
        n = draw(st.integers(1, 40))
        steps = "".join(f'V{i + 1}="$V{i} $V{i}"\n' for i in range(n))
        return f"V0=--enable-metrics\n{steps}{LAUNCH} $V{n}\n"
    if kind == "ifs":
        n = draw(st.integers(1, 3000))
        return "".join(f"if a; then A{i}=1; else A{i}=2; fi\n" for i in range(n)) + LAUNCH + "\n"
    if kind == "args":
        return LAUNCH + " x" * draw(st.integers(1, 300_000)) + "\n"
    parts = draw(st.lists(st.sampled_from(SHELL_SNIPPETS), min_size=1, max_size=4))
    return "\n".join(parts) + "\n" + LAUNCH + "\n"


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.sampled_from(["NaN", "Infinity", "-1", "", "1e400", "llama", "1" * 5000]),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def broken_model_config(draw: st.DrawFn) -> Payload:
    """A model config.json with keys retyped, removed or added, deeply nested, or not JSON."""
    return Payload(draw(_config()), ".json")


@st.composite
def _config(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["retype", "retype", "deep", "bytes", "not-object"]))
    if kind == "deep":
        depth = draw(st.integers(1, 200_000))
        return ('{"architectures": ' + "[" * depth + "]" * depth + "}").encode()
    if kind == "bytes":
        return draw(st.binary(max_size=2000))
    if kind == "not-object":
        return json.dumps(draw(JSON_VALUES)).encode()
    config: dict[str, Any] = dict(LLAMA)
    for key in draw(
        st.lists(
            st.sampled_from([*LLAMA, "text_config", "quantization_config"]), min_size=1, max_size=5
        )
    ):
        if draw(st.booleans()):
            config[key] = draw(JSON_VALUES)
        else:
            config.pop(key, None)
    return json.dumps(config).encode()
