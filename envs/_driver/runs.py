"""Running an environment as `rubric eval` does, and continuing a run from its directory.

`RunRequest` holds what the command line can be asked (an environment spec, a model name,
an agent, settings); `prepare_run` checks it before anything starts and `run` / `arun` carry it
out (`harness._endpoint.connect.open_client`, then `harness.aevaluate`, with an
`envs.agents.AgentRun` as its `episodes` when an agent plays), so a Python user gets exactly
what the CLI does. The agent is a run setting, not an environment argument: its settings
(name, files, `runtime`) are recorded in metadata.json's `episodes` section.

`resume(DIR)` continues a run with nothing else: the run directory records the environment
(its spec and arguments), the model, the endpoint and every setting (Inspect's `eval-retry
LOG` is the model). A results folder is data, so what it names is run only when it is safe to: an installed
environment by name, or a file or folder whose source still hashes as recorded (the same
code made the run); anything else is refused with the command to type. Its recorded
environment arguments (which may start processes: `mcp_servers`), its agent (a command, and
a host folder to upload) and an endpoint other than the user's own are used only when the user
confirms or passes them, the rule `rubric score` follows too. The key never comes from the folder: it stays in its environment variable.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness
from envs._environment import Environment
from envs._provenance import changes, of_directory, of_file
from envs._registry import load_environment, recorded_environment
from envs.agents import NO_MODEL, AgentRun
from harness._core.aio import run_sync
from harness._core.defaults import DEFAULT_BASE_URL, DEFAULT_CONCURRENCY, TRANSPORTS
from harness._core.errors import ConfigError, RubricError
from harness._core.run.dirs import default_run_dir, drop_errored, new_run_dir, resumable_run_dir
from harness._core.run.limits import check_limits, check_planned
from harness._core.run.options import Shard
from harness._core.run.storage import read_metadata, section
from harness._endpoint.client import check_sampling
from harness._endpoint.connect import DEFAULT_KEY_VAR, open_client, supports_token_ids
from harness.scripted._endpoint import SCRIPTED_PREFIX

if TYPE_CHECKING:  # pragma: no cover
    from harness import EvalResults

#: Asks the user a yes/no question: True/False, or None when nobody can answer (not a terminal).
Confirm = Callable[[str], bool | None]

#: Settings a resumed run takes from the folder's `arguments` when they are not given again
#: (`workers` as processes: a Ray address is never taken from a folder, pass --ray again).
#: The model name a run with `--agent oracle` and no `-m` records (the oracle calls no model).
ORACLE_MODEL = "oracle"
#: ... and a run of a `command:` agent with no `-m` (`envs.agents.NO_MODEL`).
#: Its endpoint: the discard port of loopback (nothing answers; nothing asks).
ORACLE_URL = "http://127.0.0.1:9/v1"
RECORDED_SETTINGS = (
    "num_examples",
    "seed",
    "shard",
    "rollouts_per_example",
    "split",
    "sampling",
    "concurrency",
    "workers",
)

#: Client settings a resumed run takes from the folder's `model` section when not given again.
RECORDED_CLIENT_OPTIONS = ("max_retries", "timeout", "transport", "return_token_ids")


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
        client_options: the endpoint client's recorded settings among `RECORDED_CLIENT_OPTIONS`.
        agent: the agent that played, as `--agent`, `--agent-files` and `--runtime` give it
            ({"agent": ..., "agent_files": ..., "runtime": ...}); None for the chat loop.
    """

    spec: str
    env_kwargs: dict[str, Any]
    model: str
    base_url: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    max_turns: int | None = None
    client_options: dict[str, Any] = field(default_factory=dict)
    agent: dict[str, Any] | None = None
    max_calls: int | None = None


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
    placeholder = name.startswith(SCRIPTED_PREFIX) or name in (ORACLE_MODEL, NO_MODEL)  # made again
    base_url = model.get("base_url") if not placeholder else None
    arguments = section(metadata, "arguments")
    kwargs = env.get("load_kwargs")
    return RecordedRun(
        spec=_resumable_spec(env, metadata, folder, command) if resolve_spec else "",
        env_kwargs=dict(kwargs) if isinstance(kwargs, dict) else {},
        model=name,
        base_url=str(base_url) if base_url else None,
        settings={k: arguments[k] for k in RECORDED_SETTINGS if arguments.get(k) is not None},
        max_turns=env["max_turns"] if isinstance(env.get("max_turns"), int) else None,
        client_options=_client_options(model, folder),
        agent=_recorded_agent(section(metadata, "episodes")),
        max_calls=_recorded_max_calls(section(metadata, "episodes")),
    )


