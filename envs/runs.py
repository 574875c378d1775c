"""Running an environment as `rubric eval` does, and continuing a run from its directory.

`RunRequest` holds what the command line can be asked (an environment spec, a model name,
settings); `prepare_run` checks it before anything starts and `run` / `arun` carry it out
(`harness.endpoint.connect.open_client`, then `harness.aevaluate`), so a Python user gets exactly what
the CLI does.

`resume(DIR)` continues a run with nothing else: the run directory records the environment
(its spec and arguments), the model, the endpoint and every setting (Inspect's `eval-retry
LOG` is the model). A results folder is data, so what it names is run only when it is safe to: an installed
environment by name, or a file or folder whose source still hashes as recorded (the same
code made the run); anything else is refused with the command to type. The key never comes
from the folder: it stays in its environment variable.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envs.environment import Environment
from envs.provenance import changes, of_directory, of_file
from envs.registry import load_environment, recorded_environment
from harness.aio import run_sync
from harness.defaults import DEFAULT_CONCURRENCY
from harness.endpoint.client import check_sampling
from harness.endpoint.connect import DEFAULT_KEY_VAR, open_client
from harness.errors import ConfigError, RubricError
from harness.evaluation import aevaluate
from harness.limits import check_limits, check_planned
from harness.results.eval_results import EvalResults
from harness.results.run_dirs import default_run_dir, drop_errored, new_run_dir, resumable_run_dir
from harness.results.sharding import Shard
from harness.results.storage import read_metadata, section
from harness.scripted.endpoint import SCRIPTED_PREFIX

#: Settings a resumed run takes from the folder when they are not given again.
RECORDED_SETTINGS = ("num_examples", "seed", "shard", "rollouts_per_example", "split", "sampling")


@dataclass
class RecordedRun:
    """What a run directory says about the run that made it.

    Attributes:
        spec: the environment to load (an installed name, or a file/folder unchanged since).
        env_kwargs: the environment's arguments, as recorded.
        model: the model name (or "scripted:POLICY").
        base_url: the endpoint (None for a scripted model or when none was recorded).
        settings: the run's recorded settings among `RECORDED_SETTINGS`.
        max_turns: the environment's max_turns during the run.
    """

    spec: str
    env_kwargs: dict[str, Any]
    model: str
    base_url: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    max_turns: int | None = None


def recorded_run(
    folder: str | Path, command: str = "rubric eval", *, resolve_spec: bool = True
) -> RecordedRun:
    """The run `folder` records (with `resolve_spec=False`, `spec` is left empty: the caller
    names the environment itself, so the recorded one is not checked).

    Raises:
        ConfigError: the metadata does not record the environment and model, or names an
            environment that is not safe to run again (the message gives the command to type).
        ResultsError: the metadata cannot be read.
    """
    folder = Path(folder)
    metadata = read_metadata(folder) or {}
    env, model = section(metadata, "env"), section(metadata, "model")
    if not env or not model:
        raise ConfigError(
            f"--resume {folder}: its metadata.json does not record the run; name ENV and -m/--model"
        )
    name = str(model.get("model"))
    base_url = model.get("base_url") if not name.startswith(SCRIPTED_PREFIX) else None
    arguments = section(metadata, "arguments")
    kwargs = env.get("load_kwargs")
    return RecordedRun(
        spec=_resumable_spec(env, metadata.get("provenance"), folder, command) if resolve_spec else "",
        env_kwargs=dict(kwargs) if isinstance(kwargs, dict) else {},
        model=name,
        base_url=str(base_url) if base_url else None,
        settings={k: arguments[k] for k in RECORDED_SETTINGS if arguments.get(k) is not None},
        max_turns=env["max_turns"] if isinstance(env.get("max_turns"), int) else None,
    )


def _resumable_spec(env: Mapping[str, Any], provenance: Any, folder: Path, command: str) -> str:
    spec = env.get("load_spec") or env.get("name")
    if isinstance(spec, str) and isinstance(provenance, dict) and provenance.get("hash"):
        path = Path(spec)
        now = of_directory(path) if path.is_dir() else of_file(path) if path.is_file() else None
        if now is not None and now.get("hash") == provenance["hash"]:
            return spec
    try:
        return recorded_environment(env, f"{folder}/metadata.json", command=command)
    except LookupError as exc:
        raise ConfigError(f"{exc} --resume {shlex.quote(str(folder))}") from exc


def environment_change(folder: str | Path, env: Environment) -> str | None:
    """What changed in the environment since the run in `folder` was made (name,
    distribution/version, source hash), in one line; None when nothing did or it is unknown."""
    try:
        saved = read_metadata(Path(folder)) or {}
    except (OSError, ValueError):
        return None  # the resume itself reports an unreadable folder
    names = (section(saved, "env").get("name"), env.name)
    return changes(saved.get("provenance"), env.provenance, names=names)


@dataclass
class RunRequest:
    """Everything `rubric eval` can be asked, as Python values; None means "not given".

    A new run needs `spec` and `model`. With `resume` (a run directory), what is not given
    comes from its metadata.json (`recorded_run`), and a setting given again must match the
    run's, except those that may change between sessions (concurrency, workers, progress,
    timeout, retries, transport).

    Attributes:
        spec / env_args / mcp: the environment, its arguments, MCP servers to add.
        agent / agent_files / agent_runtime: an agent to play the episodes in sandboxes
            (`--agent`, `--agent-files`, `--runtime`).
        model / base_url / api_key_var: the endpoint (`harness.endpoint.connect.open_client`).
        sampling: extra sampling arguments (checked by `harness.endpoint.client.check_sampling`).
        max_turns: overrides the environment's.
        output_dir / resume / retry_errors: where the run goes, or which run to continue
            (and whether to run its errored rollouts again).
        client_options: `harness.Client` keywords (max_retries, timeout, transport).
        options: `harness.evaluate` keywords (num_examples, rollouts_per_example, concurrency,
            progress, seed, split, shard, workers, executor, ray_address).
    """

    spec: str | None = None
    env_args: dict[str, Any] | None = None
    mcp: list[str] = field(default_factory=list)
    agent: str | None = None
    agent_files: str | None = None
    agent_runtime: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_var: str = DEFAULT_KEY_VAR
    sampling: dict[str, Any] | None = None
    max_turns: int | None = None
    output_dir: str | Path | None = None
    resume: str | Path | None = None
    retry_errors: bool = False
    client_options: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


#: `RunRequest.options` defaults, which a resumed run replaces with the recorded values.
_OPTION_DEFAULTS: dict[str, Any] = {
    "num_examples": None,
    "seed": None,
    "shard": None,
    "rollouts_per_example": 1,
    "split": "eval",
}


def _complete(request: RunRequest) -> RunRequest:
    """`request` with what a resumed run records filled in (never the key)."""
    if request.resume is None or (request.spec is not None and request.model is not None):
        if request.spec is None or request.model is None:
            raise ConfigError("the following arguments are required: ENV and -m/--model (or --resume DIR)")
        return request
    run = recorded_run(request.resume, resolve_spec=request.spec is None)
    options = dict(request.options)
    for name, default in _OPTION_DEFAULTS.items():
        if options.get(name, default) == default and name in run.settings:
            options[name] = run.settings[name]
    return replace(
        request,
        spec=request.spec or run.spec,
        env_args=request.env_args if request.env_args is not None or request.spec else run.env_kwargs,
        model=request.model or run.model,
        base_url=request.base_url or (run.base_url if request.model is None else None),
        sampling=request.sampling if request.sampling is not None else run.settings.get("sampling"),
        max_turns=request.max_turns if request.max_turns is not None else run.max_turns,
        options=options,
    )


def _load(request: RunRequest) -> Environment:
    assert request.spec is not None
    env_args = dict(request.env_args or {})
    if request.mcp:  # recorded with the environment's arguments, so workers and resumes get them too
        env_args["mcp_servers"] = [*env_args.get("mcp_servers", []), *request.mcp]
    agent = {
        "agent": request.agent,
        "agent_files": request.agent_files,
        "agent_runtime": request.agent_runtime,
    }
    env_args.update({k: v for k, v in agent.items() if v is not None})  # recorded the same way
    try:
        env = load_environment(request.spec, **env_args)
    except RubricError as exc:  # not found, unknown arguments, or the environment's code failed
        raise ConfigError(f"cannot load environment {request.spec!r}: {exc}") from exc
    if request.max_turns is not None:
        env.max_turns = request.max_turns
    return env


@dataclass
class PreparedRun:
    """A run checked and ready to start (`prepare_run`): nothing has been written yet."""

    env: Environment
    request: RunRequest
    folder: Path
    resuming: bool


def prepare_run(request: RunRequest) -> PreparedRun:
    """Check and complete a request before anything starts: the settings within limits, the
    environment loaded, the run's size checked, the output directory chosen."""
    check_limits({**request.options, "max_turns": request.max_turns, **request.client_options})
    if request.resume is not None and request.output_dir is not None:
        raise ConfigError(
            f"--resume {request.resume} continues that run in place, so -o/--output-dir {request.output_dir} "
            "cannot be used with it; drop one of them"
        )
    request = _complete(request)
    shard = request.options.get("shard")
    if isinstance(shard, str):
        try:
            request = replace(request, options={**request.options, "shard": Shard.parse(shard)})
        except ConfigError as exc:
            raise ConfigError(f"--shard {shard}: {exc}") from None
    check_sampling(request.sampling or {}, "-S/--sampling")
    env = _load(request)
    options = request.options
    examples = len(env.get_dataset(options.get("split", "eval")))
    if options.get("num_examples") is not None:
        examples = min(examples, options["num_examples"])
    check_planned(examples, options.get("rollouts_per_example", 1), "-n/-r")
    if request.resume is not None:
        return PreparedRun(env, request, resumable_run_dir(request.resume), True)
    if request.retry_errors:
        raise ConfigError(
            "--retry-errors re-runs the errored rollouts of an earlier run: use it with --resume DIR"
        )
    assert request.model is not None
    folder = request.output_dir or default_run_dir(env.name or str(request.spec), request.model)
    return PreparedRun(env, request, new_run_dir(folder), False)


