"""Which Docker Engine API requests a sandboxed child may make: its own containers, confined, and nothing else.

The engine's socket is root on the host: a container started with the host's `/` bound in,
`--privileged`, the host's network or PID namespace reads the key and the ledger, and an
`exec` into someone else's container reaches whatever it holds. verifiers' docker runtime
needs far less: `run` (create, attach, wait, start) of the task image and of its helper
containers, `exec`, `inspect`, `port`, `rm`, image inspection, and the version/ping calls
the CLI makes. So the child gets the API through the guard (autoenv.containers.guard), which
asks `decide` about every request:

- containers it created (by the id the engine returned, or the name it asked for) may be
  inspected, started, exec'd into, copied to and from, waited on, killed and removed; no
  other container may be touched;
- a new container may bind only folders under the evaluation's share folder (where
  verifiers' egress proxy passes its listener), publish ports only on loopback, join only
  the default bridge, no network, or the network of a container of its own; it may not be
  privileged, add devices, add capabilities outside NAMESPACED_CAPS, share the host's PID,
  IPC, UTS, user or cgroup namespace, drop its seccomp or AppArmor profile, or take another
  container's volumes;
- an exec may not be privileged;
- images may be inspected and pulled from a registry (not one on loopback), never built,
  imported, loaded, tagged, pushed or removed (a tag is how another evaluation's helper
  image would be replaced); the lists of containers, networks and events, the daemon's
  `info`, volumes, plugins, swarm and secrets are out of reach.

`decide` returns None to allow, else the reason, which the guard sends back as a 403 the
docker CLI prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qs

# Capabilities a container may add: each acts only inside the container's own namespaces.
NAMESPACED_CAPS = {"NET_ADMIN", "NET_RAW", "NET_BIND_SERVICE", "DAC_OVERRIDE", "CHOWN", "FOWNER", "FSETID",
                   "SETUID", "SETGID", "SETPCAP", "KILL", "AUDIT_WRITE", "SYS_CHROOT", "MKNOD", "SETFCAP"}
HARMLESS_SECURITY_OPTS = re.compile(r"^no-new-privileges(?:[:=]true)?$")
LOOPBACK = {"127.0.0.1", "::1", "localhost"}
VERSION_PREFIX = re.compile(r"^/v\d+(?:\.\d+)?(?=/)")

# (method, path pattern) anyone may call: the CLI's handshake, read-only lists, image inspection and pulls.
# Not the lists of containers, networks or events, nor `info`: they would show other containers' names, labels and
# host paths, and verifiers needs none of them.
OPEN = [
    ("GET", r"/_ping"), ("HEAD", r"/_ping"), ("GET", r"/version"),
    ("GET", r"/images/json"), ("GET", r"/images/[^/]+(?:/[^/]+)*/json"), ("GET", r"/images/[^/]+(?:/[^/]+)*/history"),
    ("GET", r"/distribution/[^/]+(?:/[^/]+)*/json"),
]
# What may be done to a container of the child's own (the part after /containers/<ref>).
OWN_CONTAINER = {
    ("GET", "/json"), ("POST", "/start"), ("POST", "/stop"), ("POST", "/restart"), ("POST", "/kill"),
    ("POST", "/wait"), ("POST", "/attach"), ("GET", "/attach/ws"), ("POST", "/resize"), ("GET", "/logs"),
    ("GET", "/top"), ("GET", "/stats"), ("GET", "/changes"), ("POST", "/exec"), ("GET", "/archive"),
    ("PUT", "/archive"), ("HEAD", "/archive"), ("DELETE", ""), ("POST", "/pause"), ("POST", "/unpause"),
}
OWN_EXEC = {("POST", "/start"), ("POST", "/resize"), ("GET", "/json")}


@dataclass
class Owned:
    """The containers and execs one evaluation's child created, as the engine named them."""

    containers: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    execs: set[str] = field(default_factory=set)

    def container(self, ref: str) -> bool:
        ref = ref.lstrip("/")
        return ref in self.names or any(len(ref) >= 12 and cid.startswith(ref) for cid in self.containers)

    def exec(self, ref: str) -> bool:
        return any(len(ref) >= 12 and eid.startswith(ref) for eid in self.execs)


def split(target: str) -> tuple[str, dict[str, list[str]]]:
    """`/v1.41/containers/create?name=x` -> ("/containers/create", {"name": ["x"]})."""
    path, _, query = target.partition("?")
    return VERSION_PREFIX.sub("", path), parse_qs(query)


