"""Find an environment by name, file or import path and build it.

An environment package exposes `load_environment(**kwargs) -> Environment` and declares it
under the entry-point group `rubric.environments`, so `pip install` is all it takes to make
it loadable by name (hyphens and underscores are the same, as in package names). A path to a
`.py` file or `module:function` works without installing anything, for development.
The spec and kwargs are recorded on the environment so a saved run can be re-created.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from envs import _provenance as provenance
from envs._environment import DEFER_DATASETS, Environment
from envs._inputs import DuplicateToolError
from envs._project import ENTRY_POINT_GROUP, Project
from envs._tools.mcp import server_from_text
from harness._core.errors import (
    ConfigError,
    ConfigTypeError,
    EnvironmentNotFoundError,
    RubricError,
    UserCodeError,
    raised_at,
)
from harness._core.text import escape_control


@dataclass(frozen=True)
class ForeignSpec:
    """How a spec prefix names another framework's environment (`vf:NAME`, `openenv:URL`)."""

    #: The `module:function` that builds ours from the rest of the spec. By name, not import:
    #: the interop loaders sit above the registry and import the peers' optional libraries.
    loader: str
    #: What it is, in the message of a results folder that names one.
    kind: str
    #: The rest of the spec is a module name (an installed package), whose provenance is recorded.
    names_module: bool = False
    #: The rest of the spec is a local path, recorded absolute (workers, resume from elsewhere).
    names_path: bool = False


#: Spec prefixes naming another framework's environments.
FOREIGN_SPECS: dict[str, ForeignSpec] = {
    "vf": ForeignSpec(
        "envs._interop.verifiers:load_verifiers",
        "a Verifiers environment (imported by module name)",
        names_module=True,
    ),
    "openenv": ForeignSpec(
        "envs._interop.openenv:from_openenv",
        "an OpenEnv environment (a server to connect to, or an app to start)",
    ),
    "harbor": ForeignSpec(
        "envs._harbor.environment:load_environment",
        "Harbor tasks (a task folder, a folder of them, or a registry dataset NAME@VERSION)",
        names_path=True,
    ),
}


@dataclass(frozen=True)
class RegisteredEnvironment:
    """One installed environment: its name, the entry point target and who provides it.

    Args:
        name: The environment's name (its entry point's).
        value: The entry point's target, `module:function`.
        distribution: The installed distribution that provides it, when known.
        version: That distribution's version, when known.
    """

    name: str
    value: str
    distribution: str | None
    version: str | None


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def _entry_points() -> dict[str, list[EntryPoint]]:
    """Entry points by normalised name; the same distribution found twice counts once."""
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        same = found.setdefault(_normalise(ep.name), [])
        if not any(other.value == ep.value for other in same):
            same.append(ep)
    return found


def _registered(ep: EntryPoint) -> RegisteredEnvironment:
    dist = getattr(ep, "dist", None)
    return RegisteredEnvironment(
        name=ep.name,
        value=ep.value,
        distribution=dist.metadata["Name"] if dist is not None else None,
        version=dist.version if dist is not None else None,
    )


def list_environments() -> list[RegisteredEnvironment]:
    """Every environment registered under `rubric.environments`, sorted by name."""
    return sorted((_registered(ep) for eps in _entry_points().values() for ep in eps), key=lambda e: e.name)


def _installed_hint() -> str:
    names = sorted({e.name for e in list_environments()})
    return (
        f"installed environments: {', '.join(names)}"
        if names
        else f"no environments are installed (entry-point group {ENTRY_POINT_GROUP!r})"
    )


def _from_file(path: Path) -> Any:
    if not path.is_file():
        raise EnvironmentNotFoundError(
            f"environment file not found: {str(path)!r}; give an existing .py file, a package folder, "
            "an installed name or module:function"
        )
    module_name = f"_rubric_env_{path.stem}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise EnvironmentNotFoundError(f"cannot import {str(path)!r} as a Python module; give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses/pickle look modules up by name
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        _raise_user_code_error(exc, f"importing {str(path)!r}")
    return _loader_of(module, str(path))


def _from_directory(path: Path) -> Any:
    """A package folder with a pyproject.toml (as `rubric init` writes): its entry point, from the folder."""
    return Project.load(path).resolve_entry_point()


