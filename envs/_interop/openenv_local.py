"""An installed OpenEnv server app (`module:app`) run on 127.0.0.1 for as long as an environment needs it."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from typing import IO

from envs._interop.openenv_schema import OpenEnvConnectError
from envs._interop.openenv_wire import RequestFailed, get
from harness._core.child import wrap

START_TIMEOUT = 60.0
"""Seconds a local server (`openenv:module:app`) may take to answer /health."""


class LocalServer:
    """An OpenEnv server app (`module:app`, as OpenEnv's `server/app.py` defines it) run by
    uvicorn on 127.0.0.1 in a child process that never outlives this one (`harness._core.child`);
    `python` (default: this one) runs it, e.g. another venv's with another OpenEnv version."""

    def __init__(self, app: str, *, python: str | None = None, start_timeout: float = START_TIMEOUT) -> None:
        self.app = app
        self.python = python or sys.executable
        if shutil.which(self.python) is None:
            raise OpenEnvConnectError(
                f"cannot start the OpenEnv server app {app!r}: no python executable at {self.python!r}; "
                "give the path of a venv's bin/python"
            )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._errlog: IO[bytes] = tempfile.TemporaryFile()
        command = [self.python, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(self.port)]
        self._process = subprocess.Popen(
            wrap([*command, "--log-level", "warning"]), stdout=subprocess.DEVNULL, stderr=self._errlog
        )
        self._finalizer = weakref.finalize(self, _stop, self._process, self._errlog)
        self._wait(start_timeout)

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(RequestFailed):
                if get(f"{self.url}/health", timeout=2).status == 200:
                    return
            if self._process.poll() is not None or time.monotonic() > deadline:
                why = "it exited" if self._process.poll() is not None else f"no answer within {timeout:g}s"
                tail = self.stderr_tail()
                self.close()
                by = "" if self.python == sys.executable else f" (run by {self.python})"
                raise OpenEnvConnectError(
                    f"the OpenEnv server app {self.app!r}{by} did not start: {why}"
                    + (f"; its stderr ends: {tail}" if tail else "")
                    + "; check that the module imports and defines an app built with create_app(...)"
                )
            time.sleep(0.1)

    def stderr_tail(self) -> str:
        with contextlib.suppress(ValueError, OSError):
            self._errlog.seek(0)
            return " ".join(self._errlog.read().decode(errors="replace").split())[-600:]
        return ""

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self._finalizer()


def _stop(process: subprocess.Popen[bytes], errlog: IO[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
    errlog.close()


__all__ = ["START_TIMEOUT", "LocalServer"]
