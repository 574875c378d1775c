"""The `rubric` command line: declarations only, each command calls one library function.

Every failure a user can cause (unknown environment, bad JSON, unreachable endpoint, missing
key variable, existing output directory) is one clear line naming the fix and a non-zero exit
(2 for a usage error), with the traceback only under `--debug`. This file is part of the
house and imports private modules where it needs plumbing no Python user calls (the run
driver `envs._driver.runs`, what the hub commands print in `envs.hub._display`, the terminal view);
the front doors keep what a user calls. The few lines only this command line prints about
runs are at the end of this file. Commands import the packages when they run, so
`rubric --help` starts fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from harness import RubricError, Stopped
from harness._core.defaults import DEFAULT_CONCURRENCY, DEFAULT_TRANSPORT, TRANSPORTS
from harness._core.text import escape_control

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from envs import Environment
    from envs.hub import BumpPart, KindOption
    from harness import EvalResults, MergeReport

EXIT_USAGE = 2
HUB_HELP = "index URL (default: $RUBRIC_HUB_URL), e.g. http://127.0.0.1:8080"


class CliError(RubricError):
    """A user-facing error: printed as one line, no traceback, exit code 2."""


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """A library's error inside is the user's to fix: one line (several joined by "; "), exit 2."""
    try:
        yield
    except CliError:
        raise
    except (RubricError, ValueError, FileExistsError, NotADirectoryError) as exc:
        raise CliError(
            "; ".join(line.strip().rstrip(":") for line in str(exc).splitlines() if line.strip())
        ) from exc


def say(lines: str | Sequence[str], err: bool = False) -> None:
    """Print text holding strings from a package, an index or a run folder, escaped."""
    for line in [lines] if isinstance(lines, str) else lines:
        print(escape_control(line), file=sys.stderr if err else sys.stdout)


def json_object(ctx: click.Context, param: click.Parameter, text: str | None) -> dict[str, Any] | None:
    flag = "/".join(param.opts)
    try:
        value = None if text is None else json.loads(text)
    except json.JSONDecodeError as exc:
        example = "'{\"key\": 1}'"
        raise CliError(
            f"{flag} is not valid JSON ({exc.msg} at column {exc.colno}): {text!r}; pass an object such as {example}"
        ) from None
    if value is not None and not isinstance(value, dict):
        raise CliError(f"{flag} must be a JSON object like '{{\"key\": 1}}', got {type(value).__name__}")
    return value


def limited(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The value, checked against `check_limits` and named as typed (a count for --worst/--best)."""
    from harness._core.run.limits import check_limits

    if param.name in ("worst", "best") and value is not None and value < 1:
        raise CliError(f"{'/'.join(param.opts)} must be a count of at least 1, got {value}")
    with usage_errors():
        check_limits({str(param.name): value}, {str(param.name): "/".join(param.opts)})
    return value


def load(spec: str, env_args: dict[str, Any] | None) -> Environment:
    from envs import load_environment

    try:
        return load_environment(spec, **(env_args or {}))
    except RubricError as exc:  # not found, unknown -a/--env-args, or the environment's code failed
        raise CliError(f"cannot load environment {spec!r}: {exc}") from exc


def with_registry(
    spec: str | None, env_args: dict[str, Any] | None, registry: str | None
) -> dict[str, Any] | None:
    """`--registry` as the Harbor loader's `registry` argument (a local file made absolute, so
    workers and resumed runs find it from any folder)."""
    if registry is None:
        return env_args
    if not (spec or "").startswith("harbor:"):
        raise CliError("--registry names the registry of a Harbor dataset: give it with harbor:NAME@VERSION")
    if "://" not in registry:
        registry = str(Path(registry).expanduser().resolve())
    return {**(env_args or {}), "registry": registry}


def load_run(path: str) -> EvalResults:
    from harness import load_results

    with usage_errors():
        return load_results(path)


def console() -> Console:
    from rich.console import Console

    return Console()