def _recorded_agent(episodes: Mapping[str, Any]) -> dict[str, Any] | None:
    """The agent settings a run's `episodes` section records, as the flags that give them
    (without "agent" for an agent that was given as an object, not by name)."""
    if not episodes:
        return None
    found = {
        "agent": episodes.get("agent"),
        "agent_files": episodes.get("files"),
        "runtime": episodes.get("runtime"),
    }
    return {k: v for k, v in found.items() if isinstance(v, str)}


def _recorded_max_calls(episodes: Mapping[str, Any]) -> int | None:
    """The model-call cap an agent run was given (`--max-turns` with `--agent`), if any."""
    value = episodes.get("max_calls") if episodes else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _client_options(model: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """The recorded client settings (their ranges are checked with the rest, by `prepare_run`)."""
    options = {k: model[k] for k in RECORDED_CLIENT_OPTIONS if model.get(k) is not None}
    if "transport" in options and options["transport"] not in TRANSPORTS:
        raise ConfigError(
            f"{folder}/metadata.json records the transport {options['transport']!r}, not one of "
            f"{', '.join(TRANSPORTS)}; pass --transport"
        )
    return options


def _resumable_spec(env: Mapping[str, Any], metadata: Mapping[str, Any], folder: Path, command: str) -> str:
    provenance = metadata.get("provenance")
    spec = env.get("load_spec") or env.get("name")
    if isinstance(spec, str) and isinstance(provenance, dict) and provenance.get("hash"):
        path = Path(spec)
        now = of_directory(path) if path.is_dir() else of_file(path) if path.is_file() else None
        if now is not None and now.get("hash") == provenance["hash"]:
            return spec
    try:
        return recorded_environment(env, f"{folder}/metadata.json", command=command)
    except LookupError as exc:
        rest = shlex.join(["--resume", str(folder), *_recorded_flags(metadata)])
        raise ConfigError(f"{exc} {rest}") from exc


def _recorded_flags(metadata: Mapping[str, Any]) -> list[str]:
    """The flags a folder's run is resumed with that the folder does not give by itself: the
    environment's arguments, the agent's settings and an endpoint other than the user's own
    (the whole command, so one line is enough to continue)."""
    env, model = section(metadata, "env"), section(metadata, "model")
    kwargs = env.get("load_kwargs")
    flags = ["-a", _typed(kwargs)] if isinstance(kwargs, dict) and kwargs else []
    for flag, value in (_recorded_agent(section(metadata, "episodes")) or {}).items():
        flags += [f"--{flag.replace('_', '-')}", value]
    url, name = model.get("base_url"), str(model.get("model"))
    placeholder = name.startswith(SCRIPTED_PREFIX) or name in (ORACLE_MODEL, NO_MODEL)
    if isinstance(url, str) and not placeholder and url.rstrip("/") != _own_endpoint():
        flags += ["-b", url]
    return flags


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
    timeout, retries, transport): those are kept as the run had them unless given again, and
    what is given is recorded. So `options` and `client_options` hold only what was given.

    Attributes:
        spec: The environment: a name, a path or `module:function`.
        env_args: Keyword arguments for `load_environment`.
        mcp: MCP servers whose tools to add (`[PREFIX=]CMD|URL`, as `--mcp`).
        agent: An agent to play each episode in a sandbox (`--agent`).
        agent_files: A folder uploaded to /agent in each sandbox (`--agent-files`).
        runtime: The sandboxes' runtime (`--runtime`: bwrap, docker:IMAGE, ...; default: each
            task's own, else bwrap).
        model: The model name at the endpoint, or `scripted:POLICY` for the offline endpoint.
        base_url: The OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or OpenAI).
        api_key_var: The environment variable holding the key (never the key itself).
        sampling: Extra sampling arguments (max_tokens, temperature, ...).
        max_turns: Overrides the environment's.
        max_calls: With an agent, the most model calls per episode (`--max-turns` with `--agent`).
        output_dir: The results directory (default runs/<env>--<model>--<time>).
        resume: A run directory to continue instead of starting a new run.
        retry_errors: With `resume`, run the rollouts that errored again.
        client_options: `harness.Client` keywords (max_retries, timeout, transport,
            return_token_ids: absent, an agent run probes the endpoint for token ids).
        options: `harness.evaluate` keywords (num_examples, rollouts_per_example, concurrency,
            progress, seed, split, shard, workers, executor, ray_address).
    """

    spec: str | None = None
    env_args: dict[str, Any] | None = None
    mcp: list[str] = field(default_factory=list)
    agent: str | None = None
    agent_files: str | None = None
    runtime: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_var: str = DEFAULT_KEY_VAR
    sampling: dict[str, Any] | None = None
    max_turns: int | None = None
    max_calls: int | None = None
    output_dir: str | Path | None = None
    resume: str | Path | None = None
    retry_errors: bool = False
    client_options: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)


def _complete(
    request: RunRequest, confirm: Confirm | None = None, command: str = "rubric eval --resume"
) -> RunRequest:
    """`request` with what a resumed run records filled in (never the key): every setting it
    was started with unless given again, and the recorded environment arguments and a foreign
    endpoint only when `confirm` agrees or the user passed them (see `_agreed_arguments`,
    `_agreed_endpoint`)."""
    named = request.spec is not None and request.model is not None
    if request.resume is None:
        if request.spec is not None and request.model is None and request.agent == "oracle":
            return replace(request, model=ORACLE_MODEL, base_url=request.base_url or ORACLE_URL)
        if (
            request.spec is not None
            and request.model is None
            and (request.agent or "").startswith("command:")
        ):
            options = {**request.client_options, "max_retries": 0}  # nothing answers: fail the call at once
            return replace(request, model=NO_MODEL, base_url=ORACLE_URL, client_options=options)
        if not named:
            needs_model = not (request.agent == "oracle" or (request.agent or "").startswith("command:"))
            asked = (("ENV", request.spec), ("-m/--model", request.model if needs_model else ""))
            missing = " and ".join(name for name, given in asked if given is None)
            raise ConfigError(f"the following arguments are required: {missing} (or --resume DIR)")
        return request
    try:
        run = recorded_run(request.resume, resolve_spec=request.spec is None)
    except ConfigError:
        if not named:
            raise
        return request  # a folder that records no run (empty, or from before metadata): start it
    folder = request.resume
    command = f"{command} {shlex.quote(str(folder))}"
    env_args = request.env_args
    if env_args is None and request.spec is None:
        env_args = _agreed_arguments(run.env_kwargs, folder, run.spec, confirm, command)
    if request.agent is None and run.agent is not None:
        if "agent" not in run.agent:
            raise ConfigError(
                f"{folder}/metadata.json records an agent given as an object, not by name; resume it in Python "
                "with the same envs.agents.AgentRun: harness.evaluate(..., episodes=run, resume=True)"
            )
        agreed = _agreed_agent(run.agent, folder, confirm, command)
        request = replace(
            request,
            agent=agreed["agent"],
            agent_files=agreed.get("agent_files"),
            runtime=agreed.get("runtime"),
        )
    base_url = request.base_url
    if base_url is None and request.model is None:
        base_url = _agreed_endpoint(run.base_url, folder, request.api_key_var, confirm)
    client_options = {**run.client_options, **request.client_options}
    if (request.model or run.model) in (ORACLE_MODEL, NO_MODEL) and base_url is None:
        base_url, client_options = ORACLE_URL, {**client_options, "max_retries": 0}  # no model, again
    settings = {k: v for k, v in run.settings.items() if k != "sampling"}
    return replace(
        request,
        spec=request.spec or run.spec,
        env_args=env_args,
        model=request.model or run.model,
        base_url=base_url,
        sampling=request.sampling if request.sampling is not None else run.settings.get("sampling"),
        max_turns=request.max_turns if request.max_turns is not None else run.max_turns,
        max_calls=request.max_calls if request.max_calls is not None else run.max_calls,
        client_options=client_options,
        options={**settings, **request.options},
    )


def _own_endpoint() -> str:
    """The endpoint the user's environment names ($OPENAI_BASE_URL, else OpenAI's)."""
    return (os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def _agreed_endpoint(
    recorded: str | None, folder: str | Path, key_var: str, confirm: Confirm | None
) -> str | None:
    """The recorded endpoint when it is the user's own (`$OPENAI_BASE_URL`, else OpenAI's) or
    `confirm` agrees to send the key there; a folder's endpoint never gets the key unasked."""
    own = _own_endpoint()
    if recorded is None or recorded.rstrip("/") == own:
        return recorded
    _ask(
        confirm,
        f"{folder}/metadata.json records the endpoint {recorded}, not yours ({own})",
        question=f"send it the key in ${key_var}?",
        unasked=f"a results folder's endpoint gets your key only if you name it: pass -b {shlex.quote(recorded)} "
        "to use it, or -b/--base-url with your own",
        declined="not using the recorded endpoint; pass -b/--base-url URL with the one you want",
    )
    return recorded


