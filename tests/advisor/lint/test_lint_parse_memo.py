"""The lint's memoised argv parse (``argv.parsed_server_argv``): the same result as SGLang's
parse, a copy its caller may change without changing the next launch's, and bounded."""

from __future__ import annotations

from dataclasses import asdict, fields

from specserver_advisor.lint import argv
from specserver_advisor.sglang.flags import ArgvIssue, ParsedArgs, parse_server_argv

ARGV = [
    "--model-path",
    "Qwen/Qwen3-8B",
    "--speculative-algo",  # an abbreviation
    "EAGLE3",
    "--tp",
    "2",
    "--json-model-override-args",
    '{"max_position_embeddings": 4096}',
    "--no-such-flag",
    "x",
    "--enable-metrics=yes",
]


def test_the_memoised_parse_is_sglangs_parse() -> None:
    for positional in (False, True):
        for args in (ARGV, ["Qwen/Qwen3-8B", *ARGV[2:]], []):
            got = argv.parsed_server_argv(list(args), positional)
            again = argv.parsed_server_argv(list(args), positional)
            assert asdict(got) == asdict(again) == asdict(parse_server_argv(args, positional))


def test_the_copy_shares_nothing_mutable() -> None:
    first = argv.parsed_server_argv(ARGV, False)
    assert first.issues, "the argv above has issues to change"
    pristine = asdict(parse_server_argv(ARGV))
    first.values["model_path"] = "changed"
    first.values.pop("tp_size", None)
    first.positions.clear()
    first.spelled.clear()
    first.spans.clear()
    first.deprecated["x"] = "y"
    first.issues[0].message = "changed"
    first.issues.append(first.issues[0])
    first.config_file = "changed.yaml"
    assert asdict(argv.parsed_server_argv(ARGV, False)) == pristine


def test_every_field_is_copied() -> None:
    """A field added to ParsedArgs fails here until ``argv._fresh`` copies it too."""
    parsed = ParsedArgs(
        values={"tp_size": 2, "x": [1]},
        positions={"tp_size": 0},
        spelled={"tp_size": "--tp"},
        issues=[ArgvIssue(0, "--x", "m", "unknown")],
        config_file="c.yaml",
        deprecated={"--a": "--b"},
        spans={"tp_size": (0, 2)},
    )
    assert [f.name for f in fields(ParsedArgs)] == [
        "values",
        "positions",
        "spelled",
        "issues",
        "config_file",
        "deprecated",
        "spans",
    ]
    copied = argv._fresh(parsed)
    assert asdict(copied) == asdict(parsed)
    assert copied.values["x"] is not parsed.values["x"]
    assert copied.issues[0] is not parsed.issues[0]


def test_long_argv_is_parsed_not_kept() -> None:
    argv._parse_memo.cache_clear()
    long = ["--model-path", "m" * (argv.PARSE_CACHE_CHARS + 1)]
    assert argv.parsed_server_argv(long, False).values["model_path"] == long[1]
    assert argv._parse_memo.cache_info().currsize == 0
    assert argv._parse_memo.cache_info().maxsize == argv.PARSE_CACHE_SIZE
