"""apidecode, kopfdecode and compact: what the API sends is decoded and copied without
recursion, and an object too deep to hold is skipped, never raised (issue 25)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specserver_operator.kube import decode as apidecode
from specserver_operator.kube import kopfdecode
from specserver_operator.kube.client import kept
from specserver_operator.kube.objects import compact

META = {"name": "deep", "namespace": "tenant-b", "resourceVersion": "4711"}


def deep_object(levels: int) -> str:
    """A SpecServer whose spec.model.path is a list nested ``levels`` deep (as JSON text)."""
    head = json.dumps({"kind": "SpecServer", "metadata": META, "spec": {"model": {"path": 0}}})
    return head.replace("0", "[" * levels + "]" * levels, 1)


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        "[]",
        '{"a": [1, 2.5, -3e2, true, false, null, "x\\u00e9\\n"], "b": {"c": {}}}',
        ' [ 1 , { "k" : [ ] } ] ',
        '"s"',
        "-0.5",
    ],
)
def test_the_iterative_parser_reads_what_json_reads(text: str) -> None:
    assert apidecode.parse_iteratively(text) == json.loads(text)


@pytest.mark.parametrize("text", ["{", "[1,]", '{"a"}', '{"a":1,}', "[1 2]", "tru", "{} x", ""])
def test_the_iterative_parser_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        apidecode.parse_iteratively(text)


def test_an_answer_nested_past_the_recursion_limit_is_decoded_not_raised() -> None:
    with pytest.raises(RecursionError):
        json.loads(deep_object(3000))  # what kopf and the client did
    value = apidecode.loads(deep_object(3000).encode(), "GET x")
    assert value["metadata"] == META and apidecode.too_deep(value)
    assert apidecode.identity(value) == "SpecServer tenant-b/deep"
    with pytest.raises(apidecode.UndecodableError, match="GET x: not JSON"):
        apidecode.loads(b"{nope", "GET x")


@pytest.mark.parametrize("levels", [900, 3000])
def test_a_watch_event_too_deep_becomes_a_bookmark_at_its_version(levels: int) -> None:
    line = '{"type": "MODIFIED", "object": ' + deep_object(levels) + "}"
    assert kopfdecode.event(line) == {
        "type": "BOOKMARK",
        "object": {"metadata": {"resourceVersion": "4711"}},
    }
    ordinary = {"type": "ADDED", "object": {"kind": "SpecServer", "metadata": META}}
    assert kopfdecode.event(json.dumps(ordinary)) == ordinary


def test_a_list_page_keeps_every_object_but_the_one_too_deep() -> None:
    page = apidecode.loads(
        "[" + ",".join(['{"metadata": {"name": "a"}}', deep_object(900)]) + "]", "x"
    )
    skipped = apidecode.SKIPS.skipped
    assert kept(page) == [{"metadata": {"name": "a"}}]
    assert apidecode.SKIPS.skipped == skipped + 1


def test_a_skipped_object_is_logged_once_per_interval_and_the_record_stays_bounded() -> None:
    skips = apidecode.SkipLog(every_s=60.0, kept=3)
    assert [skips.due("a", t) for t in (0.0, 1.0, 59.0, 61.0)] == [True, False, False, True]
    assert [skips.due(w, 62.0) for w in ("b", "c", "d")] == [True, True, False]
    assert skips.skipped == 7 and len(skips.logged) <= 3


def test_compact_copies_any_depth_and_interns_every_string() -> None:
    value: Any = json.loads('{"a": ' * 900 + '["x", 1, {"k": null}]' + "}" * 900)
    copy = compact(value)
    inner = copy
    for _ in range(900):
        inner = inner["a"]
    assert inner == ["x", 1, {"k": None}]
    doc = json.loads('{"kind": "Deployment", "spec": {"replicas": 1, "tags": ["a", "b"]}}')
    out = compact(doc)
    assert out == doc and out is not doc and json.dumps(out) == json.dumps(doc)
    assert compact("s") == "s" and compact(3) == 3
