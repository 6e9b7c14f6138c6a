"""specserver-operator's settings: one table, every variable documented under --help."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from typing import Any

import pytest
from operatorfakes import SPEC, FakeClient

from specserver_operator import main, settings
from specserver_operator.reconcile import runsettings
from stack import REPO


def _help() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "specserver_operator.main", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout


def test_help_documents_every_variable_the_operator_reads() -> None:
    source = "\n".join(
        p.read_text() for p in (REPO / "operator" / "specserver_operator").rglob("*.py")
    )
    read = set(re.findall(r"\"(SPECSERVER_[A-Z_]+)\"", source))
    text = _help()
    assert read, "the scan found no variables"
    for name in read:
        assert f"${name}" in text and f"  {name} " in text, f"{name} missing from --help"
    for s in settings.SETTINGS:
        assert s.flag in text and s.help.split()[0] in text


def test_help_names_the_hf_endpoint_fallback() -> None:
    assert "$SPECSERVER_HF_ENDPOINT, else $HF_ENDPOINT" in _help()


def test_hf_endpoint_is_the_fallback_for_specserver_hf_endpoint() -> None:
    hub = "http://127.0.0.1:36460"
    assert settings.resolve_environ({}, {"HF_ENDPOINT": hub}) == {"SPECSERVER_HF_ENDPOINT": hub}
    ours = {"SPECSERVER_HF_ENDPOINT": "http://127.0.0.1:36461", "HF_ENDPOINT": hub}
    assert settings.resolve_environ({}, ours) == {}
    # A flag wins over both.
    flag = {"SPECSERVER_HF_ENDPOINT": "http://127.0.0.1:36462"}
    assert settings.resolve_environ(flag, ours) == flag


def test_flags_become_their_variables_and_defaults_apply() -> None:
    args = vars(main.build_parser().parse_args(["-n", "a", "-n", "b", "--metrics-port", "9"]))
    assert args["SPECSERVER_NAMESPACES"] == ["a", "b"]
    got = settings.resolve_environ({"SPECSERVER_METRICS_PORT": "9"}, {})
    assert got == {"SPECSERVER_METRICS_PORT": "9"}
    assert settings.value("SPECSERVER_CYCLE_SECONDS", {}) == "5"
    assert settings.value("SPECSERVER_CYCLE_SECONDS", {"SPECSERVER_CYCLE_SECONDS": "2"}) == "2"
    assert settings.value("SPECSERVER_CYCLE_SECONDS", {"SPECSERVER_CYCLE_SECONDS": ""}) == "5"


def test_the_signal_window_is_whole_seconds_within_its_bounds() -> None:
    window = settings.signal_window_seconds
    assert window({}) == 60
    assert window({"SPECSERVER_SIGNAL_WINDOW_SECONDS": "20"}) == 20
    assert window({"SPECSERVER_SIGNAL_WINDOW_SECONDS": ""}) == 60
    for bad in ("9", "901", "1m", "20.5", "-20", "abc"):
        with pytest.raises(ValueError, match=r"SPECSERVER_SIGNAL_WINDOW_SECONDS .* in 10-900"):
            window({"SPECSERVER_SIGNAL_WINDOW_SECONDS": bad})


@pytest.mark.parametrize(
    ("flag", "bad"), [("--signal-window-seconds", "1m"), ("--cycle-seconds", "30")]
)
def test_the_operator_refuses_a_bad_setting_before_it_starts(flag: str, bad: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "specserver_operator.main", flag, bad],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert flag in done.stderr and repr(bad) in done.stderr
    assert "Traceback" not in done.stderr


def test_the_cycle_is_seconds_that_fit_the_lease() -> None:
    cycle = settings.cycle_seconds
    assert cycle({}) == 5.0
    assert cycle({"SPECSERVER_CYCLE_SECONDS": "2"}) == 2.0
    assert cycle({"SPECSERVER_CYCLE_SECONDS": "2.5"}) == 2.5
    for bad in ("0", "0.5", "7.5", "60", "nan", "inf", "5s", "abc", "-5"):
        with pytest.raises(ValueError, match=r"SPECSERVER_CYCLE_SECONDS .* in 1-7 "):
            cycle({"SPECSERVER_CYCLE_SECONDS": bad})


class Posting(FakeClient):
    """test_autopilot's client seam, posting events too."""

    def post_event(self, *args: Any) -> None:
        pass


def test_the_environment_is_read_at_start_up_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's modules are imported first (as kopf loads them); variables set after
    that are what the cycle made at start-up renders and reads from."""
    from specserver_operator import handlers  # imports cycle, controller, observe, desired

    late = "registry.example/specserver-engine:late"
    monkeypatch.setenv("SPECSERVER_ENGINE_IMAGE", late)
    monkeypatch.setenv("SPECSERVER_PROMETHEUS_URL", "http://prometheus.example:9090")
    monkeypatch.setenv("SPECSERVER_LEADER_ELECTION", "false")
    monkeypatch.setenv("SPECSERVER_QUERY_INTERVAL_SECONDS", "3")
    monkeypatch.setattr(handlers, "_SETTINGS", [])  # kopf's start-up has not run yet
    started = handlers.operator_settings()
    assert started.preflight_image == late and started.query_interval_s == 3.0
    client = Posting()
    cycle = handlers.new_cycle(client, started)  # type: ignore[arg-type]
    assert cycle.elector is None
    body = copy.deepcopy(SPEC)
    body["spec"]["mode"] = "Enabled"
    assert cycle.guarded_pass(client, body)  # type: ignore[arg-type]
    assert client.deployment is not None
    init = client.deployment["spec"]["template"]["spec"]["initContainers"]
    assert [c["image"] for c in init] == [late]
    assert list(cycle.signals) == ["http://prometheus.example:9090"]
    assert cycle.signals["http://prometheus.example:9090"].min_interval_s == 3.0
    # Read once: a later change of the environment is not seen until the next start-up.
    monkeypatch.setenv("SPECSERVER_ENGINE_IMAGE", "registry.example/other:1")
    assert handlers.operator_settings().preflight_image == late


def test_settings_name_the_variable_of_a_bad_value() -> None:
    with pytest.raises(ValueError, match="SPECSERVER_QUERY_INTERVAL_SECONDS must be a number"):
        runsettings.read_settings({"SPECSERVER_QUERY_INTERVAL_SECONDS": "5s"})
    read = runsettings.read_settings({"SPECSERVER_REQUIRE_SECRET_APPROVAL": "false"})
    assert not read.require_secret_approval and read.leader_election
    assert runsettings.read_settings({}) == runsettings.Settings()
