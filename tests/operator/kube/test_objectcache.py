"""The watch-fed object cache: what we wrote is not replaced by a late, older event, LISTs repair,
kopf's notes are dropped. Of two copies the newer is kept where versions compare (KEP-5504, stable
since Kubernetes 1.35); where they do not, the watch's order decides (equality only)."""

from __future__ import annotations

from typing import Any

from specserver_operator.kube.informer import ObjectCache, comparable, newer


def deployment(rv: str, replicas: int) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "x", "namespace": "llm", "resourceVersion": rv, "managedFields": [1]},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": []}}},
        "status": {"readyReplicas": replicas},
    }


def test_a_late_event_with_an_older_version_does_not_replace_what_we_wrote() -> None:
    cache = ObjectCache()
    cache.put("Deployment", deployment("20", 2), written=True)  # the answer of our own write
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("15", 1)})
    found = cache.get("Deployment", "llm", "x")
    assert found is not None and found["spec"] == {"replicas": 2}  # slimmed, newest kept
    assert "managedFields" not in found["metadata"]
    cache.observe("Deployment", {"type": "DELETED", "object": deployment("21", 2)})
    assert cache.get("Deployment", "llm", "x") is None


def test_a_list_replaces_the_cache_but_keeps_newer_entries() -> None:
    cache = ObjectCache()
    assert cache.needs_resync()
    gone = deployment("5", 1)
    gone["metadata"]["name"] = "gone"
    cache.put("Deployment", gone)
    cache.list_began()
    cache.put("Deployment", deployment("30", 3), written=True)  # written while the LIST ran
    listed = {("Deployment", "llm", "x"): deployment("25", 1)}
    cache.replace(listed)
    assert not cache.needs_resync()
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 3  # type: ignore[index]
    assert cache.get("Deployment", "llm", "gone") is None


def named(rv: str, replicas: int, name: str) -> dict[str, Any]:
    obj = deployment(rv, replicas)
    obj["metadata"]["name"] = name
    return obj


def test_our_answer_arriving_after_newer_events_does_not_put_an_older_copy_back() -> None:
    # The watch delivered our write (20) and the controller's status write after it (21) before
    # the write's answer reached the cache: the answer is older than what the cache holds.
    cache = ObjectCache()
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("20", 1)})
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("21", 1)})
    cache.put("Deployment", deployment("20", 0), written=True)
    assert cache.get("Deployment", "llm", "x")["status"] == {"readyReplicas": 1}  # type: ignore[index]
    # ... and the standby's Ready status a few seconds later is taken at once (the version we
    # wrote will never come again: an older rule skipped every event until the next resync).
    ready = deployment("22", 1)
    ready["status"] = {"readyReplicas": 1, "updatedReplicas": 1}
    cache.observe("Deployment", {"type": "MODIFIED", "object": ready})
    assert cache.get("Deployment", "llm", "x")["status"]["updatedReplicas"] == 1  # type: ignore[index]


def test_comparable_versions_are_kep_5504s_positive_integers_compared_by_value() -> None:
    assert newer("100", "99") is True and newer("99", "100") is False
    assert newer("7", "7") is False
    for odd in ("", None, "0", "007", "a00", "12a", "\uff11\uff12"):
        assert comparable(odd) is None
        assert newer(odd, "5") is None


def test_a_list_older_than_an_event_during_it_keeps_the_event_and_a_newer_list_wins() -> None:
    cache = ObjectCache()
    cache.list_began()
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("40", 4)})
    cache.observe("Deployment", {"type": "MODIFIED", "object": named("41", 1, "y")})
    cache.replace(
        {
            ("Deployment", "llm", "x"): deployment("39", 1),  # read before the event
            ("Deployment", "llm", "y"): named("45", 3, "y"),  # read after it
        }
    )
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 4  # type: ignore[index]
    assert cache.get("Deployment", "llm", "y")["spec"]["replicas"] == 3  # type: ignore[index]


def test_a_child_deleted_while_a_list_ran_stays_deleted() -> None:
    # The LIST's page was read before the delete; the DELETED event came before the LIST ended.
    cache = ObjectCache()
    cache.list_began()
    cache.replace({("Deployment", "llm", "x"): deployment("10", 1)})
    cache.list_began()
    cache.observe("Deployment", {"type": "DELETED", "object": deployment("12", 1)})
    cache.replace({("Deployment", "llm", "x"): deployment("10", 1)})
    assert cache.get("Deployment", "llm", "x") is None  # the next pass re-creates it


def test_events_after_a_list_began_are_newer_than_its_copies() -> None:
    cache = ObjectCache()
    cache.list_began()
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("12", 4)})
    cache.observe("Deployment", {"type": "ADDED", "object": named("13", 1, "new")})
    cache.put("Deployment", named("14", 2, "ours"), written=True)  # created while it ran
    cache.replace({("Deployment", "llm", "x"): deployment("10", 1)})
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 4  # type: ignore[index]
    assert cache.get("Deployment", "llm", "new") is not None
    assert cache.get("Deployment", "llm", "ours") is not None
    # The next LIST is the truth again for whatever no event touched since.
    cache.list_began()
    cache.replace({("Deployment", "llm", "x"): deployment("20", 6)})
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 6  # type: ignore[index]
    assert cache.get("Deployment", "llm", "new") is None


