"""A real package index (pypiserver) on 127.0.0.1, for the hub tests."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.endpoints import free_port


@dataclass(frozen=True)
class HubServer:
    """A running pypiserver: its base URL, upload credentials and package folder."""

    url: str
    user: str
    password: str
    packages: Path


@contextlib.contextmanager
def serve_pypiserver(
    folder: Path, *, user: str = "alice", password: str = "wonderland"
) -> Iterator[HubServer]:
    """Run `pypiserver` in a subprocess on a free loopback port with an htpasswd file; stop it after.

    Uploads need the credentials (`-a update`); reads are open; no fallback to PyPI.
    """
    import warnings

    with warnings.catch_warnings():  # passlib imports the deprecated `crypt` module
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

    packages = folder / "packages"
    packages.mkdir(parents=True, exist_ok=True)
    htpasswd = HtpasswdFile(str(folder / "htpasswd"), new=True)
    htpasswd.set_password(user, password)
    htpasswd.save()
    port = free_port()
    log = (folder / "pypiserver.log").open("wb")
    command = [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port)]
    command += ["-P", str(folder / "htpasswd"), "-a", "update", "--disable-fallback", str(packages)]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/simple/", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"pypiserver did not start: {(folder / 'pypiserver.log').read_text()}"
                    ) from None
                time.sleep(0.1)
        yield HubServer(url=url, user=user, password=password, packages=packages)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