def decide(method: str, target: str, body: dict | None, owned: Owned, share: Path) -> str | None:
    """None when the child may make this request, else why not."""
    path, query = split(target)
    for allowed_method, pattern in OPEN:
        if method == allowed_method and re.fullmatch(pattern, path):
            return None
    if method == "POST" and path == "/images/create":
        return pull_problem(query)
    if method == "POST" and path == "/containers/create":
        return create_problem(body or {}, owned, share)
    match = re.fullmatch(r"/containers/([^/]+)(/.*)?", path)
    if match:
        ref, rest = match.group(1), match.group(2) or ""
        if (method, rest) not in OWN_CONTAINER:
            return f"{method} /containers/<id>{rest} is not an operation the sandbox allows"
        if not owned.container(ref):
            return f"container {ref} was not created by this evaluation"
        if rest == "/exec" and (body or {}).get("Privileged"):
            return "a privileged exec is not allowed"
        return None
    match = re.fullmatch(r"/exec/([^/]+)(/.*)?", path)
    if match:
        if (method, match.group(2) or "") not in OWN_EXEC or not owned.exec(match.group(1)):
            return f"exec {match.group(1)} was not created by this evaluation"
        return None
    return f"{method} {path} is not an operation the sandbox allows (only the evaluation's own containers are)"


def pull_problem(query: dict[str, list[str]]) -> str | None:
    """A pull from a registry; never an import (it would let a tarball take any tag, the helper image's too), nor a
    pull from a registry on this machine (one the candidate could serve)."""
    if query.get("fromSrc"):
        return "importing an image is not allowed (pull one, or build it outside the evaluation)"
    name = (query.get("fromImage") or [""])[0]
    registry = name.split("/", 1)[0] if "/" in name else ""
    host = registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry
    if host in LOOPBACK or host.startswith("127.") or host in ("[::1]", "0.0.0.0"):
        return f"pulling {name} from a registry on loopback is not allowed"
    return None


def create_problem(body: dict, owned: Owned, share: Path) -> str | None:
    """Why a container with this create body may not start, or None."""
    host = body.get("HostConfig") or {}
    if host.get("Privileged"):
        return "a privileged container is not allowed"
    for bind in host.get("Binds") or []:
        source = str(bind).split(":", 1)[0]
        if not within(source, share):
            return f"binding {source} is not allowed (only folders under {share})"
    for mount in host.get("Mounts") or []:
        kind, source = mount.get("Type", "volume"), str(mount.get("Source") or "")
        if kind == "tmpfs":
            continue
        if kind != "bind" or not within(source, share):
            return f"a {kind} mount of {source or 'an anonymous volume'} is not allowed (only bind mounts under {share})"
    if host.get("VolumesFrom"):
        return "taking another container's volumes is not allowed"
    if host.get("Devices") or host.get("DeviceCgroupRules"):
        return "adding host devices is not allowed"
    extra = {str(c).upper().removeprefix("CAP_") for c in host.get("CapAdd") or []} - NAMESPACED_CAPS
    if extra:
        return f"adding capabilities {', '.join(sorted(extra))} is not allowed"
    for key in ("PidMode", "IpcMode", "UTSMode", "UsernsMode", "CgroupnsMode"):
        value = str(host.get(key) or "")
        if value == "host" or value.startswith("container:"):
            return f"{key} {value} is not allowed (the container keeps namespaces of its own)"
    for opt in host.get("SecurityOpt") or []:
        if not HARMLESS_SECURITY_OPTS.match(str(opt)):
            return f"security option {opt} is not allowed"
    if host.get("Runtime") not in (None, "", "runc"):
        return f"runtime {host.get('Runtime')} is not allowed"
    if host.get("CgroupParent"):
        return "a cgroup parent is not allowed"
    network = str(host.get("NetworkMode") or "default")
    if network.startswith("container:"):
        if not owned.container(network.partition(":")[2]):
            return f"joining the network of {network.partition(':')[2]}, not a container of this evaluation, is not allowed"
    elif network not in ("default", "bridge", "none"):
        return f"network {network} is not allowed (only the default bridge, none, or a container of this evaluation)"
    for bindings in (host.get("PortBindings") or {}).values():
        for binding in bindings or []:
            if str((binding or {}).get("HostIp") or "") not in LOOPBACK:
                return "publishing a port beyond loopback is not allowed"
    if host.get("PublishAllPorts"):
        return "publishing every port is not allowed"
    return None


def within(source: str, share: Path) -> bool:
    """Whether `source` is `share` or under it, without following links (a link is the daemon's to follow, and
    the share folder's contents are the evaluation's own)."""
    if not source.startswith("/"):
        return False
    parts = PurePosixPath(source).parts
    if ".." in parts:
        return False
    return PurePosixPath(source) == PurePosixPath(share) or PurePosixPath(share) in PurePosixPath(source).parents