def _version() -> str:
    with contextlib.suppress(PackageNotFoundError):
        return version("rubric-rl")
    return "0+unknown"


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    invoke_without_command=True,
)
@click.version_option(_version(), "--version", message="rubric %(version)s")
@click.option("--debug", is_flag=True, help="show full tracebacks on errors (also after the command)")
@click.pass_context
def rubric(ctx: click.Context, debug: bool) -> None:
    """Write rewards and rubrics, bundle them into environments, and evaluate them against any
    OpenAI-compatible endpoint."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def command(group: click.Group = rubric, **settings: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """A command of `group` that also takes --debug after its name."""
    debug = click.option("--debug", is_flag=True, expose_value=False, hidden=True)
    return lambda fn: group.command(**settings)(debug(fn))


env_args = click.option(
    "-a", "--env-args", callback=json_object, help="JSON object passed to load_environment"
)
hub_option = click.option("--hub", "hub_url", help=HUB_HELP)


@command(name="eval", help="run an environment against a model and score every rollout")
@click.argument("env", metavar="[ENV]", required=False)
@env_args
@click.option("-m", "--model", help="model name at the endpoint, or scripted:POLICY for the built-in offline endpoint (with --resume DIR: the run's own by default)")  # fmt: skip
@click.option("-b", "--base-url", help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL or OpenAI)")
@click.option("-k", "--api-key-var", default="OPENAI_API_KEY", show_default=True, help="name of the env var holding the key")  # fmt: skip
@click.option("-c", "--concurrency", type=int, default=DEFAULT_CONCURRENCY, show_default=True, callback=limited, help="rollouts (and requests) in flight")  # fmt: skip
@click.option("--max-retries", type=int, default=5, show_default=True, callback=limited)
@click.option("--timeout", type=float, default=120.0, show_default=True, callback=limited, help="seconds per request, the whole of it")  # fmt: skip
@click.option("--transport", type=click.Choice(TRANSPORTS), default=DEFAULT_TRANSPORT, show_default=True, help="HTTP client for the endpoint: aiohttp (lean) or the openai SDK; same requests and results")  # fmt: skip
@click.option("-n", "--num-examples", type=int, callback=limited, help="examples to run (default: all)")
@click.option("-r", "--rollouts-per-example", type=int, default=1, show_default=True, callback=limited)
@click.option("--split", type=click.Choice(["eval", "train"]), default="eval", show_default=True)
@click.option("--seed", type=int, callback=limited, help="shuffle examples with this seed")
@click.option("--max-turns", type=int, callback=limited, help="override the environment's max_turns; with --agent, the most model calls per episode (default: the environment's own max_turns when it sets one, else 250; the episode's time limit bounds it too)")  # fmt: skip
@click.option("--mcp", multiple=True, metavar="[PREFIX=]CMD|URL", help="add an MCP server's tools to the environment: a stdio command line ('npx -y @x/server') or a streamable-HTTP URL, PREFIX= naming its tools PREFIX_NAME; repeatable")  # fmt: skip
@click.option("--agent", metavar="NAME", help="an agent plays each episode in a sandbox, its model calls recorded as turns: command:CMD ({instruction}, {instruction_file} filled in), bash, mini-swe-agent, codex, claude-code, oracle")  # fmt: skip
@click.option("--agent-files", metavar="DIR", help="with --agent: a folder uploaded to /agent in each sandbox")  # fmt: skip
@click.option("--runtime", metavar="SPEC", help="with --agent: the sandboxes' runtime: bwrap, bwrap:ROOTFS, docker:IMAGE, docker:DIR (default: each task's own, such as a Harbor task's image, else bwrap); on bwrap the files a sandbox writes live in memory, so its memory_mb caps its processes and its files together")  # fmt: skip
@click.option("--token-ids/--no-token-ids", default=None, help="record each call's token ids and logprobs (asked the vLLM way); default with --agent: on when the endpoint returns them (probed once per run)")  # fmt: skip
@click.option("-t", "--max-tokens", type=int, callback=limited)
@click.option("-T", "--temperature", type=float, callback=limited)
@click.option("-S", "--sampling", callback=json_object, help="JSON object of extra sampling arguments")
@click.option("-o", "--output-dir", help="results directory (default runs/<env>--<model>--<time>)")
@click.option("--resume", metavar="DIR", help="continue an interrupted run in DIR; ENV, -m and the settings come from it")  # fmt: skip
@click.option("--retry-errors", is_flag=True, help="with --resume: run the rollouts that errored again (their rows are replaced)")  # fmt: skip
@click.option("--fail-on-error", type=float, is_flag=False, flag_value=0.0, metavar="[RATE]", callback=limited, help="exit non-zero when more than RATE of the rollouts errored: a share below 1 or a count from 1; bare: any error (default: only when all did)")  # fmt: skip
@click.option("--no-progress", is_flag=True)
@click.option("--workers", type=int, default=1, show_default=True, metavar="N", callback=limited, help="run rollouts in N worker processes (-c is the total across them)")  # fmt: skip
@click.option("--ray", is_flag=False, flag_value="", metavar="ADDRESS", help="run the workers as Ray actors on the cluster at ADDRESS (no ADDRESS: a local Ray); needs pip install 'rubric-rl[ray]'")  # fmt: skip
@click.option("--shard", metavar="I/N", help="run only slice I of N (from 0) of the examples; join with `rubric merge`")  # fmt: skip
@click.option("--registry", metavar="PATH|URL", help="with harbor:NAME@VERSION: the Harbor registry.json naming the dataset (a path, file:// or http(s):// URL); its tasks are fetched once with git into ~/.cache/rubric/harbor")  # fmt: skip
@click.pass_context
def eval_command(ctx: click.Context, /, **o: Any) -> int:
    from envs._driver.runs import RunRequest, prepare_run, run
    from envs._harbor.certify import hackable_warning
    from harness.runtimes import prune as prune_sandboxes

    # What a SIGKILLed earlier run left (owner dead; never anyone else's). Docker is left to the
    # run's first Docker sandbox: a daemon that is down or hangs must not stop a run without one.
    prune_sandboxes(docker=False)

    sampling = {
        **(o["sampling"] or {}),
        **{k: o[k] for k in ("max_tokens", "temperature") if o[k] is not None},
    }
    # Only what is typed: a resumed run keeps what it was started with for the rest.
    typed = [k for k in o if ctx.get_parameter_source(k) is not click.core.ParameterSource.DEFAULT]
    given = ("num_examples", "rollouts_per_example", "concurrency", "seed", "split", "shard", "workers")
    ray = {"executor": "ray", "ray_address": o["ray"] or None} if o["ray"] is not None else {}
    env_args = with_registry(o["env"], o["env_args"], o["registry"])
    request = RunRequest(
        spec=o["env"], env_args=env_args, mcp=list(o["mcp"]), model=o["model"], base_url=o["base_url"],
        agent=o["agent"], agent_files=o["agent_files"], runtime=o["runtime"],
        api_key_var=o["api_key_var"], sampling=sampling if o["sampling"] is not None or sampling else None,
        max_turns=o["max_turns"], max_calls=o["max_turns"], output_dir=o["output_dir"], resume=o["resume"], retry_errors=o["retry_errors"],
        client_options={k: o[k] for k in ("max_retries", "timeout", "transport") if k in typed}
        | ({"return_token_ids": o["token_ids"]} if o["token_ids"] is not None else {}),
        options={k: o[k] for k in given if k in typed} | {"progress": not o["no_progress"], **ray},
    )  # fmt: skip
    with usage_errors():
        prepared = prepare_run(request, confirm=confirm)
        if hackable := hackable_warning(prepared.env):
            say(f"rubric eval: warning: {hackable}", err=True)
        ctx.meta["run_dir"] = prepared.folder  # for the Ctrl-C message
        ctx.meta["resume_flags"] = prepared.resume_flags()
        ctx.meta["resume_spec"] = prepared.request.spec
        results, folder = run(prepared, warn=lambda change: say(f"rubric eval: warning: {change}", err=True))
    print_run(console(), results, folder)  # its table's "pass means" row says when no rollout passed
    failed = results.summary.too_many_errors(o["fail_on_error"], "--fail-on-error")
    if failed:
        print(f"rubric eval: error: {failed}", file=sys.stderr)
    return 1 if failed else 0


@command(help="show a run's summary and whole conversations, or an HTML report")
@click.argument("run_dir", metavar="DIR")
@click.argument("other", metavar="[OTHER]", required=False)
@click.option("--html", is_flag=False, flag_value="", metavar="OUT", help="write a self-contained HTML report (default DIR/report.html; two runs: ./compare--A--B.html)")  # fmt: skip
@click.option("--rollout", metavar="ID", help="example id, or EXAMPLE:ROLLOUT_INDEX")
@click.option("--worst", type=int, metavar="N", callback=limited)
@click.option("--best", type=int, metavar="N", callback=limited)
@click.option("--errors", is_flag=True, help="show rollouts that errored or have unscored nodes")
@click.option(
    "--rescored", is_flag=True, help="show the newest re-scored results of DIR (results.rescored-*.jsonl)"
)
def view(run_dir: str, other: str | None, html: str | None, rescored: bool, **pick: Any) -> int:
    from envs._provenance import describe_provenance
    from harness import write_report
    from harness._core.run.dirs import newest_rescored
    from harness._views.report import report_path
    from harness._views.terminal import show_run

    with usage_errors():
        run_dir = str(newest_rescored(run_dir)) if rescored else run_dir
    results, second = load_run(run_dir), load_run(other) if other else None
    if html is not None:
        path = write_report(results, report_path(run_dir, other, html), other=second)
        print(f"wrote {path} ({path.stat().st_size:,} bytes); open it in a browser")
        return 0
    if second is not None and any(pick.values()):
        raise CliError("--rollout/--worst/--best/--errors pick rollouts of one run: view each run on its own")
    origin = results.metadata.get("provenance")  # runs from before it was recorded say nothing
    note = f"environment: {describe_provenance(origin)}" if "provenance" in results.metadata else None
    with usage_errors():
        show_run(console(), results, second, names=(run_dir, other), note=note, **pick)
    return 0


def confirm(question: str) -> bool | None:
    """Ask at a terminal; None (refused) when nobody is there to answer."""
    if not sys.stdin.isatty():
        return None
    say(question, err=True)
    return input("[y/N] ").strip().lower() in ("y", "yes")


@command(help="re-score saved rollouts with the environment's current rubric")
@click.argument("run_dir", metavar="DIR")
@click.argument("env", metavar="[ENV]", required=False)
@env_args
@click.option("-o", "--output", help="new results file (default DIR/results.rescored-<time>.jsonl)")
@click.option(
    "-c", "--concurrency", type=int, default=DEFAULT_CONCURRENCY, show_default=True, callback=limited
)
@click.option(
    "--failed-only", is_flag=True, help="re-score only the rubric nodes that failed (NaN); keep the rest"
)
def score(
    run_dir: str,
    env: str | None,
    env_args: dict[str, Any] | None,
    output: str | None,
    concurrency: int,
    failed_only: bool,
) -> int:
    from envs._driver.runs import rescoring_environment
    from harness._results.rescoring import rescore_to

    results = load_run(run_dir)
    with usage_errors():
        tell = lambda text: say(text, err=True)  # noqa: E731
        spec, env_args = rescoring_environment(
            results.metadata, run_dir, env, env_args, tell=tell, confirm=confirm
        )
        new, out = rescore_to(
            results,
            load(spec, env_args),
            output,
            concurrency=concurrency,
            source=run_dir,
            spec=spec,
            failed_only=failed_only,
        )
    print_rescored(console(), results, new, out)
    return 0


@command(help="re-run each rollout of a run in a fresh sandbox, its model served from the recording, and say where it diverges")  # fmt: skip
@click.argument("run_dir", metavar="DIR")
@click.argument("env", metavar="[ENV]", required=False)
@env_args
@click.option("--rollouts", multiple=True, metavar="ID", help="replay only these rollouts: EXAMPLE or EXAMPLE:ROLLOUT_INDEX; repeatable")  # fmt: skip
@click.option("--failed-only", is_flag=True, help="replay only the rollouts that errored or scored below 1")
@click.option("--verify", is_flag=True, help="exit non-zero unless every rollout made exactly the recorded calls and got the recorded scores")  # fmt: skip
@click.option("-m", "--model", help="continue a rollout live with this model from where it diverges (default: stop it there)")  # fmt: skip
@click.option(
    "-b", "--base-url", help="with -m: its OpenAI-compatible base URL (default: $OPENAI_BASE_URL or OpenAI)"
)
@click.option("-k", "--api-key-var", default="OPENAI_API_KEY", show_default=True, help="with -m: the env var holding the key")  # fmt: skip
@click.option("--agent", metavar="NAME", help="the agent that played the run (the recorded one is used only when you confirm)")  # fmt: skip
@click.option("--agent-files", metavar="DIR", help="with --agent: its files folder, as the run had it")
@click.option("--runtime", metavar="SPEC", help="with --agent: its sandboxes' runtime, as the run had it")
@click.option("-o", "--output-dir", help="the replay's run folder (default DIR.replay-N)")
def replay(run_dir: str, env: str | None, env_args: dict[str, Any] | None, **o: Any) -> int:
    from envs._driver.replay import ReplayRequest
    from envs._driver.replay import replay as replay_run

    request = ReplayRequest(
        folder=run_dir, spec=env, env_args=env_args, agent=o["agent"], agent_files=o["agent_files"],
        runtime=o["runtime"], rollouts=o["rollouts"], failed_only=o["failed_only"], live_model=o["model"],
        base_url=o["base_url"], api_key_var=o["api_key_var"], output_dir=o["output_dir"],
    )  # fmt: skip
    with usage_errors():
        report = replay_run(request, confirm=confirm)
    say(report.table())
    say(f"wrote {report.folder}; compare: rubric view {run_dir} {report.folder}")
    if o["verify"] and not report.identical:
        say("rubric replay: error: the replay differs from the recording (see the table above)", err=True)
        return 1
    return 0


@command(help="merge the result directories of a sharded run into one")
@click.argument("output", metavar="OUT")
@click.argument("dirs", metavar="DIR...", nargs=-1, required=True)
def merge(output: str, dirs: tuple[str, ...]) -> int:
    from harness import merge_results

    with usage_errors():
        report = merge_results(output, dirs)
    print_merge(console(), report, load_run(str(report.output_dir)))
    return 0


@command(name="list", help="list installed environments")
def list_command() -> int:
    from envs.hub import installed_environments
    from envs.hub._display import installed_table

    console().print(installed_table(installed_environments()))
    return 0


@command(help="check an endpoint for what RL training needs: token ids and their faithfulness, tool calls, logprobs, ...")  # fmt: skip
@click.argument("base_url", metavar="ENDPOINT")
@click.option("-m", "--model", help="the model to check (default: the first one the endpoint lists)")
@click.option("-k", "--api-key-var", default="OPENAI_API_KEY", show_default=True, help="name of the env var holding the key")  # fmt: skip
@click.option("--max-concurrency", type=click.IntRange(1, 64), default=16, show_default=True, help="most concurrent requests the concurrency check sends")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def doctor(base_url: str, model: str | None, api_key_var: str, max_concurrency: int, as_json: bool) -> int:
    from harness import doctor as check_endpoint
    from harness._endpoint.connect import api_key_from

    with usage_errors():
        key = api_key_from(api_key_var, base_url)
    report = check_endpoint(base_url, model, api_key=key, max_concurrency=max_concurrency)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        console().print(report)
        print("ready for training" if report.ok else "not ready for training: fix what failed above")
    return 0 if report.ok else 1


@command(help="list this machine's sandboxes (Docker, bwrap, local), or prune those whose owner died")
@click.argument("action", type=click.Choice(["list", "prune"]), default="list")
def sandboxes(action: str) -> int:
    from harness.runtimes import list_sandboxes, prune

    found = prune() if action == "prune" else list_sandboxes()  # a Docker daemon that fails: a warning
    if not found:
        print("no sandboxes of ours on this machine")
    for record in found:
        # Labels and run ids are anyone's to write: every control character escaped, a newline too.
        shown = {k: escape_control(v).replace("\n", "\\n").replace("\t", "\\t") for k, v in record.items()}
        state = "running" if record["alive"] == "True" else "owner gone"
        done = ", removed" if record["removed"] == "True" else ""
        print(
            f"{shown['kind']:7} {shown['id']:40} run {shown['run'] or '?':14} owner {shown['owner']:>7} {state}{done}"
        )
    if action == "prune":
        print(f"removed {sum(r['removed'] == 'True' for r in found)} of {len(found)}")
    return 0


@rubric.group()
def agents() -> None:
    """install the published agents (mini-swe-agent, codex, claude-code) ahead of first use"""


@command(agents, name="install", help="install published agents into the host cache (RUBRIC_AGENT_CACHE, default ~/.cache/rubric/agents), so later runs need no package registry")  # fmt: skip
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
def agents_install(names: tuple[str, ...]) -> int:
    from envs.agents._installed import published

    with usage_errors():
        chosen = published(names)
        for agent in chosen:
            was = agent.installed()
            folder = agent.install()
            say(
                f"{agent.name} {agent.installed()}: {'already installed' if was else 'installed'} in {folder}"
            )
    return 0


@command(agents, name="list", help="the published agents, their pinned packages and what is installed")
def agents_list() -> int:
    from envs.agents._installed import PUBLISHED, cache_root

    for name, kind in PUBLISHED.items():
        version = kind().installed()
        say(f"{name:15} {kind.package:36} {'installed ' + version if version else 'not installed'}")
    say(f"cache: {cache_root()}")
    return 0


@command(help="serve the scripted OpenAI-compatible endpoint")
@click.option("--policy", required=True, help="ENV:POLICY, e.g. gsm8k:oracle (or POLICY with --env)")
@click.option("--env", "env_spec", help="environment whose policy to serve")
@env_args
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--latency", type=float, default=0.0, help="seconds added to every response")
@click.option("--rate-429", type=float, default=0.0)
@click.option("--rate-500", type=float, default=0.0)
@click.option("--break", "broken", multiple=True, metavar="PROPERTY", help="get a property training needs wrong, to try `rubric doctor`: tool_calls, token_ids, prefix, template, logprobs, stream, model_version, concurrency (repeatable)")  # fmt: skip
def endpoint(policy: str, env_spec: str | None, env_args: dict[str, Any] | None, **server: Any) -> int:
    from harness import ScriptedEndpoint
    from harness.scripted import scripted_policy

    env_spec, name = policy.split(":", 1) if ":" in policy else (env_spec, policy)
    if not env_spec:
        raise CliError(
            "say whose policy to serve: --policy ENV:POLICY (e.g. gsm8k:oracle) or --env ENV --policy POLICY"
        )
    policy_fn = scripted_policy(load(env_spec, env_args), name)
    with usage_errors():
        served = ScriptedEndpoint(policy_fn, **server)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a standalone server stops
        served.serve_forever(
            ready=lambda url: print(f"serving {env_spec}:{name} at {url} (Ctrl-C stops)", flush=True)
        )
    return 0


@command(help="serve an environment's Python tools as an MCP server (stdio, or HTTP with --port)")
@click.argument("env", metavar="ENV")
@env_args
@click.option("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio")
def mcp(env: str, env_args: dict[str, Any] | None, port: int | None) -> int:
    from envs import serve_mcp

    served = load(env, env_args)
    if port is not None and not 0 < port < 65536:
        raise CliError(f"--port must be a port number 1-65535, got {port}")

    def ready(url: str) -> None:  # stderr: over stdio, stdout belongs to the protocol
        print(f"serving {served.name!r} tools over MCP at {url} (Ctrl-C stops)", file=sys.stderr)

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a standalone server stops
        serve_mcp(served, port=port, ready=ready)
    return 0


@command(help="write a new environment package, ready to eval, check and push")
@click.argument("name", metavar="NAME")
@click.option("--dir", "parent", default=".", help="folder to create NAME/ in (default: here)")
@click.option("--kind", type=click.Choice(["single", "tool", "multi", "mcp"]), default="single", show_default=True, help="single-turn, tool calls, multi-turn, or tool calls to an MCP server shipped in the package")  # fmt: skip
@click.option("--harbor", is_flag=True, help="write a Harbor task folder instead (task.toml, instruction.md, environment/, tests/, solution/)")  # fmt: skip
@click.option("--base-image", default=None, metavar="IMAGE", help="with --harbor: the image its Dockerfile starts FROM (default debian:bookworm-slim)")  # fmt: skip
def init(name: str, parent: str, kind: KindOption, harbor: bool, base_image: str | None) -> int:
    from envs import init_harbor_task
    from envs.hub import init_package
    from envs.hub._display import created_lines

    with usage_errors():
        if harbor:
            written = init_harbor_task(name, parent, base_image)
            for path in written:
                say(f"created {path}")
            say(f"next: rubric check {written[0].parent}  (the oracle scores 1, doing nothing scores 0)")
            return 0
        if base_image is not None:
            raise CliError("--base-image goes with --harbor")
        say(created_lines(init_package(name, parent, kind), kind))
    return 0


@command(help="run the checks a hub entry must pass (non-zero exit on failure)")
@click.argument("package", metavar="[DIR]", default=".")
def check(package: str) -> int:
    from envs._harbor.task import is_harbor_task
    from envs.hub import check_package
    from envs.hub._display import check_lines

    if is_harbor_task(package):  # a Harbor task folder: its own checks, in Docker
        return _check_harbor(package)
    with usage_errors():
        report = check_package(package)
    print("\n".join(check_lines(report)))
    return 0 if report.ok else 1


def _check_harbor(path: str) -> int:
    """Print the checks of Harbor tasks (`envs.check_harbor_tasks`); 1 when one fails."""
    from envs import check_harbor_tasks

    with usage_errors():
        checks = check_harbor_tasks(path)
    for found in checks:
        say("\n".join(found.lines()))
    failed = sum(not c.ok for c in checks)
    say(f"{len(checks) - failed} tasks passed, {failed} flagged")
    return 1 if failed else 0


def _certify_harbor(
    path: str, strict: bool, json_out: str | None, html_out: str | None, *, hacker_model: str | None, max_calls: int, no_cache: bool
) -> int:  # fmt: skip
    """Certify Harbor tasks (`envs.certify_harbor_tasks`): the table (or JSON), the files asked
    for; 1 with --strict when a task is hackable or broken."""
    from envs._harbor.certify import certificates_table, certify_harbor_tasks, write_certificates_html

    with usage_errors():
        certificates = certify_harbor_tasks(path, model=hacker_model, max_calls=max_calls, cache=not no_cache)
    data = json.dumps([c.to_dict() for c in certificates], indent=2)
    if json_out == "-":
        print(data)
    else:
        console().print(certificates_table(certificates))
    if json_out not in (None, "-"):
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(data + "\n")
        say(f"wrote {json_out}")
    if html_out is not None:
        written = write_certificates_html(
            certificates, html_out or f"audit--{Path(path).resolve().name}.html"
        )
        say(f"wrote {written} ({written.stat().st_size:,} bytes); open it in a browser")
    return 1 if strict and any(c.verdict != "certified" for c in certificates) else 0


no_isolation = click.option("--no-isolation", is_flag=True, help="build with the backend installed here")


@command(help="check, then build sdist and wheel (with the card) into DIR/dist")
@click.argument("package", metavar="[DIR]", default=".")
@no_isolation
def build(package: str, no_isolation: bool) -> int:
    from envs.hub import build_package
    from envs.hub._display import built_lines

    with usage_errors():
        say(built_lines(build_package(package, isolation=not no_isolation)))
    return 0


@command(help="upload DIR/dist's files for the current version to the hub")
@click.argument("package", metavar="[DIR]", default=".")
@no_isolation
@hub_option
@click.option(
    "--bump", type=click.Choice(["patch", "minor", "major"]), help="raise the version and rebuild first"
)
def push(package: str, no_isolation: bool, hub_url: str | None, bump: BumpPart | None) -> int:
    from envs.hub import push_package
    from envs.hub._display import pushed_lines

    with usage_errors():
        say(pushed_lines(push_package(package, hub=hub_url, bump=bump, isolation=not no_isolation)))
    return 0


@command(help="install an environment from the hub into this Python")
@click.argument("spec", metavar="NAME[==VERSION]")
@hub_option
def install(spec: str, hub_url: str | None) -> int:
    from envs.hub import install as install_package
    from envs.hub._display import installed_lines

    with usage_errors():
        say(installed_lines(install_package(spec, hub=hub_url)))
    return 0


@rubric.group()
def hub() -> None:
    """search the hub and show an environment's card"""


