"""`rubric`, a fixture that runs the command line in this process through click's `CliRunner`.

    def test_x(tmp_path, rubric):
        done = rubric("eval", "gsm8k", "-m", "scripted:oracle", "-n", "2", cwd=tmp_path)
        assert done.returncode == 0, done.stderr

It calls `cli.main` (what the console script runs) inside `CliRunner.isolation()`, stdout and
stderr captured, and returns what a subprocess would (`returncode`, `stdout`, `stderr`), in a
fraction of the time. Nothing a command changes is kept: the working directory, the environment
variables, `sys.path` and the modules imported from the tests' temporary folders are put back,
log handlers writing to the captured streams removed, and the signal handlers must come back as
they were (a leak fails the test). Warnings stay errors (`-W error`), so a command that warns
fails here: the warning lines of worker runs are checked in a real process. So are servers,
signals, workers, the console script itself and a terminal on stdin (`tests.helpers.run`,
`at_a_terminal`): there the process is the point.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cli

#: Signals whose handlers a command may set while it runs (eval: SIGTERM/SIGHUP raise Stopped).
WATCHED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class Ran:
    """What one `rubric` command did, with the fields of `subprocess.CompletedProcess`."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def _loaded_from(folders: tuple[str, ...]) -> list[str]:
    """Modules imported from files under `folders` (environment files and packages of a test)."""
    return [
        name
        for name, module in list(sys.modules.items())
        if (getattr(module, "__file__", None) or "").startswith(folders)
    ]


#: The type of the `rubric` fixture, for the tests' annotations.
Invoke = Callable[..., Ran]


@pytest.fixture
def rubric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Invoke]:
    """`rubric(*args, cwd=DIR, env={...})`: `rubric ARGS` run in DIR in this process (see above)."""
    runner = CliRunner()
    temp = tmp_path_factory.getbasetemp()
    temp_roots = tuple({f"{temp}{os.sep}", f"{temp.resolve()}{os.sep}"})
    handlers = {sig: signal.getsignal(sig) for sig in WATCHED_SIGNALS}

    def invoke(*args: str, cwd: Path, env: Mapping[str, str | None] | None = None) -> Ran:
        # Wide enough that rich does not wrap what tests read, as `tests.helpers.run` does.
        overrides = {"COLUMNS": "200", **(env or {})}
        before_dir, before_path, before_environ = os.getcwd(), list(sys.path), dict(os.environ)
        captured: tuple[object, ...] = ()
        os.chdir(cwd)
        try:
            with runner.isolation(env=overrides) as (out, err, _):
                captured = (sys.stdin, sys.stdout, sys.stderr)
                try:
                    code = cli.main(list(args))
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                except Exception:  # what the interpreter prints for an uncaught error (--debug)
                    traceback.print_exc(file=sys.stderr)
                    code = 1
                sys.stdout.flush()
                sys.stderr.flush()
                stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
        finally:
            os.chdir(before_dir)
            sys.path[:] = before_path
            for name in os.environ.keys() - before_environ.keys():  # set by the command itself
                del os.environ[name]
            os.environ.update(before_environ)
            for name in _loaded_from(temp_roots):
                del sys.modules[name]
            for logger, handler in _stream_handlers():
                if handler.stream in captured:  # it would write to a closed stream next time
                    logger.removeHandler(handler)
        return Ran(args, code, stdout, stderr)

    yield invoke
    changed = {sig.name for sig, handler in handlers.items() if signal.getsignal(sig) != handler}
    for sig in WATCHED_SIGNALS:
        signal.signal(sig, handlers[sig])
    assert not changed, f"a command left its own handlers for {sorted(changed)}"


def _stream_handlers() -> list[tuple[logging.Logger, logging.StreamHandler[Any]]]:
    """Every logger's stream handlers, the root's included."""
    loggers = [logging.root, *logging.root.manager.loggerDict.values()]
    return [
        (logger, handler)
        for logger in loggers
        if isinstance(logger, logging.Logger)
        for handler in logger.handlers
        if isinstance(handler, logging.StreamHandler)
    ]
