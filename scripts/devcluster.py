"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and LeaderWorkerSet's controller; Kueue's controller on request.

Used by ``scripts/devcluster up|down|status|build`` and, through ``Cluster``, by the pytest
session fixture (tests/conftest.py), so both start the stack the same way. Standard library only:
it runs before the project's virtual environment exists. Never binds anything but 127.0.0.1.

Every binary is built once from the Go module proxy with Go (``go`` 1.26 or newer on PATH) and
cached outside the repository, keyed by version (see ../shared/reference/local-control-plane.md):

- Kubernetes ``KUBE_VERSION``: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl,
  from a throwaway module that requires ``k8s.io/kubernetes`` and replaces each ``k8s.io/*``
  staging module its go.mod points at ``./staging`` with the published ``v0.N.x`` of the release;
- etcd ``ETCD_VERSION`` (``go.etcd.io/etcd/server/v3``);
- LeaderWorkerSet ``LWS_VERSION`` (``sigs.k8s.io/lws``): its controller binary, and its CRD and
  webhook manifests copied from the module's ``config/``;
- Kueue ``KUEUE_VERSION`` (``sigs.k8s.io/kueue``, ``build_kueue``): its manager binary, built
  with the module's own go.mod pins, and its CRD and webhook manifests copied from the module's
  ``config/components/``. ``up`` does not start it: ``Cluster.start_kueue`` does, for the tests
  that ask (tests/cluster/conftest.py's ``kueue``), and ``stop_kueue`` removes its webhooks again.

Nodes are not made here: the node agent (scripts/nodeagent.py) registers them and plays their
kubelet; the real scheduler binds pods to them. LWS's controller serves its webhooks on loopback
with a serving certificate from a CA this script makes (its internal cert manager is off), and
its webhook configurations point at that URL with that CA.

The apiserver presents a client certificate to admission webhooks (an AdmissionConfiguration
whose ValidatingAdmissionWebhook ``kubeConfigFile`` names it), signed by a CA of its own in
``<state>/webhook-client/``: the operator's ``SPECSERVER_WEBHOOK_CLIENT_CA`` is that CA's
certificate (``Cluster.webhook_client_ca``), so the webhook can tell the apiserver's reviews
from anyone else's (docs/security.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The Kubernetes release built and run (newest tested); SPECSERVER_KUBE_VERSION picks another
#: (the lowest supported is tested with it: docs/operator.md, "Supported Kubernetes versions").
KUBE_VERSION = os.environ.get("SPECSERVER_KUBE_VERSION", "1.37.2")
ETCD_VERSION = "3.6.17"
LWS_VERSION = "0.9.0"
#: The only Kueue release the Go module proxy serves the project (Dec 2026). Built with its own
#: go.mod's pins (k8s.io/* v0.35, controller-runtime v0.23, LWS API v0.8.0, the same
#: ``leaderworkerset.x-k8s.io/v1`` the v0.9.0 controller serves).
KUEUE_VERSION = "0.17.0"
#: The oldest Go that builds KUBE_VERSION (its go.mod's ``go`` line).
GO_MIN = (1, 26)
#: Times ``Cluster.wait_established`` asks again, a second apart, while a new CRD has no
#: status conditions yet.
ESTABLISH_TRIES = 10
REPO = Path(__file__).resolve().parent.parent
CACHE = Path(
    os.environ.get("SPECSERVER_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specserver"
)
BIN_DIR = CACHE / f"kubernetes-{KUBE_VERSION}" / "bin"
ETCD_DIR = CACHE / f"etcd-{ETCD_VERSION}"
LWS_DIR = CACHE / f"lws-{LWS_VERSION}"
BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
KUBECTL = BIN_DIR / "kubectl"
ETCD = ETCD_DIR / "bin" / "etcd"
LWS_CONTROLLER = LWS_DIR / "bin" / "lws-controller"
#: LWS's CRDs (its config/crd/bases: LeaderWorkerSet, and DisaggregatedSet, which it also runs)
LWS_CRDS = LWS_DIR / "config" / "crd"
LWS_WEBHOOKS = LWS_DIR / "config" / "webhook-manifests.yaml"
KUEUE_DIR = CACHE / f"kueue-{KUEUE_VERSION}"
KUEUE_MANAGER = KUEUE_DIR / "bin" / "kueue-manager"
KUEUE_CRDS = KUEUE_DIR / "config" / "crd"
KUEUE_WEBHOOKS = KUEUE_DIR / "config" / "webhook-manifests.yaml"
#: Where Kueue 0.17's manager reads its metrics serving certificate when its internal cert
#: manager is off (a path written into its main.go; it exits when the files are missing). Its
#: metrics server is off here (``bindAddress: "0"``), so any certificate does: one is made once.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
#: Kueue's integrations run here: single pods (which a Deployment's are), Deployments, and LWS.
KUEUE_FRAMEWORKS = ("pod", "deployment", "leaderworkerset.x-k8s.io/leaderworkerset")
#: Kueue's webhooks registered (those of the integrations above and of its own kinds); the others
#: of its manifests (Jobs, JobSets, Ray, Kubeflow, ...) are not served by this configuration.
KUEUE_WEBHOOK_RESOURCES = frozenset(
    {
        "pods",
        "deployments",
        "leaderworkersets",
        "clusterqueues",
        "cohorts",
        "resourceflavors",
        "workloads",
    }
)
#: Kueue manages workloads only in namespaces with this label (its managedJobsNamespaceSelector,
#: and the namespaceSelector of its pod, Deployment and LWS webhooks): the dev cluster's other
#: tests never pass through Kueue, even while it runs.
KUEUE_NAMESPACE_LABEL = "specserver.dev/kueue"
KUEUE_NAMESPACE_SELECTOR = {"matchLabels": {KUEUE_NAMESPACE_LABEL: "enabled"}}
RUN_PACKAGES = {"openssl": "openssl"}
LOOPBACK = "127.0.0.1"
#: Components in start order (``down`` stops them in reverse).
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "lws-controller",
)
#: Started only on request (``start_kueue``), after the others; ``down`` stops it too.
ON_REQUEST = ("kueue-manager",)
#: LWS's pod webhooks only see pods of a LeaderWorkerSet: the objectSelector its
#: config/webhook/{mutating,validating}-patch.yaml add (kustomize patches, applied here).
LWS_POD_SELECTOR = {
    "matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]
}


class DevClusterError(RuntimeError):
    """The control plane could not be built or started; the message says why."""


def log(msg: str) -> None:
    """Progress line on stderr (stdout is kept for what callers parse)."""
    print(f"devcluster: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- install/build


def _apt_install(packages: list[str]) -> None:
    if not packages:
        return
    if os.geteuid() != 0:
        raise DevClusterError(
            f"missing Debian packages {packages}; run: sudo apt-get install -y "
            + " ".join(packages)
        )
    log(f"installing {' '.join(packages)} from Debian")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-qq"], check=True, env=env
    )
    subprocess.run(
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-qq", *packages],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def ensure_run_packages() -> None:
    """Install openssl from Debian when it is missing (everything else is built)."""
    _apt_install([pkg for cmd, pkg in RUN_PACKAGES.items() if shutil.which(cmd) is None])


def go_binary() -> str:
    """The ``go`` command to build with: GO_MIN or newer, else a DevClusterError saying so."""
    for candidate in (shutil.which("go"), "/usr/local/go/bin/go"):
        if not candidate or not Path(candidate).exists():
            continue
        done = subprocess.run([candidate, "env", "GOVERSION"], capture_output=True, text=True)
        found = re.match(r"go(\d+)\.(\d+)", done.stdout.strip())
        if found and (int(found[1]), int(found[2])) >= GO_MIN:
            return candidate
    raise DevClusterError(
        f"building the control plane needs Go {GO_MIN[0]}.{GO_MIN[1]} or newer on PATH "
        "(https://go.dev/dl/; Debian's golang-go is too old), with the Go module proxy reachable"
    )


def _go(go: str, args: list[str], cwd: Path, logfile: Path) -> None:
    """Run ``go args`` in ``cwd`` at low priority, static and trimmed; log to ``logfile``."""
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-trimpath -mod=mod")
    with open(logfile, "a") as out:
        done = subprocess.run(
            ["nice", "-n", "10", go, *args], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        tail = logfile.read_text()[-3000:]
        raise DevClusterError(f"go {' '.join(args[:2])} failed (log: {logfile}):\n{tail}")


def _module_dir(go: str, module: str, version: str, cwd: Path) -> Path:
    """Download ``module@version`` into the Go module cache; return its directory."""
    done = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise DevClusterError(f"{module}@{version}: {done.stdout}{done.stderr}")
    return Path(json.loads(done.stdout)["Dir"])


def staging_replacements(gomod: str, version: str) -> list[str]:
    """``replace`` lines pinning every staging module k8s.io/kubernetes's go.mod points at
    ``./staging/...`` to its published ``v0.N.x`` of the same release ``version`` (1.N.x)."""
    staging = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", gomod, re.MULTILINE)
    if not staging:
        raise DevClusterError("k8s.io/kubernetes's go.mod names no ./staging replacements")
    published = "v0." + version.split(".", 1)[1]
    return [f"\t{module} => {module} {published}" for module in staging]


def version_ldflags(version: str) -> list[str]:
    """``-X`` flags stamping Kubernetes binaries with their release (``kubectl version`` and the
    apiserver's ``/version`` report it; a plain ``go build`` says v0.0.0-master)."""
    major, minor = version.split(".")[:2]
    out = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for key, value in (("gitVersion", f"v{version}"), ("gitMajor", major), ("gitMinor", minor)):
            out += ["-X", f"{pkg}.{key}={value}"]
    return out


def _build(
    go: str, root: Path, gomod: str, targets: dict[str, str], ldflags: list[str] | None = None
) -> None:
    """Build each ``{binary: package}`` of ``targets`` into ``root/bin`` from the module
    ``gomod`` written to ``root/src`` (a throwaway module, outside the repository)."""
    src, bin_dir = root / "src", root / "bin"
    src.mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text(gomod)
    logfile = root / "build.log"
    for binary, package in targets.items():
        if (bin_dir / binary).exists():
            continue
        log(f"building {binary} ({package}); log: {logfile}")
        flags = "-ldflags=" + " ".join(["-s", "-w", *(ldflags or [])])
        _go(go, ["build", flags, "-o", str(bin_dir / binary), package], src, logfile)


def build_binaries() -> Path:
    """Build the control plane, etcd and LWS's controller once; return the Kubernetes bin dir.

    Each is cached under CACHE keyed by its version, so later calls return at once.
    """
    lws_ready = LWS_CONTROLLER.exists() and LWS_CRDS.is_dir() and LWS_WEBHOOKS.exists()
    if all((BIN_DIR / b).exists() for b in BINARIES) and ETCD.exists() and lws_ready:
        return BIN_DIR
    go = go_binary()
    log("building from the Go module proxy (cached; the first build takes a long while)")
    kube_root = BIN_DIR.parent
    kube_root.mkdir(parents=True, exist_ok=True)
    if not all((BIN_DIR / b).exists() for b in BINARIES):
        # k8s.io/kubernetes's go.mod (from the proxy) lists its staging modules.
        (kube_root / "src").mkdir(parents=True, exist_ok=True)
        (kube_root / "src" / "go.mod").write_text("module specserver.local/probe\n\ngo 1.26\n")
        info = _module_dir(go, "k8s.io/kubernetes", f"v{KUBE_VERSION}", kube_root / "src")
        upstream = (info / "go.mod").read_text()
        go_line = re.search(r"^go (\S+)$", upstream, re.MULTILINE)
        gomod = "\n".join(
            [
                "module specserver.local/kubebuild",
                "",
                f"go {go_line[1] if go_line else '1.26.0'}",
                "",
                f"require k8s.io/kubernetes v{KUBE_VERSION}",
                "",
                "replace (",
                *staging_replacements(upstream, KUBE_VERSION),
                ")",
                "",
            ]
        )
        _build(
            go,
            kube_root,
            gomod,
            {b: f"k8s.io/kubernetes/cmd/{b}" for b in BINARIES},
            version_ldflags(KUBE_VERSION),
        )
    if not ETCD.exists():
        gomod = (
            "module specserver.local/etcdbuild\n\ngo 1.26.0\n\n"
            f"require go.etcd.io/etcd/server/v3 v{ETCD_VERSION}\n"
        )
        _build(go, ETCD_DIR, gomod, {"etcd": "go.etcd.io/etcd/server/v3"})
    if not lws_ready:
        gomod = (
            "module specserver.local/lwsbuild\n\ngo 1.26.0\n\n"
            f"require sigs.k8s.io/lws v{LWS_VERSION}\n"
        )
        _build(go, LWS_DIR, gomod, {"lws-controller": "sigs.k8s.io/lws/cmd"})
        module = _module_dir(go, "sigs.k8s.io/lws", f"v{LWS_VERSION}", LWS_DIR / "src")
        shutil.rmtree(LWS_CRDS, ignore_errors=True)
        shutil.copytree(module / "config/crd/bases", LWS_CRDS)
        shutil.copyfile(module / "config/webhook/manifests.yaml", LWS_WEBHOOKS)
    log(f"cached Kubernetes {KUBE_VERSION} in {BIN_DIR}, etcd in {ETCD}, LWS in {LWS_DIR}")
    return BIN_DIR


def kueue_built() -> bool:
    """Whether Kueue's manager, CRDs and webhook manifests are cached."""
    return KUEUE_MANAGER.exists() and KUEUE_CRDS.is_dir() and KUEUE_WEBHOOKS.exists()


def build_kueue() -> Path:
    """Build Kueue's manager once (cached under KUEUE_DIR); return its path.

    The throwaway module requires only ``sigs.k8s.io/kueue``, so every dependency resolves to
    the versions Kueue's own go.mod pins (it has no ``replace``s)."""
    if kueue_built():
        return KUEUE_MANAGER
    go = go_binary()
    log("building Kueue from the Go module proxy (cached; the first build takes minutes)")
    gomod = (
        "module specserver.local/kueuebuild\n\ngo 1.26.0\n\n"
        f"require sigs.k8s.io/kueue v{KUEUE_VERSION}\n"
    )
    _build(go, KUEUE_DIR, gomod, {"kueue-manager": "sigs.k8s.io/kueue/cmd/kueue"})
    module = _module_dir(go, "sigs.k8s.io/kueue", f"v{KUEUE_VERSION}", KUEUE_DIR / "src")
    shutil.rmtree(KUEUE_CRDS, ignore_errors=True)
    shutil.copytree(module / "config/components/crd/bases", KUEUE_CRDS)
    shutil.copyfile(module / "config/components/webhook/manifests.yaml", KUEUE_WEBHOOKS)
    log(f"cached Kueue {KUEUE_VERSION} in {KUEUE_DIR}")
    return KUEUE_MANAGER


# ----------------------------------------------------------------------------- run


@dataclass(frozen=True)
class Cluster:
    """One control plane: its state directory and loopback ports."""

    state_dir: Path
    base_port: int = 16443

    @property
    def api_port(self) -> int:
        return self.base_port

    @property
    def etcd_port(self) -> int:
        return self.base_port + 1

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def webhook_client_ca(self) -> Path:
        """The CA certificate of the client certificate the apiserver shows admission webhooks
        (``CN=kube-apiserver``)."""
        return self.state_dir / "webhook-client" / "ca.crt"

    def token(self) -> str:
        return (self.state_dir / "admin-token").read_text().strip()

    def _pidfile(self, name: str) -> Path:
        return self.state_dir / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """PID of a running component, or None."""
        return running_pid(self._pidfile(name))

    def ready(self) -> bool:
        """True when the apiserver answers /readyz with ok."""
        if not (self.state_dir / "admin-token").exists():
            return False
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.token()}"}
        )
        try:
            with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
                return bool(resp.read().strip() == b"ok")
        except (urllib.error.URLError, OSError):
            return False

    @property
    def lws_webhook_port(self) -> int:
        return self.base_port + 3

    @property
    def lws_health_port(self) -> int:
        return self.base_port + 4

    @property
    def kueue_webhook_port(self) -> int:
        return self.base_port + 5

    @property
    def kueue_health_port(self) -> int:
        return self.base_port + 6

    def up(self) -> None:
        """Start etcd, the apiserver, the controller-manager, the scheduler and LWS's
        controller (idempotent)."""
        if self.pid("kube-apiserver") and self.ready():
            log(f"already up at {self.server}")
            self.start_lws()
            return
        self.down(quiet=True)
        ensure_run_packages()
        bins = build_binaries()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._write_credentials()
        self._spawn(
            "etcd",
            [
                str(ETCD),
                "--name",
                "specserver-dev",
                "--data-dir",
                str(self.state_dir / "etcd"),
                "--listen-client-urls",
                f"http://{LOOPBACK}:{self.etcd_port}",
                "--advertise-client-urls",
                f"http://{LOOPBACK}:{self.etcd_port}",
                "--listen-peer-urls",
                f"http://{LOOPBACK}:{self.base_port + 2}",
                "--initial-advertise-peer-urls",
                f"http://{LOOPBACK}:{self.base_port + 2}",
                "--initial-cluster",
                f"specserver-dev=http://{LOOPBACK}:{self.base_port + 2}",
                "--listen-metrics-urls",
                "",
                "--log-level",
                "warn",
            ],
        )
        certs = self.state_dir / "certs"
        sa_key = self.state_dir / "sa.key"
        self._spawn(
            "kube-apiserver",
            [
                str(bins / "kube-apiserver"),
                "--etcd-servers",
                f"http://{LOOPBACK}:{self.etcd_port}",
                "--bind-address",
                LOOPBACK,
                "--advertise-address",
                LOOPBACK,
                "--secure-port",
                str(self.api_port),
                "--cert-dir",
                str(certs),
                "--token-auth-file",
                str(self.state_dir / "tokens.csv"),
                "--authorization-mode",
                "RBAC",
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-account-key-file",
                str(self.state_dir / "sa.pub"),
                "--service-account-signing-key-file",
                str(sa_key),
                "--service-cluster-ip-range",
                "10.96.0.0/16",
                "--enable-priority-and-fairness=false",
                # A loopback advertise address may not back the kubernetes Service's endpoints.
                "--endpoint-reconciler-type=none",
                # ConfigMaps are listed from etcd, not from the watch cache's snapshots, so a
                # test can expire a paged listing's continue token by compacting etcd
                # (tests/cluster/test_kopf_paging_e2e.py), as a cluster's own compaction expires
                # one. Every other kind keeps the watch cache, as clusters run.
                "--watch-cache-sizes=configmaps#0",
                # As clusters run: privileged pods are allowed by the API, and Pod Security
                # admission refuses them where a namespace enforces baseline or restricted.
                "--allow-privileged=true",
                "--admission-control-config-file",
                str(self._write_admission_config()),
            ],
        )
        self._wait_ready()
        self._write_kubeconfig()
        self._spawn(
            "kube-controller-manager",
            [
                str(bins / "kube-controller-manager"),
                "--kubeconfig",
                str(self.kubeconfig),
                "--bind-address",
                LOOPBACK,
                "--secure-port",
                "0",
                "--leader-elect=false",
                "--service-account-private-key-file",
                str(sa_key),
                "--root-ca-file",
                str(certs / "apiserver.crt"),
                "--use-service-account-credentials=false",
                # No node lifecycle: a node agent that stops between tests leaves its Nodes
                # schedulable rather than tainted and its pods evicted (the agent still keeps
                # their Leases and Ready condition while it runs).
                "--controllers",
                "*,-node-ipam-controller,-node-lifecycle-controller,-ttl-controller",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(bins / "kube-scheduler"),
                "--kubeconfig",
                str(self.kubeconfig),
                "--authentication-kubeconfig",
                str(self.kubeconfig),
                "--authorization-kubeconfig",
                str(self.kubeconfig),
                "--bind-address",
                LOOPBACK,
                "--secure-port",
                "0",
                "--leader-elect=false",
            ],
        )
        self.start_lws()
        log(f"up: {self.server}; export KUBECONFIG={self.kubeconfig} PATH={BIN_DIR}:$PATH")

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        """Run the built kubectl against this cluster; its stdout, or a DevClusterError."""
        done = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise DevClusterError(f"kubectl {' '.join(args[:3])}: {done.stderr.strip()}")
        return done.stdout

    def wait_established(self, *target: str) -> None:
        """``kubectl wait --for=condition=Established`` on CRDs (``crd/NAME`` or ``-f PATH``),
        again while a CRD just applied has no status conditions yet: kubectl's wait fails at
        once on a null ``.status.conditions`` instead of waiting (at most ESTABLISH_TRIES)."""
        for attempt in range(ESTABLISH_TRIES):
            try:
                self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *target)
                return
            except DevClusterError as err:
                if "conditions accessor error" not in str(err) or attempt + 1 == ESTABLISH_TRIES:
                    raise
            time.sleep(1)

    def start_lws(self) -> None:
        """LeaderWorkerSet's controller: its CRD, its webhooks on loopback (a certificate from
        a CA of this cluster's), the webhook configurations pointing at them (idempotent)."""
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(LWS_CRDS))
        self.wait_established("-f", str(LWS_CRDS))
        out = self.state_dir / "lws"
        out.mkdir(exist_ok=True)
        if self.pid("lws-controller") is None:
            ca = self._write_webhook_certs(out, "lws")
            config = {
                "apiVersion": "config.lws.x-k8s.io/v1alpha1",
                "kind": "Configuration",
                "leaderElection": {"leaderElect": False},
                "internalCertManagement": {"enable": False},
                "webhook": {"host": LOOPBACK, "port": self.lws_webhook_port, "certDir": str(out)},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": f"{LOOPBACK}:{self.lws_health_port}"},
            }
            (out / "config.json").write_text(json.dumps(config))
            self._spawn(
                "lws-controller",
                [
                    str(LWS_CONTROLLER),
                    "--config",
                    str(out / "config.json"),
                    "--kubeconfig",
                    str(self.kubeconfig),
                ],
            )
            self._apply_lws_webhooks(ca)
        self._wait_lws()
        log(
            f"LeaderWorkerSet {LWS_VERSION} controller up, "
            f"webhooks on {LOOPBACK}:{self.lws_webhook_port}"
        )

    def _write_webhook_certs(self, out: Path, name: str) -> Path:
        """A CA and a webhook's serving certificate (IP SAN 127.0.0.1) in ``out``: ``tls.crt``
        and ``tls.key`` as controller-runtime's webhook server reads them; the CA's path."""
        ca, ca_key = out / "ca.crt", out / "ca.key"
        csr, ext = out / "tls.csr", out / "tls.ext"
        ext.write_text(
            f"basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:{LOOPBACK}\n"
        )
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for argv in (
            [
                "req",
                "-x509",
                *ec,
                "-keyout",
                ca_key,
                "-out",
                ca,
                "-days",
                "30",
                "-subj",
                f"/CN=specserver-dev-{name}-webhook-ca",
            ],
            ["req", *ec, "-keyout", out / "tls.key", "-out", csr, "-subj", f"/CN={name}-webhook"],
            [
                "x509",
                "-req",
                "-in",
                csr,
                "-out",
                out / "tls.crt",
                "-CA",
                ca,
                "-CAkey",
                ca_key,
                "-CAcreateserial",
                "-days",
                "30",
                "-extfile",
                ext,
            ],
        ):
            subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True)
        return ca

    def _webhook_configurations(
        self, manifests: Path, ca: Path, port: int, prefix: str
    ) -> list[dict[str, Any]]:
        """The webhook configurations of ``manifests`` (a controller's
        config/webhook/manifests.yaml), each named ``prefix`` + its name, every webhook served at
        a loopback URL on ``port`` with ``ca``."""
        import base64

        text = self.kubectl("create", "--dry-run=client", "-o", "json", "-f", str(manifests))
        items: list[dict[str, Any]] = []
        decoder, at = json.JSONDecoder(), 0
        while text[at:].strip():  # one JSON document per object, one after the other
            at = len(text) - len(text[at:].lstrip())
            doc, at = decoder.raw_decode(text, at)
            items += doc.get("items", [doc]) if doc.get("kind") == "List" else [doc]
        ca_bundle = base64.b64encode(ca.read_bytes()).decode()
        for item in items:
            for hook in item["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {
                    "url": f"https://{LOOPBACK}:{port}{path}",
                    "caBundle": ca_bundle,
                }
            item["metadata"]["name"] = prefix + item["metadata"]["name"]
        return items

    def _apply_list(self, items: list[dict[str, Any]]) -> None:
        self.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )

    def _apply_lws_webhooks(self, ca: Path) -> None:
        """LWS's webhook configurations (its config/webhook/manifests.yaml, with the pod
        webhooks' objectSelector of its kustomize patches), served at loopback URLs."""
        items = self._webhook_configurations(LWS_WEBHOOKS, ca, self.lws_webhook_port, "lws-")
        for item in items:
            for hook in item["webhooks"]:
                if hook["rules"][0]["resources"] == ["pods"]:
                    hook["objectSelector"] = LWS_POD_SELECTOR
        self._apply_list(items)

    def _wait_lws(self, timeout: float = 120.0) -> None:
        """Until LWS's controller answers its readiness probe (its webhooks serve by then)."""
        deadline = time.monotonic() + timeout
        url = f"http://{LOOPBACK}:{self.lws_health_port}/readyz"
        while time.monotonic() < deadline:
            if self.pid("lws-controller") is None:
                tail = (self.state_dir / "lws-controller.log").read_text()[-2000:]
                raise DevClusterError(f"lws-controller exited during start-up:\n{tail}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200 and _listening(self.lws_webhook_port):
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise DevClusterError(
            f"lws-controller not ready after {timeout:.0f}s; see {self.state_dir}"
        )

    def start_kueue(self) -> None:
        """Kueue's manager (built first if it is not cached): its CRDs, the namespace it names
        as its own, its webhooks on loopback (a certificate from a CA of this cluster's, its
        internal cert manager off) and their configurations pointing there (idempotent).

        It manages the ``pod``, ``deployment`` and ``leaderworkerset`` integrations (a workload
        labelled ``kueue.x-k8s.io/queue-name``: its pods carry the ``kueue.x-k8s.io/admission``
        scheduling gate until Kueue admits it), in namespaces labelled KUEUE_NAMESPACE_LABEL only.
        """
        build_kueue()
        self._ensure_kueue_metrics_cert()
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(KUEUE_CRDS))
        self.wait_established("-f", str(KUEUE_CRDS))
        self.kubectl("apply", "-f", "-", stdin=json.dumps(_namespace("kueue-system")))
        out = self.state_dir / "kueue"
        out.mkdir(exist_ok=True)
        if self.pid("kueue-manager") is None:
            ca = self._write_webhook_certs(out, "kueue")
            config = {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "namespace": "kueue-system",
                "leaderElection": {"leaderElect": False},
                "internalCertManagement": {"enable": False},
                "webhook": {
                    "host": LOOPBACK,
                    "port": self.kueue_webhook_port,
                    "certDir": str(out),
                },
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": f"{LOOPBACK}:{self.kueue_health_port}"},
                "managedJobsNamespaceSelector": KUEUE_NAMESPACE_SELECTOR,
                "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
                # Its on-demand visibility API server (an aggregated API) is not registered here.
                "featureGates": {"VisibilityOnDemand": False},
            }
            (out / "config.json").write_text(json.dumps(config))
            self._spawn(
                "kueue-manager",
                [
                    str(KUEUE_MANAGER),
                    "--config",
                    str(out / "config.json"),
                    "--kubeconfig",
                    str(self.kubeconfig),
                ],
            )
            self._apply_list(self._kueue_webhooks(ca))
        self._wait_kueue()
        log(f"Kueue {KUEUE_VERSION} up, webhooks on {LOOPBACK}:{self.kueue_webhook_port}")

    def stop_kueue(self) -> None:
        """Stop Kueue's manager and delete its webhook configurations (its CRDs and objects
        stay): nothing is sent to a webhook that no longer serves."""
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            with contextlib.suppress(DevClusterError):
                self.kubectl("delete", kind, "-l", f"{KUEUE_NAMESPACE_LABEL}-webhooks=dev")
        pid = self.pid("kueue-manager")
        if pid is not None:
            terminate(pid)
        self._pidfile("kueue-manager").unlink(missing_ok=True)

    def _kueue_webhooks(self, ca: Path) -> list[dict[str, Any]]:
        """Kueue's webhook configurations (config/components/webhook/manifests.yaml) with the
        webhooks of KUEUE_WEBHOOK_RESOURCES only; those of workload kinds see labelled namespaces
        only (KUEUE_NAMESPACE_SELECTOR; its kustomize patches exclude kube-system instead)."""
        items = self._webhook_configurations(KUEUE_WEBHOOKS, ca, self.kueue_webhook_port, "kueue-")
        for item in items:
            hooks = [
                hook
                for hook in item["webhooks"]
                if KUEUE_WEBHOOK_RESOURCES.intersection(hook["rules"][0]["resources"])
            ]
            for hook in hooks:
                if hook["rules"][0]["apiGroups"] != ["kueue.x-k8s.io"]:
                    hook["namespaceSelector"] = KUEUE_NAMESPACE_SELECTOR
            item["webhooks"] = hooks
            item["metadata"]["labels"] = {f"{KUEUE_NAMESPACE_LABEL}-webhooks": "dev"}
        return items

    def _ensure_kueue_metrics_cert(self) -> None:
        """A self-signed certificate at KUEUE_METRICS_CERTS when none is there (see there)."""
        crt, key = KUEUE_METRICS_CERTS / "tls.crt", KUEUE_METRICS_CERTS / "tls.key"
        if crt.exists() and key.exists():
            return
        try:
            KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DevClusterError(
                f"Kueue {KUEUE_VERSION} needs a certificate in {KUEUE_METRICS_CERTS} (its "
                f"manager reads one there and exits without it): {exc}; as root: mkdir -p "
                f"{KUEUE_METRICS_CERTS} && openssl req -x509 -newkey ec -pkeyopt "
                "ec_paramgen_curve:prime256v1 -nodes -days 3650 -subj /CN=kueue-metrics "
                f"-keyout {key} -out {crt}"
            ) from exc
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        argv = ["req", "-x509", *ec, "-days", "3650", "-subj", "/CN=kueue-metrics"]
        subprocess.run(
            ["openssl", *argv, "-keyout", str(key), "-out", str(crt)],
            check=True,
            capture_output=True,
        )

    def _wait_kueue(self, timeout: float = 180.0) -> None:
        """Until Kueue's manager answers its readiness probe and its webhook port accepts."""
        deadline = time.monotonic() + timeout
        url = f"http://{LOOPBACK}:{self.kueue_health_port}/readyz"
        while time.monotonic() < deadline:
            if self.pid("kueue-manager") is None:
                tail = (self.state_dir / "kueue-manager.log").read_text()[-3000:]
                raise DevClusterError(f"kueue-manager exited during start-up:\n{tail}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200 and _listening(self.kueue_webhook_port):
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise DevClusterError(
            f"kueue-manager not ready after {timeout:.0f}s; see {self.state_dir}/kueue-manager.log"
        )

    def _write_credentials(self) -> None:
        token = secrets.token_hex(24)
        (self.state_dir / "admin-token").write_text(token + "\n")
        (self.state_dir / "tokens.csv").write_text(f'{token},admin,admin,"system:masters"\n')
        key = self.state_dir / "sa.key"
        if not key.exists():
            subprocess.run(
                ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
            )
        subprocess.run(
            ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(self.state_dir / "sa.pub")],
            check=True,
            capture_output=True,
        )

    def _write_admission_config(self) -> Path:
        """The AdmissionConfiguration giving webhooks the apiserver's client certificate."""
        out = self.state_dir / "webhook-client"
        out.mkdir(exist_ok=True)
        ca, key = out / "ca.crt", out / "ca.key"
        crt, crt_key, csr = out / "client.crt", out / "client.key", out / "client.csr"
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        ext = out / "client.ext"
        ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
        ca_subject = "/CN=specserver-dev-webhook-client-ca"
        sign = ["-CA", ca, "-CAkey", key, "-CAcreateserial", "-days", "30", "-extfile", ext]
        for argv in (
            ["req", "-x509", *ec, "-keyout", key, "-out", ca, "-days", "30", "-subj", ca_subject],
            ["req", *ec, "-keyout", crt_key, "-out", csr, "-subj", "/CN=kube-apiserver"],
            ["x509", "-req", "-in", csr, "-out", crt, *sign],
        ):
            subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True)
        kubeconfig = out / "kubeconfig"
        user = {"client-certificate": str(crt), "client-key": str(crt_key)}
        users = [{"name": "*", "user": user}]
        kubeconfig.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "users": users}))
        webhook = {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(kubeconfig),
        }
        plugins = [
            {"name": "ValidatingAdmissionWebhook", "configuration": webhook},
            {"name": "MutatingAdmissionWebhook", "configuration": webhook},
        ]
        config = self.state_dir / "admission.json"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "AdmissionConfiguration",
                    "plugins": plugins,
                }
            )
        )
        return config

    def _spawn(self, name: str, argv: list[str]) -> None:
        spawn_detached(argv, self.state_dir / f"{name}.log", self._pidfile(name))

    def _wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return
            for name in ("etcd", "kube-apiserver"):
                if self.pid(name) is None:
                    tail = (self.state_dir / f"{name}.log").read_text()[-2000:]
                    raise DevClusterError(f"{name} exited during start-up:\n{tail}")
            time.sleep(0.5)
        raise DevClusterError(f"apiserver not ready after {timeout:.0f}s; see {self.state_dir}")

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "specserver-dev",
            "clusters": [
                {
                    "name": "specserver-dev",
                    "cluster": {"server": self.server, "insecure-skip-tls-verify": True},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token()}}],
            "contexts": [
                {
                    "name": "specserver-dev",
                    "context": {
                        "cluster": "specserver-dev",
                        "user": "admin",
                        "namespace": "default",
                    },
                }
            ],
        }
        # JSON is valid YAML; kubectl and the Python client both read it.
        self.kubeconfig.write_text(json.dumps(config, indent=2) + "\n")

    def down(self, quiet: bool = False) -> None:
        """Stop every component this state directory started and drop its data."""
        for name in reversed(COMPONENTS + ON_REQUEST):
            pid = self.pid(name)
            if pid is not None:
                terminate(pid)
                if not quiet:
                    log(f"stopped {name} (pid {pid})")
            self._pidfile(name).unlink(missing_ok=True)
        shutil.rmtree(self.state_dir / "etcd", ignore_errors=True)

    def status(self) -> dict[str, object]:
        """What runs, where, and how to use it."""
        return {
            "server": self.server,
            "ready": self.ready(),
            "kubeconfig": str(self.kubeconfig),
            "components": {n: self.pid(n) for n in COMPONENTS + ON_REQUEST},
            "versions": {
                "kubernetes": KUBE_VERSION,
                "etcd": ETCD_VERSION,
                "lws": LWS_VERSION,
                "kueue": KUEUE_VERSION,
            },
            "binaries": str(BIN_DIR),
            "kubectl": str(KUBECTL),
        }


def _namespace(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def running_pid(pidfile: Path) -> int | None:
    """The PID recorded in ``pidfile`` if that process still runs, else None."""
    if not pidfile.exists():
        return None
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def _listening(port: int) -> bool:
    """True when something accepts TCP connections on loopback ``port``."""
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((LOOPBACK, port)) == 0


def spawn_detached(argv: list[str], logfile: Path, pidfile: Path) -> None:
    """Start ``argv`` in its own session, appending to ``logfile``; record its PID.

    Detached through sh + setsid so it outlives this process (and no Popen object is left to
    be garbage-collected while its child still runs). Also used by devprom.py.
    """
    done = subprocess.run(
        ["sh", "-c", 'setsid "$@" >>"$LOG" 2>&1 </dev/null & echo $!', "sh", *argv],
        env=dict(os.environ, LOG=str(logfile)),
        capture_output=True,
        text=True,
        check=True,
    )
    pidfile.write_text(done.stdout.strip())


def terminate(pid: int, grace: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    """CLI: up | down | status | build | build-kueue | kueue-up | kueue-down | kubectl ARGS (the
    built kubectl on this cluster)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["kubectl"]:
        cluster = Cluster(
            Path(os.environ.get("SPECSERVER_DEVCLUSTER_DIR", REPO / ".devcluster")).resolve()
        )
        return subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(cluster.kubeconfig), *argv[1:]]
        ).returncode
    parser = argparse.ArgumentParser(prog="scripts/devcluster", description=__doc__.split("\n")[0])
    parser.add_argument(
        "command",
        choices=[
            "up",
            "down",
            "status",
            "build",
            "build-kueue",
            "kueue-up",
            "kueue-down",
            "kubectl",
        ],
    )
    parser.add_argument(
        "--no-kueue",
        action="store_true",
        help="build: the control plane, etcd and LWS only (build-kueue builds Kueue alone)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("SPECSERVER_DEVCLUSTER_DIR", REPO / ".devcluster")),
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=16443,
        help="apiserver port; etcd uses the next two, LWS's webhook and probe the two after, "
        "Kueue's webhook and probe the two after those",
    )
    args = parser.parse_args(argv)
    cluster = Cluster(args.state_dir.resolve(), args.base_port)
    try:
        if args.command == "build":
            ensure_run_packages()
            print(build_binaries())
            if not args.no_kueue:
                print(build_kueue())
        elif args.command == "build-kueue":
            print(build_kueue())
        elif args.command == "kueue-up":
            cluster.start_kueue()
        elif args.command == "kueue-down":
            cluster.stop_kueue()
        elif args.command == "up":
            cluster.up()
            print(f"export KUBECONFIG={cluster.kubeconfig} PATH={BIN_DIR}:$PATH")
        elif args.command == "down":
            cluster.down()
        else:
            print(json.dumps(cluster.status(), indent=2))
    except (DevClusterError, subprocess.CalledProcessError) as exc:
        print(f"devcluster: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