def _ask(confirm: Confirm | None, where: str, *, question: str, unasked: str, declined: str) -> None:
    """Return only when `confirm` agrees to use what a results folder records (`where`): with
    nobody to ask, the error says what to pass instead (`unasked`)."""
    answer = confirm(f"{where}; {question}") if confirm is not None else None
    if answer is None:
        raise ConfigError(f"{where}; {unasked}")
    if not answer:
        raise ConfigError(declined)


def _agreed_agent(
    recorded: Mapping[str, str], folder: str | Path, confirm: Confirm | None, command: str
) -> dict[str, str]:
    """The agent a results folder records, used only when `confirm` agrees (it runs a command,
    and uploads a host folder); refused otherwise with the flags to type."""
    flags = " ".join(f"--{k.replace('_', '-')} {shlex.quote(v)}" for k, v in recorded.items())
    _ask(
        confirm,
        f"{folder}/metadata.json records the agent {flags}",
        question="play the rest of the run with it?",
        unasked=f"a results folder's agent is used only if you pass it: {command} {flags}",
        declined="not using the recorded agent; pass --agent NAME (with --agent-files, --runtime) again",
    )
    return dict(recorded)


def _episodes(request: RunRequest) -> AgentRun | None:
    """The agent run `--agent`, `--agent-files` and `--runtime` ask for (None: the chat loop)."""
    if request.agent is None:
        if request.agent_files is not None or request.runtime is not None:
            raise ConfigError("--agent-files and --runtime go with --agent NAME (the agent they are for)")
        return None
    return AgentRun(
        request.agent, runtime=request.runtime, files=request.agent_files, max_calls=request.max_calls
    )


