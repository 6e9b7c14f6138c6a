"""scripts/bench-auto's arms and report (pure parts; the run itself is a benchmark command)."""

from __future__ import annotations

import socket
import sys

import pytest

from specserver_advisor.models import SpecServer
from stack import REPO

sys.path.insert(0, str(REPO / "scripts"))
import bench_auto


def test_the_four_arms_are_valid_specservers_that_differ_only_in_control() -> None:
    docs = {arm: bench_auto.specserver(arm, "L4") for arm in bench_auto.ARMS}
    servers = {arm: SpecServer.model_validate(doc) for arm, doc in docs.items()}
    assert {s.spec.mode.value for s in servers.values()} == {"Auto", "Enabled", "Disabled"}
    assert [a for a, s in servers.items() if s.spec.speculative.adaptive] == ["on_adaptive"]
    assert len({s.metadata.name for s in servers.values()}) == 4
    base = servers["auto"].spec.model_dump(exclude={"mode", "speculative"})
    for s in servers.values():
        assert s.spec.model_dump(exclude={"mode", "speculative"}) == base
    assert SpecServer.model_validate(bench_auto.specserver("on", "H100")).spec.resources.gpu_type


def test_summary_has_the_documented_shape_and_counts_modelled_seconds() -> None:
    schedule = (bench_auto.Phase("low", 2, 10.0, "code"), bench_auto.Phase("high", 8, 20.0, "chat"))
    stats = {arm: [bench_auto.PhaseStats(), bench_auto.PhaseStats()] for arm in bench_auto.ARMS}
    stats["off"][1] = bench_auto.PhaseStats(good_tokens=6000, tokens=8000, ttfts=[1.0] * 99 + [9.0])
    stats["on"][0] = bench_auto.PhaseStats(good_tokens=1000, tokens=1000, failed=2, ttfts=[0.5])
    ledger = [
        {"action": a, "reason": "R", "time": "t", "mode": "On"}
        for a in ("disable", "keep", "enable", "disable")
    ]
    summary = bench_auto.summarise(stats, schedule, ledger, {"45@2.8": "off"}, "L4")
    arms = summary["arms"]
    assert set(arms) == {"auto", "on", "off", "on_adaptive"}
    for a in arms.values():
        assert {"goodput", "ttft_p99_s", "switches", "failed_requests", "phases"} <= set(a)
        assert [p["name"] for p in a["phases"]] == ["low", "high"]
    scale = bench_auto.TIME_SCALE
    assert arms["off"]["phases"][1]["goodput"] == pytest.approx(6000 / (20 * scale), abs=0.1)
    assert arms["off"]["goodput"] == pytest.approx(6000 / (30 * scale), abs=0.1)
    assert arms["off"]["ttft_p99_s"] == 1.0  # 99 of 100 at 1 s
    assert arms["on"]["failed_requests"] == 2 and arms["auto"]["switches"] == 3
    assert arms["on"]["switches"] == 0
    assert arms["auto"]["learned_bands"] == {"45@2.8": "off"}
    table = bench_auto.render(summary)
    assert "| on_adaptive |" in table and "learned bands (auto)" in table


def test_a_port_in_use_is_named_before_anything_starts() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        ports = bench_auto.demo.Ports(20000, port, 20010)
        assert f"{port} (Prometheus)" in bench_auto.busy_ports(ports)
    assert f"{port} (Prometheus)" not in bench_auto.busy_ports(ports)


def test_the_settle_timeout_grows_as_the_time_scale_shrinks() -> None:
    assert bench_auto.settle_timeout(10) == bench_auto.SETTLE_S_AT_SCALE_10
    assert bench_auto.settle_timeout(4) == pytest.approx(2.5 * bench_auto.SETTLE_S_AT_SCALE_10)
    assert bench_auto.settle_timeout(20) == bench_auto.SETTLE_S_AT_SCALE_10


def test_a_port_left_in_time_wait_by_the_last_run_is_free() -> None:
    """The servers bind with SO_REUSEADDR: closed connections on a port do not hold it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: TIME_WAIT on the server's port
        client.close()
    assert f"{port} (Prometheus)" not in bench_auto.busy_ports(
        bench_auto.demo.Ports(20000, port, 20010)
    )


def test_ports_in_the_ephemeral_range_are_named() -> None:
    low, _ = bench_auto.ephemeral_range()
    inside = bench_auto.demo.Ports(low, low - 100, low - 99)
    assert bench_auto.ephemeral_ports(inside) == [low, low + 1, low + 2]
    if low > 27458:  # the defaults sit below Linux's default range
        assert bench_auto.ephemeral_ports(bench_auto.demo.Ports(27453, 27457, 27458)) == []