async def arun(
    what: RunRequest | PreparedRun, warn: Callable[[str], None] | None = None
) -> tuple[EvalResults, Path]:
    """Run what a request asks for, as `rubric eval` does; returns the results and their directory.

    `warn` hears about an environment that changed since a resumed run was made (default:
    a `UserWarning`)."""
    prepared = what if isinstance(what, PreparedRun) else prepare_run(what)
    env, request, folder = prepared.env, prepared.request, prepared.folder
    if prepared.resuming:
        change = environment_change(folder, env)
        if change:
            (warn or _warn)(change)
        if request.retry_errors:
            drop_errored(folder)
    assert request.model is not None
    with contextlib.ExitStack() as stack:
        client = open_client(
            stack,
            request.model,
            env=env,
            base_url=request.base_url,
            api_key_var=request.api_key_var,
            check=True,
            scripted_process=True,
            max_concurrency=request.options.get("concurrency", DEFAULT_CONCURRENCY),
            **request.client_options,
        )
        try:
            results = await aevaluate(
                env,
                client,
                output_dir=folder,
                resume=prepared.resuming,
                sampling=request.sampling or None,
                **request.options,
            )
        finally:
            await client.aclose()
    return results, folder


def run(
    what: RunRequest | PreparedRun, warn: Callable[[str], None] | None = None
) -> tuple[EvalResults, Path]:
    """`arun`, synchronously (works inside a running event loop too)."""
    return run_sync(arun(what, warn))