def _load(request: RunRequest) -> Environment:
    assert request.spec is not None
    env_args = dict(request.env_args or {})
    if request.mcp:  # recorded with the environment's arguments, so workers and resumes get them too
        env_args["mcp_servers"] = [*env_args.get("mcp_servers", []), *request.mcp]
    try:
        env = load_environment(request.spec, **env_args)
    except RubricError as exc:  # not found, unknown arguments, or the environment's code failed
        raise ConfigError(f"cannot load environment {request.spec!r}: {exc}") from exc
    if request.max_turns is not None:
        env.max_turns = request.max_turns
    return env


@dataclass
class PreparedRun:
    """A run checked and ready to start (`prepare_run`): nothing has been written yet.

    Attributes:
        env: The environment, loaded.
        request: The request, completed from the run directory when resuming.
        folder: The results directory.
        resuming: Whether it continues the run in `folder`.
        episodes: The agent that plays the episodes (None: the environment's chat loop).
    """

    env: Environment
    request: RunRequest
    folder: Path
    resuming: bool
    episodes: AgentRun | None = None

    def resume_flags(self) -> list[str]:
        """What `rubric eval --resume DIR` must be given again to continue this run.

        Returns:
            The flags for the environment's arguments and an endpoint other than the user's
            own (a folder's are used only when passed again).
        """
        flags = ["-a", _typed(self.env.load_kwargs)] if self.env.load_kwargs else []
        request = self.request
        for flag, value in (("--agent", request.agent), ("--agent-files", request.agent_files), ("--runtime", request.runtime)):  # fmt: skip
            flags += [flag, value] if value is not None else []
        url = self.request.base_url
        placeholder = self.request.model in (ORACLE_MODEL, NO_MODEL) and url == ORACLE_URL
        if url is not None and url.rstrip("/") != _own_endpoint() and not placeholder:
            flags += ["-b", url]
        return flags