def _loader_of(module: ModuleType, where: str) -> Any:
    loader = getattr(module, "load_environment", None)
    if not callable(loader):
        raise EnvironmentNotFoundError(
            f"{where} defines no load_environment(**kwargs) function; add one that returns an Environment"
        )
    return loader


def _from_import_path(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
            _raise_user_code_error(exc, f"importing {module_name!r}")  # a module it imports is missing
        raise EnvironmentNotFoundError(
            f"no module named {module_name!r} (from spec {spec!r}); install it or fix the name"
        ) from None
    except BaseException as exc:
        _raise_user_code_error(exc, f"importing {module_name!r}")
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise EnvironmentNotFoundError(
                f"module {module_name!r} has no attribute {attr!r} (from spec {spec!r})"
            )
        target = getattr(target, part)
    if not callable(target):
        raise ConfigTypeError(
            f"{spec!r} is a {type(target).__name__}, not a function returning an Environment"
        )
    return target


def _from_name(name: str) -> tuple[Any, str]:
    matches = _entry_points().get(_normalise(name), [])
    if len(matches) > 1:
        providers = "; ".join(f"{e.value} from {_registered(e).distribution}" for e in matches)
        raise EnvironmentNotFoundError(
            f"environment name {name!r} is registered more than once ({providers}); uninstall one, "
            "or load it as module:function"
        )
    if matches:
        loaded = matches[0].load()
        return (_loader_of(loaded, matches[0].value) if isinstance(loaded, ModuleType) else loaded), matches[
            0
        ].name
    module_name = _normalise(name)
    if all(part.isidentifier() for part in module_name.split(".")):
        try:
            found = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            found = None
        if found is not None:
            module = importlib.import_module(module_name)
            if callable(getattr(module, "load_environment", None)):
                return module.load_environment, name
    raise EnvironmentNotFoundError(
        f"no environment named {name!r}; {_installed_hint()}. A path to a .py file or module:function also works"
    )


def _provenance_of_name(name: str) -> dict[str, Any]:
    matches = _entry_points().get(_normalise(name), [])
    dist = getattr(matches[0], "dist", None) if matches else None
    if dist is not None:
        return provenance.of_distribution(dist, matches[0].value)
    return provenance.of_module(_normalise(name))


def _current_folder_importable() -> None:
    """Let a spec that names a module (`vf:NAME`, `module:function`, a bare name) find it in the
    current folder, as `file.py` and `openenv:module:app` (run with `python -m`) are found there,
    whatever started us (the `rubric` script puts its own folder on sys.path, not this one).
    The folder goes last, so an installed package of the same name still wins; worker
    processes copy this sys.path."""
    here = str(Path.cwd())
    if not any(entry in ("", ".", here) for entry in sys.path):  # "": an interactive session's folder
        sys.path.append(here)
        importlib.invalidate_caches()


def _resolve(spec: str) -> tuple[Any, str, str | None, dict[str, Any]]:
    """What builds the environment `spec` names: its loader, the spec to record (a path made
    absolute), its registered name (an installed one's, or a Verifiers package's) and where it
    came from (provenance)."""
    registered_name: str | None = None
    recorded_spec = spec
    prefix, _, target = spec.partition(":")
    foreign = FOREIGN_SPECS.get(prefix) if target else None
    if foreign is not None:  # vf:NAME (found by Verifiers), openenv:URL, openenv:module:app
        if foreign.names_module:
            _current_folder_importable()
        loader = functools.partial(_from_import_path(foreign.loader), target)
        registered_name = target if foreign.names_module else None
        if foreign.names_path and Path(target).expanduser().exists():  # not a name (harbor:NAME@VERSION)
            recorded_spec = f"{prefix}:{Path(target).expanduser().resolve()}"
        origin = provenance.of_module(
            target.replace("-", "_") if foreign.names_module else foreign.loader.partition(":")[0]
        )
    elif ("/" in spec or "\\" in spec) and Path(spec).is_dir():
        loader = _from_directory(Path(spec))
        recorded_spec = str(Path(spec).resolve())
        origin = provenance.of_directory(Path(spec))
    elif spec.endswith(".py") or "/" in spec or "\\" in spec:
        loader = _from_file(Path(spec))
        recorded_spec = str(Path(spec).resolve())  # so `rubric score` finds it from any directory
        origin = provenance.of_file(Path(spec))
    elif ":" in spec:
        _current_folder_importable()
        loader = _from_import_path(spec)
        origin = provenance.of_module(spec.partition(":")[0])
    else:
        if _normalise(spec) not in _entry_points():  # a local module by that name, then
            _current_folder_importable()
        loader, registered_name = _from_name(spec)
        origin = _provenance_of_name(spec)
    return loader, recorded_spec, registered_name, origin


def _add_servers(env: Environment, texts: Sequence[str]) -> None:
    """The tools of `--mcp` servers added to `env`; a name clash names the `--mcp` and its fix."""
    servers = [server_from_text(text) for text in texts]
    try:
        env.add_tools(servers)
    except DuplicateToolError as exc:
        for number, server in enumerate(servers, 1):
            clashing = [t.name for t in server.tools() if t.name in exc.names]
            if clashing:
                renamed = f"mcp{number}={server.label}"
                raise ConfigError(
                    f"{exc.what}; the tools of --mcp {server.label!r} clash ({', '.join(clashing)}): "
                    f"give them a prefix with --mcp {shlex.quote(renamed)} (then {clashing[0]} is "
                    f"mcp{number}_{clashing[0]}; in Python: mcp_servers=[{renamed!r}])"
                ) from None
        raise


def load_environment(
    spec: str,
    *,
    mcp_servers: Sequence[str] | None = None,
    **kwargs: Any,
) -> Environment:
    """Build the environment `spec` names, passing `kwargs` to its `load_environment`.

    `mcp_servers` adds the tools of MCP servers to it (each a stdio command line or a
    streamable-HTTP URL, as `rubric eval --mcp` takes them; see `envs.mcp_server`); they are
    recorded with `kwargs` in `env.source`, so worker processes and resumed runs add them too.

    `spec` is an installed name (entry-point group `rubric.environments`), a path to a `.py`
    file defining `load_environment`, a package folder whose pyproject.toml declares the
    entry point (imported from the folder, uninstalled), `module:function`, or another
    framework's environment: `vf:NAME` (an installed Verifiers environment, through
    `envs.from_verifiers`), `openenv:URL` or `openenv:module:app` (`envs.from_openenv`).

    `kwargs` are that environment's own arguments, so no static type can list them; they are
    checked against its `load_environment` signature before it runs (an unknown name is a
    ConfigTypeError listing the accepted ones).

    Args:
        spec: what to load (the forms above).
        mcp_servers: MCP servers whose tools are added (stdio command lines or URLs).
        **kwargs: the environment's own arguments.

    Returns:
        The built `Environment`.

    Raises:
        EnvironmentNotFoundError: Nothing is installed or importable under `spec`.
        ConfigTypeError: An argument the environment does not take, or its `load_environment`
            returned something other than an `envs.Environment`.
        UserCodeError: The environment's own code failed (the error names where).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigTypeError(f"environment spec must be a non-empty string, got {spec!r}")
    loader, recorded_spec, registered_name, origin = _resolve(spec)
    _check_kwargs(loader, kwargs, spec)
    env = _call_loader(loader, kwargs, spec)
    if not isinstance(env, Environment):
        raise ConfigTypeError(
            f"load_environment of {spec!r} returned an object of type {type(env).__name__}, "
            "not an Environment; return an envs.Environment (or a subclass such as envs.ToolEnv)"
        )
    if mcp_servers:
        _add_servers(env, mcp_servers)
    # How to build it again (workers, TRL, resume) and where it came from (metadata.json).
    recorded = {**kwargs, "mcp_servers": list(mcp_servers)} if mcp_servers else dict(kwargs)
    env.source = EnvironmentSpec(recorded_spec, recorded)
    env.provenance = origin
    if registered_name is not None and not env._name_given:
        env.name = registered_name
    return env


@dataclass(frozen=True)
class EnvironmentSpec:
    """How the registry built an environment, as plain picklable data, so another process (a
    worker of `evaluate(..., workers=N)`, a TRL worker, a resumed run) builds the same one.

    `load_environment` sets it as `env.source`; it implements `harness._core.protocol.EnvironmentSource`.

    Attributes:
        spec: what `load_environment` was given (a file or folder made absolute).
        kwargs: the environment's own arguments (and `mcp_servers`, when given).
    """

    spec: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self, *, worker: bool = False) -> Environment:
        """Build the environment again.

        With `worker=True` (a worker process: the driver already checked the dataset and sends
        each worker its examples as plain dicts) the environment defers its dataset until
        something asks for it, so a worker does not import `datasets` for the examples.
        """
        if not worker:
            return load_environment(self.spec, **self.kwargs)
        token = DEFER_DATASETS.set(True)
        try:
            return load_environment(self.spec, **self.kwargs)
        finally:
            DEFER_DATASETS.reset(token)

    def __str__(self) -> str:
        arguments = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.spec}({arguments})" if arguments else self.spec


def recorded_environment(recorded: Mapping[str, Any], source: str, command: str = "load_environment(") -> str:
    """The installed environment a results folder's metadata names, without running anything.

    A results folder is data: a name in it may only select an environment the user installed
    (an entry point of `rubric.environments`). A file path or `module:function` in it is never
    imported; the error shows the command to type if the user trusts it.

    Args:
        recorded: The `env` section of metadata.json.
        source: Where it came from (shown in messages), e.g. "runs/x/metadata.json".
        command: What the user types before the spec to load it on purpose (shown in messages),
            e.g. "rubric score runs/x".

    Raises:
        EnvironmentNotFoundError: The metadata names no environment, names code by path or
            `module:function`, or names an environment that is not installed.
    """
    spec = recorded.get("load_spec") or recorded.get("name")
    if not isinstance(spec, str) or not spec.strip():
        raise EnvironmentNotFoundError(
            f"{source} does not say which environment made it; name it: {command} ENV"
        )
    is_code = spec.endswith(".py") or "/" in spec or "\\" in spec or ":" in spec
    if not is_code and _normalise(spec) in _entry_points():
        return spec
    kind = "code by path or module:function" if is_code else "an environment that is not installed"
    if spec.partition(":")[0] in FOREIGN_SPECS:
        kind = FOREIGN_SPECS[spec.partition(":")[0]].kind
    shown = escape_control(spec)  # from a file: its control characters never reach a terminal
    raise EnvironmentNotFoundError(
        f"{source} names {shown!r}, {kind}; a results folder never runs code it names. If you trust "
        f"it, name it yourself: {command} {shlex.quote(shown)}"
    )


def _call_loader(loader: Any, kwargs: dict[str, Any], spec: str) -> Any:
    """Call the environment's own `load_environment`; a failure of that code names where."""
    try:
        return loader(**kwargs)
    except BaseException as exc:
        _raise_user_code_error(exc, f"load_environment of {spec!r}")


def _raise_user_code_error(exc: BaseException, doing: str) -> NoReturn:
    """Re-raise a failure of the user's environment code as one that says where it happened.

    Our own errors and ValueError/TypeError (which already say what is wrong with the
    arguments or data) pass through, as do KeyboardInterrupt and the like.
    """
    if isinstance(exc, (RubricError, ValueError, TypeError)) or not isinstance(exc, (Exception, SystemExit)):
        raise exc
    if isinstance(exc, SystemExit):
        raise UserCodeError(
            f"{doing} called sys.exit({exc.code!r}) at {raised_at(exc)}; "
            "an environment must raise an exception, not exit"
        ) from None
    raise UserCodeError(f"{doing} raised {type(exc).__name__}: {exc} at {raised_at(exc)}") from exc


def _check_kwargs(loader: Any, kwargs: dict[str, Any], spec: str) -> None:
    """Reject unknown keyword arguments naming the accepted ones (a TypeError, like Python's)."""
    try:
        params = inspect.signature(loader).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ConfigTypeError(
            f"environment {spec!r} does not accept argument(s) {', '.join(unknown)}; "
            f"it accepts: {', '.join(accepted) or 'no arguments'}"
        )


__all__ = [
    "ENTRY_POINT_GROUP",
    "EnvironmentNotFoundError",
    "EnvironmentSpec",
    "RegisteredEnvironment",
    "list_environments",
    "load_environment",
    "recorded_environment",
]