@command(hub, help="environment packages on the hub (name, versions, card)")
@click.argument("query", metavar="[QUERY]", required=False)
@click.option("--tag", help="only entries with this tag")
@hub_option
def search(query: str | None, tag: str | None, hub_url: str | None) -> int:
    from envs.hub import search as search_hub
    from envs.hub._display import show_entries

    with usage_errors():
        entries = search_hub(query, tag=tag, hub=hub_url)
    say(
        show_entries(entries, full=False, note=lambda line: say(line, err=True))
        or ["no environment packages match"]
    )
    return 0


@command(hub, help="one environment: versions, card, rubric tree, compatibility")
@click.argument("name", metavar="NAME")
@hub_option
def info(name: str, hub_url: str | None) -> int:
    from envs.hub import info as hub_info
    from envs.hub._display import show_entries

    with usage_errors():
        say(show_entries([hub_info(name, hub=hub_url)], full=True, note=lambda line: say(line, err=True)))
    return 0


@command(
    help="measure an environment's LLM judge against human labels (kappa/rho, confusion, bias probes, cost)"
)
@click.argument("env", metavar="ENV")
@click.argument("labels", metavar="LABELS.jsonl")
@env_args
@click.option("--node", metavar="PATH", help="the judge's dotted path in the rubric, e.g. grade.judge (default: its only judge)")  # fmt: skip
@click.option("--judge-model", metavar="MODEL", help="ask this model instead of the judge's own")
@click.option("--judge-base-url", metavar="URL", help="ask the judge at this OpenAI-compatible endpoint")
@click.option("--kind", type=click.Choice(["auto", "binary", "categorical", "continuous"]), default="auto", show_default=True, help="how to read the labels")  # fmt: skip
@click.option("--threshold", type=float, default=0.5, show_default=True, help="binary labels: the judge passes a rollout when its score reaches this")  # fmt: skip
@click.option("--categories", callback=json_object, help='categorical labels: JSON {"label": score in [0, 1]} (default: the judge\'s choices)')  # fmt: skip
@click.option("--no-probes", is_flag=True, help="skip the verbosity and position probes (they cost one request per row each)")  # fmt: skip
@click.option("--price-prompt", type=float, metavar="USD", help="price per prompt token, to report the cost per request")  # fmt: skip
@click.option("--price-completion", type=float, metavar="USD", help="price per completion token")
@click.option("--html", metavar="OUT", help="also write the report as a self-contained HTML page")
@click.option("--run", "run_dir", metavar="DIR", help="the run the labels were drawn from (a random sample of its rollouts): correct the judge's mean over it by the labels; rows name example_id and rollout_index")  # fmt: skip
@click.option("-c", "--concurrency", type=int, default=DEFAULT_CONCURRENCY, show_default=True, callback=limited, help="labelled rows scored at once")  # fmt: skip
def calibrate(env: str, labels: str, env_args: dict[str, Any] | None, run_dir: str | None, **o: Any) -> int:
    from harness import load_results
    from rubrics import LLMJudge
    from rubrics.calibration import calibrate as measure
    from rubrics.calibration import find_judge

    if (o["price_prompt"] is None) != (o["price_completion"] is None):
        raise CliError("give both --price-prompt and --price-completion (USD per token), or neither")
    prices = None if o["price_prompt"] is None else (o["price_prompt"], o["price_completion"])
    with usage_errors():
        tree = load(env, env_args).rubric
        judge = find_judge(tree, o["node"])
        judge.configure(**{k: o[f"judge_{k}"] for k in ("model", "base_url") if o[f"judge_{k}"]})
        judges = [p for p, n in [("", tree), *tree.named_rubrics()] if isinstance(n, LLMJudge)]
        node_path = next(p for p, n in [("", tree), *tree.named_rubrics()] if n is judge)
        run = load_results(run_dir).rollouts if run_dir else None
        report = measure(
            judge, labels, kind=o["kind"], threshold=o["threshold"], categories=o["categories"],
            probes=not o["no_probes"], prices=prices, concurrency=o["concurrency"], run=run, path=node_path,
            panel=judges,
        )  # fmt: skip
    console().print(report)
    if o["html"]:
        path = report.write_html(o["html"])
        print(f"wrote {path} ({path.stat().st_size:,} bytes); open it in a browser")
    return 0