def test_specservers_keep_their_annotations_but_not_kopfs_copy_of_the_spec() -> None:
    cache = ObjectCache()
    body = {
        "kind": "SpecServer",
        "metadata": {
            "name": "s",
            "namespace": "llm",
            "resourceVersion": "3",
            "annotations": {
                "specserver.io/last-handled-configuration": '{"spec": {}}',
                "specserver.io/pause-auto-speculation": "true",
                # kubectl's copy of the whole spec (up to 256 KiB): not read by a pass
                "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}',
            },
        },
        "spec": {"mode": "Auto"},
        "status": {"speculationMode": "On"},
    }
    cache.observe("SpecServer", {"type": None, "object": body})
    [stored] = cache.specservers()
    assert stored["metadata"]["annotations"] == {"specserver.io/pause-auto-speculation": "true"}
    assert stored["status"] == {"speculationMode": "On"}


def test_versions_are_opaque_and_the_watch_orders_them() -> None:
    cache = ObjectCache()
    cache.observe("Deployment", {"type": "ADDED", "object": deployment("b7f", 1)})
    cache.put("Deployment", deployment("a00", 2), written=True)  # not a number, not ordered
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("zz9", 5)})
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 2  # type: ignore[index]
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("a00", 2)})
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("0", 7)})
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 7  # type: ignore[index]


def test_a_list_taken_after_our_write_wins() -> None:
    cache = ObjectCache()
    cache.put("Deployment", deployment("30", 3), written=True)
    cache.list_began()
    cache.replace({("Deployment", "llm", "x"): deployment("31", 4)})
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 4  # type: ignore[index]
    cache.observe("Deployment", {"type": "MODIFIED", "object": deployment("32", 5)})
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 5  # type: ignore[index]


def specserver_text(i: int) -> str:
    """A SpecServer as the API server sends it (parsed apart, so no string is shared yet)."""
    import json

    return json.dumps(
        {
            "kind": "SpecServer",
            "metadata": {"name": f"s{i}", "namespace": "llm", "uid": f"u-{i}", "generation": 1},
            "spec": {"model": {"path": "Qwen/Qwen3-8B"}, "mode": "Auto"},
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "EngineNotReady",
                        "message": "0/1 engine replicas ready",
                    }
                ],
                "policyState": {"bands": {"4@2.8": {"on": {"score": 130.0}}}},
            },
        }
    )


def test_cached_objects_share_one_copy_of_each_repeated_string() -> None:
    import json

    cache = ObjectCache()
    for i in range(2):
        cache.put("SpecServer", json.loads(specserver_text(i)))
    a, b = cache.get("SpecServer", "llm", "s0"), cache.get("SpecServer", "llm", "s1")
    assert a is not None and b is not None
    sent = json.loads(specserver_text(0))
    sent["metadata"]["annotations"] = {}
    assert a == sent  # the same content
    ka, kb = list(a["status"]["conditions"][0]), list(b["status"]["conditions"][0])
    assert all(x is y for x, y in zip(ka, kb, strict=True))  # one copy of each key
    ca, cb = a["status"]["conditions"][0], b["status"]["conditions"][0]
    assert ca["message"] is cb["message"] and ca["reason"] is cb["reason"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]


def test_a_copy_older_than_a_watched_deletion_stays_deleted() -> None:
    # Our write's answer (or a fresh GET) at 30 reaches the cache after the watch's DELETED at
    # 31: the object is gone, not back until the next resync.
    cache = ObjectCache()
    cache.observe("Deployment", {"type": "ADDED", "object": deployment("29", 1)})
    cache.observe("Deployment", {"type": "DELETED", "object": deployment("31", 1)})
    cache.put("Deployment", deployment("30", 2), written=True)
    assert cache.get("Deployment", "llm", "x") is None
    # Created again under the same name: a newer version, in the cache at once.
    cache.put("Deployment", deployment("35", 3), written=True)
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 3  # type: ignore[index]


def test_a_late_deletion_of_the_old_object_does_not_hide_the_recreated_one() -> None:
    cache = ObjectCache()
    cache.put("Deployment", deployment("40", 2), written=True)  # recreated: our answer first
    cache.observe("Deployment", {"type": "DELETED", "object": deployment("38", 1)})
    assert cache.get("Deployment", "llm", "x")["spec"]["replicas"] == 2  # type: ignore[index]
    # A deletion after it does remove it.
    cache.observe("Deployment", {"type": "DELETED", "object": deployment("41", 2)})
    assert cache.get("Deployment", "llm", "x") is None


def test_a_version_longer_than_any_integer_python_parses_still_compares() -> None:
    long = "9" * 5000
    assert newer("1" + "0" * 5000, long) is True and newer(long, "1" + "0" * 5000) is False
