"""A real Kubernetes control plane on loopback: etcd + kube-apiserver + kube-controller-manager.

Used by ``scripts/devcluster up|down|status|build`` and, through ``Cluster``, by the pytest
session fixture (tests/conftest.py), so both start the stack the same way. Standard library only:
it runs before the project's virtual environment exists. Never binds anything but 127.0.0.1.

kube-apiserver has no Debian binary package, so it is built once from Debian's ``kubernetes``
source package (1.20.2) and cached outside the repository (see ../shared/reference/
local-control-plane.md for why each step is there).

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
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

KUBE_VERSION = "1.20.2"
REPO = Path(__file__).resolve().parent.parent
CACHE = Path(
    os.environ.get("SPECSERVER_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specserver"
)
BIN_DIR = CACHE / f"kubernetes-{KUBE_VERSION}" / "bin"
BINARIES = ("kube-apiserver", "kube-controller-manager")
RUN_PACKAGES = {"etcd": "etcd-server", "openssl": "openssl", "kubectl": "kubernetes-client"}
BUILD_PACKAGES = ["golang-go", "rsync", "dpkg-dev", "golang-github-modern-go-reflect2-dev"]
REFLECT2_SRC = Path("/usr/share/gocode/src/github.com/modern-go/reflect2")
LOOPBACK = "127.0.0.1"
#: CRDs of the controllers played by stand-ins (scripts/standins/*-crd.yaml), installed by ``up``.
STANDIN_CRDS = {"leaderworkersets.leaderworkerset.x-k8s.io": "leaderworkerset-crd.yaml"}
STANDINS_DIR = REPO / "scripts" / "standins"


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
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", *packages],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def ensure_run_packages() -> None:
    """Install etcd, openssl and kubectl from Debian when they are missing."""
    _apt_install([pkg for cmd, pkg in RUN_PACKAGES.items() if shutil.which(cmd) is None])


def _ensure_deb_src() -> None:
    target = Path("/etc/apt/sources.list.d/specserver-deb-src.sources")
    if target.exists():
        return
    deb822 = Path("/etc/apt/sources.list.d/debian.sources")
    if deb822.exists():
        text = deb822.read_text().replace("Types: deb\n", "Types: deb-src\n")
        target.write_text(text)
        return
    legacy = Path("/etc/apt/sources.list")
    lines = (
        [
            ln.replace("deb ", "deb-src ", 1)
            for ln in legacy.read_text().splitlines()
            if ln.startswith("deb ")
        ]
        if legacy.exists()
        else []
    )
    if not lines:
        raise DevClusterError("no Debian apt source found to derive a deb-src entry from")
    target.with_suffix(".list").write_text("\n".join(lines) + "\n")


def build_binaries() -> Path:
    """Build kube-apiserver and kube-controller-manager once; return the cached bin dir."""
    if all((BIN_DIR / b).exists() for b in BINARIES):
        return BIN_DIR
    _apt_install([p for p in BUILD_PACKAGES if not _dpkg_installed(p)])
    _ensure_deb_src()
    build_root = CACHE / "build"
    shutil.rmtree(build_root, ignore_errors=True)
    build_root.mkdir(parents=True)
    log(f"fetching Debian's kubernetes source package ({KUBE_VERSION}); building takes ~7 min")
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(
        ["apt-get", "source", "-qq", "kubernetes"],
        cwd=build_root,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    trees = [p for p in build_root.iterdir() if p.is_dir() and p.name.startswith("kubernetes-")]
    if len(trees) != 1:
        raise DevClusterError(f"expected one unpacked kubernetes tree in {build_root}")
    tree = trees[0]
    # Go 1.19 + vendored reflect2 1.0.1 segfaults on the first map encode; use Debian's 1.0.2.
    vendored = tree / "vendor/github.com/modern-go/reflect2"
    shutil.rmtree(vendored)
    shutil.copytree(REFLECT2_SRC, vendored)
    gopath_link = tree / ".go/src/k8s.io/kubernetes"
    gopath_link.parent.mkdir(parents=True, exist_ok=True)
    gopath_link.symlink_to("../../..")
    env = dict(os.environ, GOPATH=str(tree / ".go"), CGO_ENABLED="0")
    what = " ".join(f"cmd/{b}" for b in BINARIES)
    with open(build_root / "build.log", "w") as out:
        done = subprocess.run(
            ["make", f"WHAT={what}"], cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        raise DevClusterError(f"kubernetes build failed; see {build_root / 'build.log'}")
    BIN_DIR.mkdir(parents=True, exist_ok=True)
    for b in BINARIES:
        shutil.copy2(tree / "_output/bin" / b, BIN_DIR / b)
    shutil.rmtree(build_root, ignore_errors=True)
    log(f"cached {', '.join(BINARIES)} in {BIN_DIR}")
    return BIN_DIR


def _dpkg_installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
    )
    return done.returncode == 0 and "install ok installed" in done.stdout


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

    def up(self) -> None:
        """Start etcd, the apiserver and the controller-manager (idempotent)."""
        if self.pid("kube-apiserver") and self.ready():
            log(f"already up at {self.server}")
            self.install_standin_crds()
            return
        self.down(quiet=True)
        ensure_run_packages()
        bins = build_binaries()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._write_credentials()
        self._spawn(
            "etcd",
            [
                "etcd",
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
                "--port",
                "0",
                "--leader-elect=false",
                "--service-account-private-key-file",
                str(sa_key),
                "--root-ca-file",
                str(certs / "apiserver.crt"),
                "--use-service-account-credentials=false",
                "--controllers",
                "*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-ttl",
            ],
        )
        self.install_standin_crds()
        log(f"up: {self.server}; export KUBECONFIG={self.kubeconfig}")

    def install_standin_crds(self) -> None:
        """Apply the stand-ins' CRDs (STANDIN_CRDS) and wait until each is Established."""
        kubectl = ["kubectl", "--kubeconfig", str(self.kubeconfig)]
        for name, filename in STANDIN_CRDS.items():
            applied = subprocess.run(
                [*kubectl, "apply", "-f", str(STANDINS_DIR / filename)],
                capture_output=True,
                text=True,
            )
            if applied.returncode != 0:
                raise DevClusterError(f"installing {filename} failed: {applied.stderr.strip()}")
            established = subprocess.run(
                [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}"],
                capture_output=True,
                text=True,
            )
            if established.returncode != 0:
                raise DevClusterError(f"CRD {name} not Established: {established.stderr.strip()}")
        log(f"installed stand-in CRDs: {', '.join(STANDIN_CRDS)}")

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
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
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
            "components": {
                n: self.pid(n) for n in ("etcd", "kube-apiserver", "kube-controller-manager")
            },
            "binaries": str(BIN_DIR),
        }


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
    """CLI: up | down | status | build."""
    parser = argparse.ArgumentParser(prog="scripts/devcluster", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status", "build"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("SPECSERVER_DEVCLUSTER_DIR", REPO / ".devcluster")),
    )
    parser.add_argument(
        "--base-port", type=int, default=16443, help="apiserver port; etcd uses the next two"
    )
    args = parser.parse_args(argv)
    cluster = Cluster(args.state_dir.resolve(), args.base_port)
    try:
        if args.command == "build":
            ensure_run_packages()
            print(build_binaries())
        elif args.command == "up":
            cluster.up()
            print(f"export KUBECONFIG={cluster.kubeconfig}")
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