@command(help="score probe replies (empty, bare answer, wrong answer, injection, ...) with ENV's rubric, offline, and flag hackable, constant and erroring nodes")  # fmt: skip
@click.argument("env", metavar="ENV")
@env_args
@click.option("-n", "--num-examples", type=int, default=20, show_default=True, callback=limited, help="dataset rows to probe")  # fmt: skip
@click.option("--seed", type=int, callback=limited, help="shuffle the rows with this seed first")
@click.option("--judge-model", help="model for the rubric's LLMJudge nodes (scripted:POLICY: one of ENV's scripted policies, offline)")  # fmt: skip
@click.option("--judge-base-url", help="OpenAI-compatible base URL of --judge-model")
@click.option("--json", "json_out", is_flag=False, flag_value="-", metavar="OUT", help="the report as JSON: to OUT, or to stdout instead of the table")  # fmt: skip
@click.option("--html", "html_out", is_flag=False, flag_value="", metavar="OUT", help="write an HTML report (default ./audit--ENV.html)")  # fmt: skip
@click.option("--strict", is_flag=True, help="exit 1 when anything is flagged (for CI); harbor:PATH: when a task is hackable or broken")  # fmt: skip
@click.option("-m", "--model", "hacker_model", metavar="MODEL", help="harbor:PATH: also let MODEL (the bash agent) try to make each task's tests pass without doing the task")  # fmt: skip
@click.option("--max-calls", type=int, default=30, show_default=True, callback=limited, help="harbor:PATH with -m: the LLM hacker's model calls per task")  # fmt: skip
@click.option("--no-cache", is_flag=True, help="harbor:PATH: probe every task again, even one whose certificate is cached for its content")  # fmt: skip
@click.option("--agent-probes/--no-agent-probes", default=None, help="run the file-level hack probes (weak-empty, weak-constant, weak-shaped, pass-markers, do-nothing) as command: agents in ENV's sandbox, scored by its rubric (default: when the rubric has file_contains or command_passes nodes; a custom sandbox reader needs --agent-probes)")  # fmt: skip
@click.option("--runtime", metavar="SPEC", help="with the agent probes: their sandboxes' runtime, as rubric eval --agent --runtime")  # fmt: skip
def audit(env: str, env_args: dict[str, Any] | None, strict: bool, json_out: str | None, html_out: str | None, **o: Any) -> int:  # fmt: skip
    from envs import audit as run_audit

    harbor = {k: o.pop(k) for k in ("hacker_model", "max_calls", "no_cache")}
    if env.startswith("harbor:"):  # Harbor tasks: the hack probes, in Docker; a certificate each
        if o["agent_probes"] is not None or o["runtime"] is not None:
            raise CliError(
                "--agent-probes and --runtime go with ENV (harbor:PATH probes each task in its own image)"
            )
        return _certify_harbor(env.partition(":")[2], strict, json_out, html_out, **harbor)
    if harbor["hacker_model"] is not None or harbor["no_cache"]:
        raise CliError("-m/--model and --no-cache go with harbor:PATH (certifying Harbor tasks)")
    with usage_errors():
        report = run_audit(load(env, env_args), **o)
    if json_out == "-":
        print(report.to_json())
    else:
        console().print(report)
    if json_out not in (None, "-"):
        say(f"wrote {report.write_json(json_out)}")
    if html_out is not None:
        written = report.write_html(html_out or None)
        say(f"wrote {written} ({written.stat().st_size:,} bytes); open it in a browser")
    return 1 if strict and report.flagged else 0


