"""Compose sandboxes: a Docker Compose project (Harbor's multi-container task) as one sandbox.

`compose:PATH/TO/docker-compose.yaml` (optionally `?main=IMAGE`) makes sandboxes whose
commands, files and forks are those of the service `main`, a `DockerSandbox` container like any
other (its keeper, limits, labels, mounts). The other services are sidecars, each a container
built or named as the file says, started in `depends_on` order (waiting for `service_healthy`
and `service_completed_successfully` where asked) before the sandbox is handed out.

Networking: a *holder* container (the main image running the same stdin keeper as `main`,
`--network none`) owns the project's network namespace, and every service joins it
(`container:<holder>`): one loopback, no interface leading out, and `/etc/hosts` mapping each
service's name to 127.0.0.1. So the sidecars are reached by name on their own ports and nothing
else is reachable, from inside or outside: a bridge network would not do, since with the
daemon's `--iptables=false` a container on an `internal` network still reaches the host's
services through its gateway (measured). Services therefore share one port space.

Lifetime: the sidecars also join the holder's PID namespace (not `main`'s: the agent cannot see
or signal them). When the driver dies, even by SIGKILL, its attaches close, both keepers exit,
the kernel kills every process of the holder's PID namespace with its init, and the daemon
removes every container (`AutoRemove`); no Docker network is made. Every container carries the
sandbox's labels, so `rubric sandboxes prune` removes whatever a dead owner left.

The file is read with PyYAML and checked against the keys below; anything else is refused,
naming the file and the key, rather than ignored. Variables are Harbor's (`MAIN_IMAGE_NAME`,
`CONTEXT_DIR`, `ENV_AGENT_LOGS_PATH`, `ENV_VERIFIER_LOGS_PATH`), `${VAR:-default}` and `$$`.
"""

from __future__ import annotations

import asyncio
import contextlib
import graphlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness._core.errors import ConfigError
from harness.runtimes._base import RuntimeUnavailableError, Sandbox, SandboxConfig, SandboxError
from harness.runtimes._docker import DockerRuntime, DockerSandbox, build_context, client
from harness.runtimes._state import SandboxState

MAIN = "main"
#: What a service's image is when it is the main image (`${MAIN_IMAGE_NAME}`, or none given).
_MAIN_IMAGE = "\x00main-image"
_TOP_KEYS = {"services", "version", "name"}
_MAIN_KEYS = {"image", "build", "environment", "depends_on", "expose"}
_SIDECAR_KEYS = _MAIN_KEYS | {"command", "entrypoint", "healthcheck", "working_dir", "user"}
_CONDITIONS = ("service_started", "service_healthy", "service_completed_successfully")
_VARIABLE = re.compile(r"\$(?:(\$)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_UNITS_NS = {"us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
_KEEPER = ["sh", "-c", "exec cat > /dev/null"]
#: Seconds a sidecar has to become healthy or complete before the sandbox fails.
WAIT_DEADLINE = 600.0


@dataclass(frozen=True)
class Service:
    """One service of a compose file, as rubric runs it.

    Attributes:
        name: Its name (also its host name inside the project).
        image: The image it runs (`_MAIN_IMAGE`: the main image); None when it is built.
        build: Its build context folder, when it is built.
        dockerfile: The Dockerfile's path inside the context (None: `Dockerfile`).
        command: Its command (None: the image's).
        entrypoint: Its entrypoint (None: the image's).
        environment: Its environment variables.
        depends_on: The services it waits for, with the condition of each.
        healthcheck: The Engine's `Healthcheck` of it (None: the image's).
        working_dir: Its working folder (None: the image's).
        user: Its user (None: the image's).
    """

    name: str
    image: str | None = _MAIN_IMAGE
    build: Path | None = None
    dockerfile: str | None = None
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    depends_on: dict[str, str] = field(default_factory=dict)
    healthcheck: dict[str, Any] | None = None
    working_dir: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class ComposeProject:
    """A parsed compose file: its services (`main` among them) and their start order."""

    file: Path
    services: dict[str, Service]
    order: list[str]

    @property
    def sidecars(self) -> list[str]:
        """The services other than `main`, in start order."""
        return [name for name in self.order if name != MAIN]


def load_compose(file: str | Path) -> ComposeProject:
    """Read and check a compose file.

    Raises:
        ConfigError: It is missing, does not parse, has no `main` service, or uses a key, a
            variable or a value rubric does not support (the file and the key are named).
    """
    path = Path(file).expanduser().resolve()
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"compose file {path} cannot be read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"compose file {path} does not parse: {' '.join(str(exc).split())}") from None
    variables = {
        "MAIN_IMAGE_NAME": _MAIN_IMAGE,
        "CONTEXT_DIR": str(path.parent),
        "ENV_AGENT_LOGS_PATH": "/logs/agent",
        "ENV_VERIFIER_LOGS_PATH": "/logs/verifier",
    }
    try:
        data = _interpolate(raw, variables)
        services = _services(data, path.parent)
        order = list(
            graphlib.TopologicalSorter({n: set(s.depends_on) for n, s in services.items()}).static_order()
        )
    except graphlib.CycleError as exc:
        raise ConfigError(
            f"compose file {path}: depends_on has a cycle ({' -> '.join(exc.args[1])})"
        ) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"compose file {path}: {exc}") from None
    return ComposeProject(path, services, order)