def resume(folder: str | Path, *, retry_errors: bool = False, **options: Any) -> EvalResults:
    """Continue the run in `folder` with nothing else: the environment, its arguments, the model,
    the endpoint and every setting come from its metadata.json (the key from its variable).
    `options` may change what may change between sessions (concurrency, workers, progress)."""
    return run(RunRequest(resume=folder, retry_errors=retry_errors, options=options))[0]


def _warn(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=3)


def rescoring_environment(
    metadata: Any,
    directory: str | Path,
    spec: str | None = None,
    env_args: dict[str, Any] | None = None,
    *,
    tell: Callable[[str], None] | None = None,
    confirm: Callable[[str], bool | None] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The environment and arguments to re-score a saved run with (`rubric score DIR [ENV]`).

    Without `spec`, the installed environment the run's metadata names (`tell` hears which);
    paths and `module:function` are refused, as a folder is data. Without `env_args`, the
    recorded arguments are used only when `confirm(question)` says yes; a `confirm` that
    returns None (nobody to ask) refuses with the `-a` to type.

    Raises:
        ConfigError: nothing safe to use, or the recorded arguments were declined.
    """
    env_meta = metadata.get("env", {}) if isinstance(metadata, dict) else {}
    env_meta = env_meta if isinstance(env_meta, dict) else {}
    if spec is None:
        try:
            spec = recorded_environment(
                env_meta, f"{directory}/metadata.json", command=f"rubric score {shlex.quote(str(directory))}"
            )
        except LookupError as exc:
            raise ConfigError(str(exc)) from exc
        if tell is not None:
            tell(f"using the installed environment {spec!r} named in {directory}/metadata.json")
    if env_args is not None:
        return spec, env_args
    return spec, _agreed_arguments(env_meta.get("load_kwargs"), directory, spec, confirm)


def _agreed_arguments(
    recorded: Any, directory: str | Path, spec: str, confirm: Callable[[str], bool | None] | None
) -> dict[str, Any]:
    if not recorded:
        return {}
    if not isinstance(recorded, dict):
        raise ConfigError(
            f"{directory}/metadata.json records load_kwargs that are not an object; pass -a '{{...}}'"
        )
    typed = json.dumps(recorded, ensure_ascii=False)
    where = f"{directory}/metadata.json records these arguments for {spec!r}: {typed}"
    answer = confirm(where) if confirm is not None else None
    if answer is None:
        raise ConfigError(
            f"{where}; a results folder's arguments are used only if you pass them: -a {shlex.quote(typed)} "
            f"(or -a '{{}}' for none)"
        )
    if not answer:
        raise ConfigError("not using the recorded arguments; pass -a '{...}' with the ones you want")
    return dict(recorded)


__all__ = [
    "RECORDED_SETTINGS",
    "PreparedRun",
    "RecordedRun",
    "RunRequest",
    "arun",
    "environment_change",
    "prepare_run",
    "recorded_run",
    "rescoring_environment",
    "resume",
    "run",
]