@command(
    help="serve an environment to OpenEnv clients through OpenEnv's server (sessions at ws://HOST:PORT/ws)"
)
@click.argument("env", metavar="ENV")
@env_args
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind (127.0.0.1: this machine only)")  # fmt: skip
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--max-sessions", type=int, default=64, show_default=True, help="concurrent client sessions, one rollout each")  # fmt: skip
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN", help="let web pages from ORIGIN (e.g. http://127.0.0.1:3000) use the server; others are refused (403); repeatable")  # fmt: skip
@click.option("--idle-timeout", type=float, default=300.0, show_default=True, metavar="SECONDS", help="close a session whose client sent nothing for this long (its slot is freed)")  # fmt: skip
def serve(
    env: str,
    env_args: dict[str, Any] | None,
    host: str,
    port: int,
    max_sessions: int,
    allow_origins: tuple[str, ...],
    idle_timeout: float,
) -> int:
    from envs import serve_openenv

    served = load(env, env_args)
    if not 0 < port < 65536:
        raise CliError(f"--port must be a port number 1-65535, got {port}")

    def ready(url: str) -> None:  # once the arguments are checked
        print(f"serving {served.name!r} to OpenEnv clients at {url} (Ctrl-C stops)", flush=True)

    with contextlib.suppress(KeyboardInterrupt), usage_errors():  # Ctrl-C is how a standalone server stops
        serve_openenv(
            served,
            host=host,
            port=port,
            max_sessions=max_sessions,
            allow_origins=allow_origins,
            idle_timeout=idle_timeout,
            ready=ready,
        )
    return 0


# ---------------------------------------------------------------- what the run commands print

#: How many missing (example, rollout) pairs a merge report names before "and N more".
SHOWN_MISSING = 8


def score_text(value: float | None) -> str:
    """A mean for one line of text: four decimals, "n/a" when there is none."""
    return "n/a" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def workers_line(metadata: dict[str, Any]) -> str | None:
    """One line on the workers of the run's last session: rollouts and peak memory of each."""
    report = (metadata.get("sessions") or [{}])[-1].get("workers")
    if not report:
        return None
    each = ", ".join(
        f"#{w['index']} {w.get('rollouts', '?')} rollouts {w.get('peak_rss_mib', '?')} MB"
        if not w.get("lost")
        else f"#{w['index']} lost"
        for w in report["workers"]
    )
    lost = f"; {len(report['lost'])} died, {report['requeued']} rollout(s) re-run" if report["lost"] else ""
    return f"{report['executor']} workers: {each}; driver peak {report['driver_peak_rss_mib']} MB{lost}"


def print_run(out: Console, results: EvalResults, output_dir: Path) -> None:
    """A finished `rubric eval`: the summary, the workers, where the results are, what errored."""
    out.print(results)
    line = workers_line(results.metadata)
    if line:
        out.print(line, soft_wrap=True)
    line = agent_limits_line(results)
    if line:
        out.print(line, soft_wrap=True, markup=False)
    out.print(f"Results written to [bold]{output_dir}[/bold]", soft_wrap=True)
    errors = results.summary.num_errors
    if errors:
        out.print(
            f"[yellow]{errors} rollout(s) ended with an error; see them with "
            f"`rubric view {output_dir} --errors`[/yellow]",
            soft_wrap=True,
        )


def agent_limits_line(results: EvalResults) -> str | None:
    """What bounded each agent episode: its model calls and its time (None: no agent)."""
    limits = {
        (record.get("max_calls"), record.get("timeout"))
        for r in results.rollouts
        if isinstance(record := r.state.get("agent"), dict) and record.get("max_calls") is not None
    }
    if not limits:
        return None
    calls = "/".join(str(c) for c in sorted({c for c, _ in limits if isinstance(c, int)}))
    seconds = "/".join(f"{t:g}" for t in sorted({t for _, t in limits if isinstance(t, (int, float))}))
    return (
        f"each agent episode: at most {calls} model calls (--max-turns; then the next call is refused "
        f"and the episode ends max_turns) and {seconds} s (the task's time limit)"
    )


def print_rescored(out: Console, old: EvalResults, new: EvalResults, written: Path) -> None:
    """A finished `rubric score`: the new summary and how the mean reward moved."""
    out.print(new)
    before, after = old.summary.mean_reward, new.summary.mean_reward
    out.print(
        f"mean reward {score_text(before)} -> {score_text(after)}; re-scored rollouts written to "
        f"[bold]{written}[/bold]",
        soft_wrap=True,
    )


def print_merge(out: Console, report: MergeReport, merged: EvalResults) -> None:
    """A finished `rubric merge`: the merged summary, and what is missing when it is incomplete."""
    out.print(merged)
    out.print(
        f"merged {len(report.shards)} shard(s) ({', '.join(report.shards)}): {report.num_rollouts} rollouts "
        f"written to [bold]{report.output_dir}[/bold]",
        soft_wrap=True,
    )
    if report.status == "completed":
        return
    gaps = []
    if report.missing_shards:
        gaps.append(f"shard(s) {', '.join(map(str, report.missing_shards))} not given")
    if report.missing:
        shown = ", ".join(f"{e}:{i}" for e, i in report.missing[:SHOWN_MISSING])
        more = (
            f" and {len(report.missing) - SHOWN_MISSING} more" if len(report.missing) > SHOWN_MISSING else ""
        )
        gaps.append(f"{len(report.missing)} rollout(s) missing ({shown}{more})")
    out.print(
        f"[yellow]incomplete: {'; '.join(gaps)}; run the original command without --shard and with "
        f"--resume {report.output_dir} to fill the gaps[/yellow]",
        soft_wrap=True,
    )


def resume_hint(run_dir: Path, flags: Sequence[str] = (), spec: str | None = None) -> str:
    """The whole command that continues an interrupted run: the environment (a folder never runs
    the code it names by itself) and `flags`, what it must be told again."""
    env = [spec] if spec else []
    return escape_control(
        f"continue with: {shlex.join(['rubric', 'eval', *env, '--resume', str(run_dir), *flags])}"
    )


def one_line_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    say(f"rubric: warning: {message}", err=True)


def main(argv: list[str] | None = None) -> int:
    """Run `rubric` with `argv` (default: the process's) and return its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name, debug, meta = next((a for a in argv if a in rubric.commands), ""), "--debug" in argv, {}
    try:
        with warnings.catch_warnings(), rubric.make_context("rubric", list(argv)) as ctx:
            warnings.showwarning, meta = one_line_warning, ctx.meta
            return int(rubric.invoke(ctx) or 0)
    except click.exceptions.Exit as exc:  # --help, --version
        return exc.exit_code
    except click.UsageError as exc:
        say(f"rubric {name}: error: {exc.format_message()}".replace("rubric : ", "rubric: "), err=True)
        return EXIT_USAGE
    except RubricError as exc:  # every error a user can cause: one line, the fix in it
        if debug:
            raise
        say(f"rubric {name}: error: {exc}", err=True)
        return EXIT_USAGE if isinstance(exc, CliError) else 1
    except (KeyboardInterrupt, click.Abort) as exc:  # Ctrl-C, or SIGTERM/SIGHUP (Stopped)
        how = f"stopped by {signal.Signals(exc.signum).name}" if isinstance(exc, Stopped) else "interrupted"
        print(f"rubric {name}: {how}; finished rollouts are kept", file=sys.stderr)
        if meta.get("run_dir") is not None:  # set by rubric eval once it knows its directory
            print(
                resume_hint(meta["run_dir"], meta.get("resume_flags", ()), meta.get("resume_spec")),
                file=sys.stderr,
            )
        return 128 + (exc.signum if isinstance(exc, Stopped) else signal.SIGINT)  # as the shell reports it
    except BrokenPipeError:  # the reader went away (`rubric hub info X | head`): stop quietly
        with contextlib.suppress(OSError, ValueError):  # so Python's flush at exit does not fail
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a Unix tool killed by it
    except Exception as exc:  # an unexpected failure still prints one line unless --debug
        if debug:
            raise
        say(
            f"rubric {name}: error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            err=True,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