def _interpolate(value: Any, variables: Mapping[str, str]) -> Any:
    """`value` with `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `$VAR` and `$$` resolved."""
    if isinstance(value, dict):
        return {key: _interpolate(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolate(item, variables) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        dollar, name, how, default, bare = match.groups()
        if dollar:
            return "$"
        name = name or bare
        found = variables.get(name)
        if found is not None and not (how == ":-" and found == ""):
            return found
        if how is not None:
            return str(default)
        raise ValueError(
            f"it uses ${{{name}}}, which rubric does not set (it sets {', '.join(sorted(variables))}); "
            "give a default as ${NAME:-value}"
        )

    return _VARIABLE.sub(one, value)


def _services(data: Any, folder: Path) -> dict[str, Service]:
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ValueError("it has no `services:` mapping")
    extra = sorted(k for k in data if k not in _TOP_KEYS and not str(k).startswith("x-"))
    if extra:
        raise ValueError(
            f"top-level key {extra[0]!r} is not supported (services share one private network "
            f"and no volumes; rubric reads {', '.join(sorted(_TOP_KEYS))} and x- extensions)"
        )
    if MAIN not in data["services"]:
        raise ValueError("it has no `main` service (the agent's container)")
    services = {str(name): _service(str(name), spec or {}, folder) for name, spec in data["services"].items()}
    for service in services.values():
        unknown = sorted(set(service.depends_on) - set(services))
        if unknown:
            raise ValueError(f"service {service.name!r} depends on {unknown[0]!r}, which it does not define")
    return services


def _service(name: str, spec: Any, folder: Path) -> Service:
    if not isinstance(spec, dict):
        raise ValueError(f"service {name!r} is not a mapping")
    allowed = _MAIN_KEYS if name == MAIN else _SIDECAR_KEYS
    extra = sorted(set(spec) - allowed)
    if extra:
        why = " (main runs rubric's keeper; the agent's commands run in it)" if name == MAIN else ""
        raise ValueError(
            f"service {name!r}: key {extra[0]!r} is not supported{why}; rubric reads {', '.join(sorted(allowed))}"
        )
    build, dockerfile = _build(name, spec.get("build"), folder)
    image = spec.get("image")
    return Service(
        name=name,
        image=None if build is not None and image is None else str(image or _MAIN_IMAGE),
        build=build,
        dockerfile=dockerfile,
        command=_argv(name, "command", spec.get("command")),
        entrypoint=_argv(name, "entrypoint", spec.get("entrypoint")),
        environment=_environment(name, spec.get("environment")),
        depends_on=_depends_on(name, spec.get("depends_on")),
        healthcheck=_healthcheck(name, spec.get("healthcheck")),
        working_dir=None if spec.get("working_dir") is None else str(spec["working_dir"]),
        user=None if spec.get("user") is None else str(spec["user"]),
    )


def _build(name: str, build: Any, folder: Path) -> tuple[Path | None, str | None]:
    if build is None:
        return None, None
    spec = {"context": build} if isinstance(build, str) else build
    if not isinstance(spec, dict) or set(spec) - {"context", "dockerfile"}:
        raise ValueError(f"service {name!r}: build must be a folder or {{context, dockerfile}}")
    context = (folder / str(spec.get("context", "."))).resolve()
    if context != folder and folder not in context.parents:
        raise ValueError(f"service {name!r}: build context {context} lies outside the compose file's folder")
    if not context.is_dir():
        raise ValueError(f"service {name!r}: build context {context} is not a folder")
    dockerfile = spec.get("dockerfile")
    if not (context / str(dockerfile or "Dockerfile")).is_file():
        raise ValueError(f"service {name!r}: build context {context} has no {dockerfile or 'Dockerfile'}")
    return context, None if dockerfile is None else str(dockerfile)


def _argv(name: str, key: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return ["/bin/sh", "-c", value]
    if isinstance(value, list):
        return [str(v) for v in value]
    raise ValueError(f"service {name!r}: {key} must be a string or a list")


def _environment(name: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        value = dict(
            str(item).partition("=")[::2] if "=" in str(item) else (str(item), None) for item in value
        )
    if not isinstance(value, dict):
        raise ValueError(f"service {name!r}: environment must be a mapping or a list of NAME=VALUE")
    bare = [str(k) for k, v in value.items() if v is None]
    if bare:  # Compose would pass the host's value: rubric passes none of the host's variables
        raise ValueError(
            f"service {name!r}: environment {bare[0]} has no value (Compose would take the host's; "
            "rubric passes none of the host's variables): give it one"
        )
    return {str(k): str(v) for k, v in value.items()}


def _depends_on(name: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list):
        return {str(v): "service_started" for v in value}
    if not isinstance(value, dict):
        raise ValueError(f"service {name!r}: depends_on must be a list or a mapping")
    found = {}
    for other, how in value.items():
        condition = str((how or {}).get("condition", "service_started"))
        if condition not in _CONDITIONS:
            raise ValueError(
                f"service {name!r}: depends_on condition {condition!r} is not one of {', '.join(_CONDITIONS)}"
            )
        found[str(other)] = condition
    return found


def _healthcheck(name: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"service {name!r}: healthcheck must be a mapping")
    if value.get("disable"):
        return {"Test": ["NONE"]}
    test = value.get("test")
    check: dict[str, Any] = {
        "Test": ["CMD-SHELL", test] if isinstance(test, str) else [str(t) for t in test or []]
    }
    for key, engine in (("interval", "Interval"), ("timeout", "Timeout"), ("start_period", "StartPeriod")):
        if key in value:
            check[engine] = _nanoseconds(name, key, value[key])
    if "retries" in value:
        check["Retries"] = int(value["retries"])
    return check


def _nanoseconds(name: str, key: str, value: Any) -> int:
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(
            f"service {name!r}: healthcheck {key} {value!r} is not a duration such as '5s' or '1m30s'"
        )
    return int(sum(float(n) * _UNITS_NS[u] for n, u in parts))


class ComposeSandbox(DockerSandbox):
    """A compose project: `main` is this sandbox's container (see the module docstring)."""

    runtime: ComposeRuntime

    def __init__(
        self, config: SandboxConfig, state: SandboxState, runtime: DockerRuntime, image: str | None = None
    ) -> None:
        super().__init__(config, state, runtime, image)
        self._holder: Any = None
        self._holder_attach: Any = None
        self._sidecars: dict[str, Any] = {}

    async def _start(self) -> None:
        project = self.runtime.project
        main_image = self.image or await self.runtime.image()
        images = await self.runtime.sidecar_images()
        self._docker = client()
        await self._start_holder(main_image)
        for name in project.order:
            await self._wait_for(project.services[name])
            if name == MAIN:
                await super()._start()
            else:
                await self._start_sidecar(project.services[name], images[name] or main_image)

    async def _start_holder(self, image: str) -> None:
        """The container owning the project's network and (sidecars') PID namespaces."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        assert self._docker is not None
        hosts = [f"{name}:127.0.0.1" for name in self.runtime.project.services]
        config: dict[str, Any] = {
            "Image": image, "Cmd": _KEEPER, "Entrypoint": [], "OpenStdin": True, "StdinOnce": True,
            "AttachStdin": True, "Labels": {**self.state.labels, "rubric.compose": "holder"},
            "HostConfig": {"NetworkMode": "none", "Init": True, "AutoRemove": True, "ExtraHosts": hosts,
                           "PidsLimit": 16, "Ulimits": [{"Name": "core", "Soft": 0, "Hard": 0}]},
        }  # fmt: skip
        try:
            self._holder = await self._docker.containers.create(config)
            self._holder_attach = self._holder.attach(stdin=True)
            await self._holder_attach.__aenter__()
            await self._holder.start()
        except DockerError as exc:
            raise SandboxError(
                f"compose {self.runtime.project.file}: cannot start the project: {exc.message}"
            ) from exc

    async def _start_sidecar(self, service: Service, image: str) -> None:
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        assert self._docker is not None
        shared = f"container:{self._holder.id}"
        waited = any(s.depends_on.get(service.name) == "service_completed_successfully"
                     for s in self.runtime.project.services.values())  # fmt: skip
        config: dict[str, Any] = {
            "Image": image,
            "Env": [f"{k}={v}" for k, v in service.environment.items()],
            "Labels": {**self.state.labels, "rubric.compose": service.name},
            # One waited for to complete is kept until its exit code is read (removed at close).
            "HostConfig": {
                "NetworkMode": shared,
                "PidMode": shared,
                "AutoRemove": not waited,
                **({"PidsLimit": self.config.pids} if self.config.pids else {}),
            },
        }
        for key, value in (("Cmd", service.command), ("Entrypoint", service.entrypoint),
                           ("Healthcheck", service.healthcheck), ("WorkingDir", service.working_dir),
                           ("User", service.user)):  # fmt: skip
            if value is not None:
                config[key] = value
        try:
            container = await self._docker.containers.create(config)
            self._sidecars[service.name] = container
            await container.start()
        except DockerError as exc:
            raise SandboxError(
                f"compose {self.runtime.project.file}: service {service.name!r} ({image}) cannot start: {exc.message}"
            ) from exc

    def _container_config(self, image: str) -> dict[str, Any]:
        config = super()._container_config(image)
        main = self.runtime.project.services[MAIN]
        config["Env"] = [f"{k}={v}" for k, v in main.environment.items()] + config["Env"]
        config["NetworkDisabled"] = False
        config["HostConfig"]["NetworkMode"] = f"container:{self._holder.id}"
        return config

    async def _wait_for(self, service: Service) -> None:
        """Wait until each service `service` depends on meets its condition."""
        for other, condition in service.depends_on.items():
            if condition == "service_started":
                continue
            container = self._sidecars.get(other)
            if container is None:  # main: started by now, it has no health of its own
                continue
            deadline = time.monotonic() + WAIT_DEADLINE
            while (why := await self._unmet(other, container, condition)) is not None:
                if why:
                    raise SandboxError(f"compose {self.runtime.project.file}: service {other!r} {why}")
                if time.monotonic() > deadline:
                    raise SandboxError(
                        f"compose {self.runtime.project.file}: service {other!r} did not reach "
                        f"{condition} within {WAIT_DEADLINE:g} s"
                    )
                await asyncio.sleep(0.1)

    async def _unmet(self, name: str, container: Any, condition: str) -> str | None:
        """None when `condition` holds, "" while it may yet, else why it never will."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        try:
            state = (await container.show()).get("State") or {}
        except DockerError:
            return "ended and was removed"
        if condition == "service_completed_successfully":
            if state.get("Running") or not state.get("FinishedAt", "").strip("0:-TZ."):
                return ""
            code = state.get("ExitCode")
            return None if code == 0 else f"exited with code {code}: {await self._logs(container)}"
        health = (state.get("Health") or {}).get("Status")
        if health is None:
            return "has no healthcheck, so service_healthy cannot be met; give it one"
        if health == "healthy":
            return None
        if health == "unhealthy" or not state.get("Running"):
            probes = (state.get("Health") or {}).get("Log") or [{}]
            return f"is {health}: its last check said {str(probes[-1].get('Output', '')).strip()[:300]!r}"
        return ""

    async def _logs(self, container: Any) -> str:
        with contextlib.suppress(Exception):
            lines = await container.log(stdout=True, stderr=True, tail=10)
            return " ".join("".join(lines).split())[:300]
        return "(no log)"

    async def _after_container(self) -> None:
        """The sidecars and the holder, after `main` (whose network the holder owns)."""
        for container in [*self._sidecars.values(), self._holder]:
            if container is not None:
                with contextlib.suppress(Exception):  # gone already (AutoRemove) or the daemon ended it
                    await container.delete(force=True, v=True)
        if self._holder_attach is not None:
            with contextlib.suppress(Exception):
                await self._holder_attach.close()

    def describe(self) -> str:
        project = self.runtime.project
        sidecars = ", ".join(project.sidecars) or "none"
        return (
            f"docker compose project {project.file}: main ({self.image or self.runtime.image_name or self.runtime.context}) with "
            f"sidecars {sidecars}, sharing one loopback network (names resolve to 127.0.0.1), no way out"
        )


class ComposeRuntime(DockerRuntime):
    """Makes compose sandboxes from a compose file (see the module docstring).

    Args:
        spec: The spec it came from.
        run_id: The run its sandboxes are labelled with.
        file: The compose file.
        main_image: The main image (`?main=IMAGE`); None: `main`'s own image or build, else the
            Dockerfile beside the file (Harbor's CONTEXT_DIR).
        build_network: Whether builds may use the daemon's default network.

    Raises:
        ConfigError: The file is not one rubric can run (named, with the key at fault).
    """

    def __init__(
        self, spec: str, run_id: str, file: Path, *, main_image: str | None = None, build_network: bool = True
    ) -> None:
        self.project = load_compose(file)
        main = self.project.services[MAIN]
        context = main.build or self.project.file.parent
        named = main.image if main.image not in (None, _MAIN_IMAGE) else main_image
        if named is None and not (context / (main.dockerfile or "Dockerfile")).is_file():
            raise ConfigError(
                f"compose file {self.project.file}: service main names no image and {context} has no "
                "Dockerfile; give main an image or build, or put the main image's Dockerfile beside the file"
            )
        super().__init__(
            spec, run_id, image=named, context=None if named else context, build_network=build_network
        )
        self.dockerfile = main.dockerfile
        self._sidecar_images: dict[str, str | None] | None = None

    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        return ComposeSandbox(config, state, self)

    @property
    def own_network(self) -> bool:
        return False  # the project's one private loopback, with no way out

    async def check(self, config: SandboxConfig | None = None) -> None:
        """As `DockerRuntime.check`; a `network` other than "none" is refused (the project's
        services share one private network)."""
        if config is not None and config.network != "none":
            raise RuntimeUnavailableError(
                f"compose {self.project.file}: network {config.network!r} is not supported; a compose "
                "project's services share one private network with no way out"
            )
        await super().check(config)

    async def sidecar_images(self) -> dict[str, str | None]:
        """Each sidecar's image (None: the main image), built once per runtime."""
        async with self._lock:
            if self._sidecar_images is None:
                found: dict[str, str | None] = {}
                for name in self.project.sidecars:
                    service = self.project.services[name]
                    if service.build is not None:
                        found[name] = await build_context(
                            service.build, network=self.build_network, dockerfile=service.dockerfile
                        )
                    else:
                        found[name] = None if service.image == _MAIN_IMAGE else service.image
                self._sidecar_images = found
        return self._sidecar_images

    def describe(self) -> str:
        return f"docker compose ({self.project.file})"


__all__ = ["ComposeProject", "ComposeRuntime", "ComposeSandbox", "Service", "load_compose"]
