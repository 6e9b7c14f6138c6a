"""Build the project's container images here, for real: the operator image (operator/Dockerfile)
and the engine image on the simulated engine (engine-image/Dockerfile.sim).

Used by ``scripts/build-images`` and, through ``build()``, by scripts/test and the cluster test
that runs the operator from its image (tests/cluster/test_operator_image.py). Standard library
only: it runs before the project's virtual environment exists.

Base images cannot be pulled here (no container registry is reachable), but Debian's packages
can: the base is a Debian 12 root file system made with ``mmdebstrap`` (Python 3.11 and pip,
the same Python as ``python:3.11-slim-bookworm``) and imported into podman. The production
Dockerfiles take their base as ``ARG BASE`` (python:3.11-slim-bookworm by default), so the same
files build here and for a registry (docs/operator.md, "Images").

Everything is cached outside the repository, keyed by its inputs: the root file system by the
package list (``~/.cache/specserver/images/``, override with ``SPECSERVER_CACHE``), each image
by a hash of the files it is built from (its tag). A second run with unchanged inputs builds
nothing.

As root, podman needs ``--runtime runc --cgroup-manager cgroupfs`` on this kind of machine (no
systemd, no crun that works) and explicit ``--ulimit`` values no higher than the caller's hard
limits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(
    os.environ.get("SPECSERVER_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specserver"
)
IMAGES_DIR = CACHE / "images"
SUITE = "bookworm"
MIRROR = os.environ.get("SPECSERVER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SECURITY_MIRROR = os.environ.get(
    "SPECSERVER_DEBIAN_SECURITY_MIRROR", "http://deb.debian.org/debian-security"
)
#: What the base root file system holds: Python 3.11 with pip (what python:3.11-slim-bookworm
#: offers the Dockerfiles) and CA certificates. ``passwd`` (useradd) is in minbase.
BASE_PACKAGES = ("python3", "python3-pip", "ca-certificates")
#: Make Debian's Python behave like the python:*-slim images: pip may install system-wide (PEP
#: 668's marker removed) and ``python`` exists.
BASE_HOOKS = (
    'rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED',
    'ln -sf python3 "$1"/usr/bin/python',
    'rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
)
#: Host tools the build needs, by Debian package.
TOOLS = {"mmdebstrap": "mmdebstrap", "podman": "podman", "runc": "runc", "newuidmap": "uidmap"}
#: What each image is built from (paths relative to the repository; the Dockerfiles COPY these).
CONTEXT_PATHS = (
    "pyproject.toml",
    "README.md",
    "advisor",
    "operator",
    "engine-image",
    "crds",
    "manifests",
    ".dockerignore",
)
NPROC_LIMIT = 4096
#: Certificate authorities this machine trusts besides Debian's (update-ca-certificates).
LOCAL_CA_DIR = Path(os.environ.get("SPECSERVER_LOCAL_CA_DIR", "/usr/local/share/ca-certificates"))


class BuildError(RuntimeError):
    """An image could not be built; the message says why."""


@dataclass(frozen=True)
class Image:
    """One image the project builds: its Dockerfile and its local repository name."""

    name: str
    dockerfile: str
    #: a command run in the built image to show it works (its entrypoint's arguments)
    smoke: tuple[str, ...]


IMAGES = (
    Image("specserver-operator", "operator/Dockerfile", ("--help",)),
    Image("specserver-engine-sim", "engine-image/Dockerfile.sim", ("version",)),
)


def log(msg: str) -> None:
    """Progress line on stderr (stdout is kept for the tags callers parse)."""
    print(f"build-images: {msg}", file=sys.stderr, flush=True)


def podman_cmd() -> list[str]:
    """podman with the global flags this machine needs (as root: runc and cgroupfs)."""
    cmd = ["podman"]
    if os.geteuid() == 0:
        cmd += ["--runtime", "runc", "--cgroup-manager", "cgroupfs"]
    return cmd


def ulimits() -> list[str]:
    """Explicit --ulimit flags within this process's hard limits (podman's defaults exceed
    them and the runtime then refuses to start the container)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nofile = 65536 if nofile == resource.RLIM_INFINITY else min(nofile, 65536)
    nproc = NPROC_LIMIT if nproc == resource.RLIM_INFINITY else min(nproc, NPROC_LIMIT)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def _missing_tools() -> list[str]:
    return sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})


