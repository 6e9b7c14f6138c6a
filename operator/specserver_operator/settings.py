"""Every operator-wide setting: its flag, its environment variable, its default, what it does.

The one table ``specserver-operator --help`` is generated from (main.py); main.py exports a
flag given on the command line into its variable, so each setting has one name in the code.
``runsettings.read_settings`` reads the variables into one frozen ``Settings`` at start-up.
Nothing here reads the environment at import. Reads no file. A leaf: it imports nothing of
the operator, so every layer may read it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

#: Bounds of ``SPECSERVER_SIGNAL_WINDOW_SECONDS``: below 10 s a rate holds too few samples of
#: any real scrape interval; above 15 minutes the signals trail the load by more than a phase.
SIGNAL_WINDOW_MIN_S = 10
SIGNAL_WINDOW_MAX_S = 900
#: Bounds of ``SPECSERVER_CYCLE_SECONDS``. The leader renews its 15 s Lease once per cycle and
#: an election round may take 3 s (``leader.Elector.round_deadline_s``): above 7 s, one stalled
#: round leaves the next renewal after the standbys take the lease (2 x 7 + a round > 15).
#: Below 1 s the cycle would re-read every SpecServer's signals more often than any scrape.
CYCLE_MIN_S = 1.0
CYCLE_MAX_S = 7.0


@dataclass(frozen=True)
class Setting:
    """One operator setting."""

    flag: str
    env: str
    default: str
    help: str
    #: Variables read when ``env`` is unset (conventions other tools already use).
    fallbacks: tuple[str, ...] = ()
    is_switch: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "--namespace",
        "SPECSERVER_NAMESPACES",
        "",
        "watch only these namespaces (flag repeatable; the variable comma-separated); "
        "empty: the whole cluster",
    ),
    Setting(
        "--liveness",
        "SPECSERVER_LIVENESS_URL",
        "http://0.0.0.0:8080/healthz",
        "kopf's liveness endpoint (what the Deployment's livenessProbe reads)",
    ),
    Setting("--verbose", "SPECSERVER_VERBOSE", "", "debug logging (any non-empty value)", (), True),
    Setting(
        "--metrics-port",
        "SPECSERVER_METRICS_PORT",
        "0",
        "serve the operator's Prometheus metrics on /metrics at this port (0: off; "
        "manifests/operator.yaml sets 8000)",
    ),
    Setting(
        "--metrics-address",
        "SPECSERVER_METRICS_ADDRESS",
        "127.0.0.1",
        "address the metrics port listens on: loopback unless the admin opens it (the metrics "
        "name every tenant's SpecServers; manifests/operator.yaml sets the pod IP, and "
        "manifests/networkpolicy.yaml lets only the monitoring namespace reach the port)",
    ),
    Setting(
        "--prometheus-url",
        "SPECSERVER_PROMETHEUS_URL",
        "",
        "the Prometheus that mode Auto reads engine metrics from, for SpecServers without "
        "spec.autoSpeculation.prometheusUrl (empty: none; Auto then holds, reason "
        "NoPrometheusURL)",
    ),
    Setting(
        "--cycle-seconds",
        "SPECSERVER_CYCLE_SECONDS",
        "5",
        "period of the shared cycle (engine readiness, drift repair, policy evaluation, the "
        f"leader's Lease renewal), seconds, {CYCLE_MIN_S:g}-{CYCLE_MAX_S:g}",
    ),
    Setting(
        "--query-interval-seconds",
        "SPECSERVER_QUERY_INTERVAL_SECONDS",
        "5",
        "least time between two PromQL reads of the same signal",
    ),
    Setting(
        "--signal-window-seconds",
        "SPECSERVER_SIGNAL_WINDOW_SECONDS",
        "60",
        "range of the PromQL rates mode Auto reads (TTFT/TPOT/ITL quantiles, output tokens/s) "
        "(and a quarter of it: the most running requests each engine reported), "
        f"whole seconds, {SIGNAL_WINDOW_MIN_S}-{SIGNAL_WINDOW_MAX_S}; keep it at least four "
        "scrape intervals of the engines' metrics. A shorter window lets a latency spike "
        "leave the signals sooner after the load that caused it ends",
    ),
    Setting(
        "--hf-endpoint",
        "SPECSERVER_HF_ENDPOINT",
        "",
        "Hugging Face endpoint the operator reads model config.json from (empty: inline, "
        "ConfigMap and bundled configs only); always allowed (docs/security.md)",
        ("HF_ENDPOINT",),
    ),
    Setting(
        "--hf-allowed-endpoints",
        "SPECSERVER_HF_ALLOWED_ENDPOINTS",
        "",
        "comma-separated HF endpoints a SpecServer's spec.modelSource.hfEndpoint may name; any "
        "other spec endpoint gets no request from the operator",
    ),
    Setting(
        "--hf-token-file",
        "SPECSERVER_HF_TOKEN_FILE",
        "",
        "file holding the token sent to the allowed HF endpoints (mount it from a Secret in the "
        "operator's namespace); hfTokenSecretRef is never read by the operator",
    ),
    Setting(
        "--prometheus-allowed-urls",
        "SPECSERVER_PROMETHEUS_ALLOWED_URLS",
        "",
        "comma-separated Prometheus URLs a SpecServer's autoSpeculation.prometheusUrl may name "
        "besides --prometheus-url; any other is never contacted",
    ),
    Setting(
        "--allow-host-path",
        "SPECSERVER_ALLOW_HOST_PATH",
        "false",
        "let engine pods mount hostPath volumes named in the spec (otherwise ConfigValid=False, "
        "PodPolicyRefused)",
    ),
    Setting(
        "--allow-wildcard-tolerations",
        "SPECSERVER_ALLOW_WILDCARD_TOLERATIONS",
        "false",
        "let engine pods carry match-all tolerations from the spec (otherwise refused)",
    ),
    Setting(
        "--allow-code-execution-flags",
        "SPECSERVER_ALLOW_CODE_EXECUTION_FLAGS",
        "false",
        "let extraArgs carry flags that make the engine run code a client or a model repo "
        "supplies (--trust-remote-code, --enable-custom-logit-processor; otherwise refused, "
        "PodPolicyRefused)",
    ),
    Setting(
        "--require-secret-approval",
        "SPECSERVER_REQUIRE_SECRET_APPROVAL",
        "true",
        "render spec.modelSource.hfTokenSecretRef into an engine pod only when the admission "
        "webhook approved it for that SpecServer generation (otherwise ConfigValid=False, "
        "SecretNotApproved); false only where every SpecServer author may read every Secret "
        "of their namespace",
    ),
    Setting(
        "--grant-namespace",
        "SPECSERVER_GRANT_NAMESPACE",
        "specserver-system",
        "the operator's own namespace, where the webhook records which Secret it approved for "
        "which SpecServer generation (ConfigMaps specserver-grant-<uid>; no tenant may write "
        "there)",
    ),
    Setting(
        "--webhook-port",
        "SPECSERVER_WEBHOOK_PORT",
        "0",
        "serve the validating admission webhook (HTTPS, POST /validate) on this port (0: off; "
        "manifests/operator.yaml sets 9443)",
    ),
    Setting(
        "--webhook-address",
        "SPECSERVER_WEBHOOK_ADDRESS",
        "0.0.0.0",
        "address the webhook listens on",
    ),
    Setting(
        "--webhook-secret",
        "SPECSERVER_WEBHOOK_SECRET",
        "specserver-system/specserver-webhook-tls",
        "namespace/name of the Secret the operator keeps the webhook's CA and serving "
        "certificate in (created when missing, renewed 30 days before expiry)",
    ),
    Setting(
        "--webhook-config",
        "SPECSERVER_WEBHOOK_CONFIG",
        "specserver-validation",
        "the ValidatingWebhookConfiguration whose caBundle the operator keeps current",
    ),
    Setting(
        "--webhook-dns-names",
        "SPECSERVER_WEBHOOK_DNS_NAMES",
        "specserver-operator-webhook.specserver-system.svc",
        "comma-separated names (or IP addresses) the serving certificate covers: what the "
        "apiserver dials",
    ),
    Setting(
        "--webhook-client-ca",
        "SPECSERVER_WEBHOOK_CLIENT_CA",
        "",
        "PEM file of the CA that signs the apiserver's webhook client certificate (its "
        "AdmissionConfiguration kubeConfigFile): only a review over a connection with such a "
        "certificate gets the hfTokenSecretRef SubjectAccessReview; empty: none does, and a "
        "SpecServer naming hfTokenSecretRef is refused (docs/security.md)",
    ),
    Setting(
        "--webhook-client-names",
        "SPECSERVER_WEBHOOK_CLIENT_NAMES",
        "",
        "comma-separated subject common names a client certificate must have to count as the "
        "apiserver (empty: any the client CA signed; set it when that CA signs other clients)",
    ),
    Setting(
        "--webhook-trust-unauthenticated",
        "SPECSERVER_WEBHOOK_TRUST_UNAUTHENTICATED",
        "false",
        "answer hfTokenSecretRef SubjectAccessReviews for any caller of the webhook port, for "
        "clusters whose apiserver cannot present a client certificate; RISK: anyone who can "
        "reach the port learns whether any user may read any Secret (docs/security.md)",
    ),
    Setting(
        "--engine-image",
        "SPECSERVER_ENGINE_IMAGE",
        "ghcr.io/specserver/specserver-engine:0.1.0-sglang0.5.23",
        "image of the engine pods' preflight init container",
    ),
    Setting(
        "--leader-election",
        "SPECSERVER_LEADER_ELECTION",
        "true",
        "only the holder of the Lease specserver-operator reconciles (false: always)",
    ),
    Setting(
        "--lease-namespace",
        "SPECSERVER_LEASE_NAMESPACE",
        "",
        "namespace of the leader Lease (default: the pod's own, else default)",
    ),
)


def resolve_environ(given: Mapping[str, str | None], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to export before the operator's modules are imported.

    Args:
        given: flag values from the command line by variable name (None: not given).
        environ: the process environment.

    Returns:
        Variable -> value for each setting given as a flag (the flag wins) or found under a
        fallback name while its own variable is unset.
    """
    out: dict[str, str] = {}
    for s in SETTINGS:
        value = given.get(s.env)
        if value is not None:
            out[s.env] = value
            continue
        if environ.get(s.env):
            continue
        for name in s.fallbacks:
            if environ.get(name):
                out[s.env] = environ[name]
                break
    return out


