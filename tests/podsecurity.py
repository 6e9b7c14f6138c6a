"""A checker for the Kubernetes Pod Security Standards "restricted" profile (tests only).

The local control plane is kube-apiserver 1.20, which has no PodSecurity admission, so the
tests hold rendered pods to the profile with this checker instead. It follows the published
standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/, the
"baseline" controls plus the "restricted" ones) for the fields our pods can carry; each
violation is a sentence naming the field, as PodSecurity admission would.
"""

from __future__ import annotations

from typing import Any

RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t"}


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a Pod or of a workload's pod template."""
    if obj.get("kind") == "Pod":
        return dict(obj["spec"])
    return dict(obj["spec"]["template"]["spec"])


def _containers(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(group) or []:
            out.append((f"{group}[{c.get('name', '?')}]", c))
    return out


LWS_ROLES = ("leaderTemplate", "workerTemplate")


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs a workload runs: a Deployment's one, a LeaderWorkerSet's leader and worker
    (leaderworkerset.x-k8s.io/v1 ``spec.leaderWorkerTemplate``)."""
    if obj.get("kind") == "LeaderWorkerSet":
        group = obj["spec"]["leaderWorkerTemplate"]
        return [dict(group[role]["spec"]) for role in LWS_ROLES]
    return [pod_spec(obj)]


def violations(obj: dict[str, Any]) -> list[str]:
    """Every "restricted" violation of a Pod or workload (empty when it passes); a
    LeaderWorkerSet's leader and worker templates are each held to it like a Pod."""
    if obj.get("kind") == "LeaderWorkerSet":
        group = obj["spec"]["leaderWorkerTemplate"]
        found = []
        for role in LWS_ROLES:
            pod = {
                "kind": "Pod",
                "metadata": group[role].get("metadata"),
                "spec": group[role]["spec"],
            }
            found += [f"{role}: {v}" for v in violations(pod)]
        return found
    spec = pod_spec(obj)
    annotations = (
        (obj.get("metadata") or {}).get("annotations")
        if obj.get("kind") == "Pod"
        else (obj["spec"]["template"].get("metadata") or {}).get("annotations")
    ) or {}
    psc = spec.get("securityContext") or {}
    out: list[str] = []
    # baseline
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"spec.{field} must be false")
    for vol in spec.get("volumes") or []:
        kinds = [k for k in vol if k != "name"]
        if "hostPath" in kinds:
            out.append(f"volume {vol.get('name')}: hostPath is not allowed")
        elif not set(kinds) <= RESTRICTED_VOLUMES:
            out.append(f"volume {vol.get('name')}: type {kinds} is not allowed")
    for sysctl in psc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append(f"securityContext.sysctls {sysctl.get('name')} is not allowed")
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            out.append(f"annotation {key}={value} is not allowed")
    if psc.get("runAsUser") == 0:
        out.append("securityContext.runAsUser must not be 0")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp == "Unconfined":
        out.append("securityContext.seccompProfile.type must not be Unconfined")
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("securityContext.windowsOptions.hostProcess must not be true")
    if (psc.get("seLinuxOptions") or {}).get("type", "") not in SELINUX_TYPES:
        out.append("securityContext.seLinuxOptions.type is not allowed")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{where}: privileged must be false")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"{where}: hostProcess must not be true")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                out.append(f"{where}: hostPort must be unset")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"{where}: procMount must be Default")
        if (sc.get("seLinuxOptions") or {}).get("type", "") not in SELINUX_TYPES:
            out.append(f"{where}: seLinuxOptions.type is not allowed")
        caps = sc.get("capabilities") or {}
        added = set(caps.get("add") or [])
        if not added <= BASELINE_CAPABILITIES:
            out.append(f"{where}: capabilities.add {sorted(added)} is not allowed")
        # restricted
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{where}: allowPrivilegeEscalation must be false")
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{where}: capabilities.drop must include ALL")
        if not added <= {"NET_BIND_SERVICE"}:
            out.append(f"{where}: capabilities.add may only hold NET_BIND_SERVICE")
        non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        if non_root is not True:
            out.append(f"{where}: runAsNonRoot must be true (pod or container)")
        if sc.get("runAsUser") == 0:
            out.append(f"{where}: runAsUser must not be 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{where}: seccompProfile.type must be RuntimeDefault or Localhost")
    return out