def ensure_tools() -> None:
    """Install mmdebstrap, podman and runc from Debian when missing (as root), else say how."""
    missing = _missing_tools()
    if not missing:
        return
    if os.geteuid() != 0:
        raise BuildError(
            f"missing Debian packages {missing}; run: sudo apt-get install -y " + " ".join(missing)
        )
    log(f"installing {' '.join(missing)} from Debian")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-qq"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-qq", *missing],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    still = _missing_tools()
    if still:
        raise BuildError(f"still missing after apt-get install: {still}")


def base_key() -> str:
    """Changes exactly when the base root file system would."""
    material = {
        "suite": SUITE,
        "mirrors": [MIRROR, SECURITY_MIRROR],
        "packages": BASE_PACKAGES,
        "hooks": BASE_HOOKS,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def base_tag() -> str:
    """The local name of the imported base image."""
    return f"localhost/specserver-debian:{SUITE}-{base_key()}"


def _run(cmd: list[str], what: str, quiet: bool = True) -> str:
    done = subprocess.run(cmd, capture_output=quiet, text=True)
    if done.returncode != 0:
        tail = (done.stderr or "")[-3000:] if quiet else "(output above)"
        raise BuildError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n{tail}")
    return done.stdout or ""


def image_exists(tag: str) -> bool:
    """Whether podman holds ``tag``."""
    return subprocess.run([*podman_cmd(), "image", "exists", tag]).returncode == 0


def rootfs() -> Path:
    """The cached Debian root file system (a tar), made with mmdebstrap when missing."""
    IMAGES_DIR.mkdir(parents=True, exist_ok=True)
    out = IMAGES_DIR / f"debian-{SUITE}-{base_key()}.tar"
    if out.exists():
        return out
    log(f"making a Debian {SUITE} root file system with mmdebstrap (a few minutes): {out}")
    partial = out.with_suffix(".partial.tar")
    cmd = [
        "mmdebstrap",
        "--variant=minbase",
        "--include=" + ",".join(BASE_PACKAGES),
        *[f"--customize-hook={hook}" for hook in BASE_HOOKS],
        SUITE,
        str(partial),
        f"deb {MIRROR} {SUITE} main",
        f"deb {MIRROR} {SUITE}-updates main",
        f"deb {SECURITY_MIRROR} {SUITE}-security main",
    ]
    _run(cmd, "mmdebstrap")
    partial.rename(out)
    return out


def local_cas() -> list[Path]:
    """The certificate authorities this machine adds to Debian's (for example a TLS-inspecting
    egress proxy's): the build trusts them to reach the package index, as the host does."""
    return sorted(LOCAL_CA_DIR.glob("*.crt")) if LOCAL_CA_DIR.is_dir() else []


def _trusting(base: str, cas: list[Path]) -> str:
    """``base`` with ``cas`` added to its trust store (a layer of its own, keyed by the CAs),
    or ``base`` itself when there are none."""
    if not cas:
        return base
    digest = hashlib.sha256(b"".join(ca.read_bytes() for ca in cas)).hexdigest()[:12]
    tag = f"{base}-ca-{digest}"
    if image_exists(tag):
        return tag
    log(f"adding this machine's CAs ({', '.join(ca.name for ca in cas)}) to {base}")
    with tempfile.TemporaryDirectory(prefix="specserver-ca-") as tmp:
        for ca in cas:
            shutil.copy(ca, Path(tmp) / ca.name)
        (Path(tmp) / "Containerfile").write_text(
            f"FROM {base}\nCOPY *.crt /usr/local/share/ca-certificates/\n"
            "RUN update-ca-certificates\n"
        )
        _run(
            [*podman_cmd(), "build", "--network", "none", *ulimits(), "-t", tag, tmp],
            "adding the local CAs",
        )
    return tag


def ensure_base() -> str:
    """The base image imported into podman (with this machine's CAs); returns its tag."""
    tag = base_tag()
    if not image_exists(tag):
        tar = rootfs()
        log(f"importing {tar.name} as {tag}")
        _run([*podman_cmd(), "import", str(tar), tag], "podman import")
    return _trusting(tag, local_cas())


def _context_files() -> list[Path]:
    """The files of the build context (tracked or new, never ignored ones)."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "--", *CONTEXT_PATHS],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        files = [REPO / p for p in listed]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the tree
        files = []
        for rel in CONTEXT_PATHS:
            root = REPO / rel
            found = [root] if root.is_file() else sorted(root.rglob("*"))
            files += [f for f in found if f.is_file() and "__pycache__" not in f.parts]
    return sorted(f for f in files if f.is_file())


def inputs_hash(image: Image, base: str) -> str:
    """A hash of everything ``image`` is built from: the base, its Dockerfile, the context."""
    digest = hashlib.sha256()
    digest.update(f"{base}\0{image.dockerfile}\0".encode())
    for path in [REPO / image.dockerfile, *_context_files()]:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def image_tag(image: Image, base: str) -> str:
    """The tag ``image`` gets for the current inputs."""
    return f"localhost/{image.name}:{inputs_hash(image, base)}"


def build_image(image: Image, base: str) -> str:
    """Build ``image`` on ``base`` unless its inputs' tag exists; returns the tag."""
    tag = image_tag(image, base)
    if image_exists(tag):
        log(f"{tag}: up to date")
        return tag
    log(f"building {tag} from {image.dockerfile}")
    with tempfile.TemporaryDirectory(prefix="specserver-build-") as tmp:
        cmd = [
            *podman_cmd(),
            "build",
            "--network",
            "host",
            *ulimits(),
            "--build-arg",
            f"BASE={base}",
            "-f",
            str(REPO / image.dockerfile),
            "-t",
            tag,
            "-t",
            f"localhost/{image.name}:dev",
            str(REPO),
        ]
        env_log = Path(tmp) / "build.log"
        with env_log.open("w") as out:
            done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            tail = env_log.read_text()[-4000:]
            raise BuildError(f"podman build of {image.dockerfile} failed:\n{tail}")
    smoke(image, tag)
    return tag


def smoke(image: Image, tag: str) -> None:
    """Run the image's entrypoint once (as the image's own user) to show it starts."""
    _run(
        [*podman_cmd(), "run", "--rm", "--network", "none", *ulimits(), tag, *image.smoke],
        f"the smoke run of {tag}",
    )


def build() -> dict[str, str]:
    """Build every image (cached); returns image name -> tag."""
    ensure_tools()
    base = ensure_base()
    return {image.name: build_image(image, base) for image in IMAGES}


def tags() -> dict[str, str]:
    """The tags the current inputs give (built or not)."""
    base = base_tag()
    cas = local_cas()
    if cas:
        digest = hashlib.sha256(b"".join(ca.read_bytes() for ca in cas)).hexdigest()[:12]
        base = f"{base}-ca-{digest}"
    return {image.name: image_tag(image, base) for image in IMAGES}


def main(argv: list[str] | None = None) -> int:
    """``scripts/build-images [--print-tags]``."""
    parser = argparse.ArgumentParser(prog="build-images", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--print-tags", action="store_true", help="print the tags the inputs give; build nothing"
    )
    args = parser.parse_args(argv)
    try:
        result = tags() if args.print_tags else build()
    except BuildError as exc:
        print(f"build-images: error: {exc}", file=sys.stderr)
        return 1
    for name, tag in result.items():
        print(f"{name} {tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