def prepare_run(request: RunRequest, *, confirm: Confirm | None = None) -> PreparedRun:
    """Check and complete a request before anything starts, as `rubric eval` does.

    The settings are checked against their limits, the environment loaded, the run's size
    checked and the output directory chosen.

    Args:
        request: What to run.
        confirm: Asked a yes/no question before a resumed run uses what its folder records
            that the user did not pass (environment arguments, an endpoint other than
            theirs); without it, or when it returns None (nobody to ask), those are refused
            with the flag to pass.

    Returns:
        The run, ready for `run` / `arun`.

    Raises:
        ConfigError: A setting is out of range or the request contradicts itself.
        EnvironmentNotFoundError: The environment cannot be found.
    """
    check_limits({**request.options, "max_turns": request.max_turns, **request.client_options})
    if request.resume is not None and request.output_dir is not None:
        raise ConfigError(
            f"--resume {request.resume} continues that run in place, so -o/--output-dir {request.output_dir} "
            "cannot be used with it; drop one of them"
        )
    request = _complete(request, confirm)
    check_limits({**request.options, **request.client_options})  # what the folder records, too
    shard = request.options.get("shard")
    if isinstance(shard, str):
        try:
            request = replace(request, options={**request.options, "shard": Shard.parse(shard)})
        except ConfigError as exc:
            raise ConfigError(f"--shard {shard}: {exc}") from None
    check_sampling(request.sampling or {}, "-S/--sampling")
    episodes = _episodes(request)
    env = _load(request)
    options = request.options
    examples = len(env.get_dataset(options.get("split", "eval")))
    if options.get("num_examples") is not None:
        examples = min(examples, options["num_examples"])
    check_planned(examples, options.get("rollouts_per_example", 1), "-n/-r")
    if request.resume is not None:
        return PreparedRun(env, request, resumable_run_dir(request.resume), True, episodes)
    if request.retry_errors:
        raise ConfigError(
            "--retry-errors re-runs the errored rollouts of an earlier run: use it with --resume DIR"
        )
    assert request.model is not None
    folder = request.output_dir or default_run_dir(env.name or str(request.spec), request.model)
    return PreparedRun(env, request, new_run_dir(folder), False, episodes)


async def arun(
    what: RunRequest | PreparedRun, warn: Callable[[str], None] | None = None
) -> tuple[EvalResults, Path]:
    """Run what a request asks for, as `rubric eval` does.

    Args:
        what: A request (prepared first), or a prepared run.
        warn: Hears about an environment that changed since a resumed run was made
            (default: a `UserWarning`).

    Returns:
        The results and their directory.
    """
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
            check=request.model not in (ORACLE_MODEL, NO_MODEL) or request.base_url != ORACLE_URL,
            scripted_process=True,
            max_concurrency=request.options.get("concurrency", DEFAULT_CONCURRENCY),
            **request.client_options,
        )
        try:
            if request.agent is not None and "return_token_ids" not in request.client_options:
                # An agent run records token ids when the endpoint has them (probed once).
                client.return_token_ids = await supports_token_ids(client)
            results = await harness.aevaluate(
                env,
                client,
                output_dir=folder,
                resume=prepared.resuming,
                sampling=request.sampling or None,
                episodes=prepared.episodes,
                **request.options,
            )
        finally:
            await client.aclose()
    return results, folder