def value(env: str, environ: Mapping[str, str] | None = None) -> str:
    """A setting's value: its variable when set and non-empty, else its default."""
    found = (os.environ if environ is None else environ).get(env)
    return found if found else next(s.default for s in SETTINGS if s.env == env)


def describe(s: Setting) -> str:
    """One setting's --help text: what it does, its variable, fallbacks and default."""
    fallback = "".join(f", else ${name}" for name in s.fallbacks)
    default = f"; default {s.default}" if s.default else ""
    return f"{s.help} (env ${s.env}{fallback}{default})"


def epilog() -> str:
    """The environment table printed under --help."""
    width = max(len(s.env) for s in SETTINGS)
    lines = ["environment (a flag given on the command line wins):"]
    for s in SETTINGS:
        lines.append(f"  {s.env:<{width}}  {s.flag}")
        lines.extend(f"  {'':<{width}}  {alt} when {s.env} is unset" for alt in s.fallbacks)
    return "\n".join(lines)


def signal_window_seconds(environ: Mapping[str, str] | None = None) -> int:
    """``SPECSERVER_SIGNAL_WINDOW_SECONDS`` checked: whole seconds within the bounds.

    Raises:
        ValueError: naming the variable, the value given and the range allowed.
    """
    raw = value("SPECSERVER_SIGNAL_WINDOW_SECONDS", environ).strip()
    bounds = f"{SIGNAL_WINDOW_MIN_S}-{SIGNAL_WINDOW_MAX_S}"
    if not raw.isdigit() or not SIGNAL_WINDOW_MIN_S <= int(raw) <= SIGNAL_WINDOW_MAX_S:
        raise ValueError(
            f"SPECSERVER_SIGNAL_WINDOW_SECONDS (--signal-window-seconds) must be whole seconds "
            f"in {bounds}, got {raw[:40]!r}"
        )
    return int(raw)


def cycle_seconds(environ: Mapping[str, str] | None = None) -> float:
    """``SPECSERVER_CYCLE_SECONDS`` checked: a number of seconds within the bounds.

    Raises:
        ValueError: naming the variable, the value given and the range allowed.
    """
    raw = value("SPECSERVER_CYCLE_SECONDS", environ).strip()
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not CYCLE_MIN_S <= seconds <= CYCLE_MAX_S:  # NaN and inf fail too
        raise ValueError(
            f"SPECSERVER_CYCLE_SECONDS (--cycle-seconds) must be seconds in "
            f"{CYCLE_MIN_S:g}-{CYCLE_MAX_S:g} (the leader renews its 15 s Lease once a cycle), "
            f"got {raw[:40]!r}"
        )
    return seconds
