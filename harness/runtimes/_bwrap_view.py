"""What a bubblewrap sandbox sees: the bubblewrap options that build its namespaces and file system.

An empty root holding read-only binds of either the host's system folders (`bwrap`: /usr and
the /bin, /lib symlinks, a few files of /etc) or every top-level folder of a root filesystem
(`bwrap:ROOTFS_DIR`), then the sandbox's read-only `mounts`, then an empty tmpfs over every
folder of installed Python packages and rubric data that those binds would show (the host's
system Python's, and this interpreter's wherever it lives: a base install puts this project,
its dependencies and the reference environments' answer keys under the interpreter's own
tree), then the private writable layer: size-capped tmpfs at `/tmp` and the working directory.
One argument list built in one place, so a reviewer sees everything a sandbox is shown.
"""

from __future__ import annotations

import functools
import glob
import os
import site
import sys
from pathlib import Path

from harness._core.errors import ConfigError
from harness.runtimes._base import SOCKET_DIR, SandboxConfig

#: The writable tmpfs layers' size when the sandbox has no `disk_mb`.
DEFAULT_DISK_MB = 1024
_SKIP_TOP = {"proc", "dev", "sys", "tmp", "run", "lost+found"}
_HOST_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/alternatives")
_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates")
_PACKAGE_PATTERNS = (
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3*/dist-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/share/rubric",
    "/usr/local/share/rubric",
)


def host_entries() -> list[tuple[str, str]]:
    """(kind, path) of the host system folders a `bwrap` sandbox sees read-only."""
    entries = [("bind", "/usr")]
    for name in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(name):
            entries.append(("link", name))
        elif os.path.isdir(name):
            entries.append(("bind", name))
    entries += [("bind", name) for name in _HOST_FILES if os.path.exists(name)]
    return entries


def rootfs_entries(rootfs: Path) -> list[tuple[str, str]]:
    """(kind, path) of a root filesystem's top-level folders, seen read-only."""
    entries = []
    for child in sorted(rootfs.iterdir()):
        if child.name in _SKIP_TOP:
            continue
        entries.append(("link" if child.is_symlink() else "bind", f"/{child.name}"))
    return entries


@functools.cache
def _package_folders() -> tuple[str, ...]:
    """Host folders that may hold installed Python packages (this project, its dependencies) or
    rubric's data (answer keys): the system Python's, and this interpreter's prefixes' (real
    paths; whether each exists is asked per sandbox)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = {path for pattern in _PACKAGE_PATTERNS for path in glob.glob(pattern)}
    found |= set(site.getsitepackages())
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/usr/local"}:
        found |= {
            os.path.join(prefix, "share", "rubric"),
            os.path.join(prefix, "lib", version, "site-packages"),
            os.path.join(prefix, "lib", version, "dist-packages"),
            os.path.join(prefix, "lib", "python3", "dist-packages"),
        }
    return tuple(sorted({os.path.realpath(path) for path in found}))


def masks(views: list[tuple[str, str]]) -> list[str]:
    """Sandbox paths to cover with an empty tmpfs: every package or rubric data folder lying in
    a host folder the sandbox sees. `views` pairs each such host folder with its sandbox path."""
    found = set()
    for path in _package_folders():
        for host, inside in views:
            top = os.path.realpath(host)
            if (path == top or path.startswith(top.rstrip("/") + "/")) and os.path.isdir(path):
                found.add(inside.rstrip("/") + path[len(top.rstrip("/")) :])
    return sorted(found)


def layer_args(rootfs: Path | None, config: SandboxConfig, socket_dir: Path | None) -> list[str]:
    """The file system's options: the read-only system (or root filesystem), `config.mounts`,
    the masks, the writable tmpfs layers and, when given, the Unix socket folder at /run/rubric."""
    source = rootfs or Path("/")
    entries = rootfs_entries(rootfs) if rootfs else host_entries()
    args: list[str] = []
    views: list[tuple[str, str]] = []
    for kind, path in entries:
        real = source / path.lstrip("/")
        if kind == "link":
            args += ["--symlink", os.readlink(real), path]
        else:
            args += ["--ro-bind", str(real), path]
            if rootfs is None:  # a root filesystem's own packages are its business
                views.append((str(real), path))
    for host, inside in config.mounts.items():
        args += ["--ro-bind", host, inside]
        views.append((host, inside))
    for path in masks(views):  # after the binds they cover
        args += ["--tmpfs", path]
    size = str((config.disk_mb or DEFAULT_DISK_MB) << 20)
    writable = ["/tmp"]
    if not (config.workdir == "/tmp" or config.workdir.startswith("/tmp/")):
        writable.append(config.workdir)
    for path in writable:
        args += ["--size", size, "--tmpfs", path]
    if socket_dir is not None:
        args += ["--tmpfs", "/run", "--bind", str(socket_dir), SOCKET_DIR]
    return args


def sandbox_args(rootfs: Path | None, config: SandboxConfig, socket_dir: Path | None) -> list[str]:
    """Every bubblewrap option of a sandbox but its environment and the command: fresh user,
    PID, mount, network (unless `config.network` is "host"), IPC, UTS and cgroup namespaces,
    tied to this process, a session of its own, and its file system (`layer_args`)."""
    if config.network == "bridge":
        raise ConfigError(
            "a bwrap sandbox has no network of its own (network 'bridge'): give it 'none', or 'host' "
            "(the machine's network), or use a docker: runtime"
        )
    args = ["--unshare-all", "--die-with-parent", "--new-session"]
    if config.network == "host":
        args.append("--share-net")
    args += layer_args(rootfs, config, socket_dir)
    if config.network == "host" and rootfs is None:
        for name in _NETWORK_FILES:
            args += ["--ro-bind-try", name, name]
    args += ["--proc", "/proc", "--dev", "/dev", "--dir", config.workdir, "--chdir", config.workdir]
    return [*args, "--hostname", "sandbox", "--clearenv"]