def run(
    what: RunRequest | PreparedRun, warn: Callable[[str], None] | None = None
) -> tuple[EvalResults, Path]:
    """`arun`, synchronously (works inside a running event loop too).

    Args:
        what: A request (prepared first), or a prepared run.
        warn: Hears about an environment that changed since a resumed run was made.

    Returns:
        The results and their directory.
    """
    return run_sync(arun(what, warn))


def resume(
    folder: str | Path,
    *,
    env_args: dict[str, Any] | None = None,
    base_url: str | None = None,
    retry_errors: bool = False,
    agent: str | None = None,
    agent_files: str | None = None,
    runtime: str | None = None,
    **options: Any,
) -> EvalResults:
    """Continue an interrupted run, as `rubric eval --resume DIR` does.

    The environment, the model and every setting come from the folder's metadata.json (the
    key from its variable). The environment arguments and the agent it records, and an
    endpoint other than yours, are used only when passed again: a folder may come from
    someone else.

    Args:
        folder: The run directory.
        env_args: The environment's arguments (the recorded ones are not used unasked).
        base_url: The endpoint, when it is not your own default.
        retry_errors: Run the rollouts that errored again.
        agent: The agent that played the run (`--agent`; the recorded one is not used unasked).
        agent_files: Its files folder, as the run had it (`--agent-files`).
        runtime: Its sandboxes' runtime, as the run had it (`--runtime`).
        **options: What may change between sessions (concurrency, workers, progress).

    Returns:
        The whole run's results.
    """
    request = RunRequest(
        resume=folder, env_args=env_args, base_url=base_url, retry_errors=retry_errors, options=options,
        agent=agent, agent_files=agent_files, runtime=runtime,
    )  # fmt: skip
    return run(request)[0]


def _warn(message: str) -> None:
    warnings.warn(message, UserWarning, stacklevel=3)


def rescoring_environment(
    metadata: Any,
    directory: str | Path,
    spec: str | None = None,
    env_args: dict[str, Any] | None = None,
    *,
    tell: Callable[[str], None] | None = None,
    confirm: Confirm | None = None,
) -> tuple[str, dict[str, Any]]:
    """The environment and arguments to re-score a saved run with, as `rubric score DIR [ENV]`.

    Args:
        metadata: The run's metadata (`EvalResults.metadata`).
        directory: The run directory (named in messages).
        spec: The environment; without it, the installed environment the metadata names
            (paths and `module:function` are refused, as a folder is data).
        env_args: Its arguments; without them, the recorded ones, used only when `confirm`
            says yes.
        tell: Hears which installed environment was chosen.
        confirm: Asked before recorded arguments are used; None from it (nobody to ask)
            refuses with the `-a` to type.

    Returns:
        The environment spec and its arguments, for `load_environment`.

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
    command = f"rubric score {shlex.quote(str(directory))}"
    return spec, _agreed_arguments(env_meta.get("load_kwargs"), directory, spec, confirm, command)


def _agreed_arguments(
    recorded: Any, directory: str | Path, spec: str, confirm: Confirm | None, command: str
) -> dict[str, Any]:
    """The environment arguments a results folder records, used only when `confirm` agrees;
    refused otherwise with the `command` and `-a` to type (they may start processes, as
    `mcp_servers` does, so a folder never passes them unasked)."""
    if not recorded:
        return {}
    if not isinstance(recorded, dict):
        raise ConfigError(
            f"{directory}/metadata.json records load_kwargs that are not an object; pass -a '{{...}}'"
        )
    typed = _typed(recorded)
    _ask(
        confirm,
        f"{directory}/metadata.json records these arguments for {spec!r}: {typed}",
        question="use them?",
        unasked=f"a results folder's arguments are used only if you pass them: {command} -a {shlex.quote(typed)}",
        declined="not using the recorded arguments; pass -a '{...}' with the ones you want",
    )
    return dict(recorded)


def _typed(env_args: Mapping[str, Any]) -> str:
    """Environment arguments as they are typed after -a."""
    return json.dumps(env_args, ensure_ascii=False)


__all__ = [
    "RECORDED_CLIENT_OPTIONS",
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
