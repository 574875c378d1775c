"""The `rubric` command line: parses arguments, calls the packages, prints.

Every failure a user can cause (unknown environment, bad JSON, unreachable endpoint, missing
key variable, existing output directory) is a `CliError`: one clear line naming the fix and a
non-zero exit, with the traceback only under `--debug`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import sys
import time
from contextlib import ExitStack
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.defaults import DEFAULT_CONCURRENCY, DEFAULT_TRANSPORT, TRANSPORTS
from harness.errors import RubricError

if TYPE_CHECKING:  # pragma: no cover
    from envs import Environment

EXIT_USAGE = 2


class CliError(RubricError):
    """A user-facing error: printed as one line, no traceback."""


def _version() -> str:
    try:
        return version("rubric-rl")
    except PackageNotFoundError:
        return "0+unknown"


def _json_arg(text: str | None, flag: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{flag} is not valid JSON ({exc.msg} at column {exc.colno}): {text!r}; "
            f"pass an object such as '{{\"key\": 1}}'"
        ) from None
    if not isinstance(value, dict):
        raise CliError(f"{flag} must be a JSON object like '{{\"key\": 1}}', got {type(value).__name__}")
    return value


def _console():
    from rich.console import Console

    return Console()


# ---------------------------------------------------------------------------------------------
# shared pieces


def _load_env(spec: str, env_args: dict[str, Any]) -> Environment:
    from envs import load_environment

    try:
        return load_environment(spec, **env_args)
    except RubricError as exc:  # not found, unknown -a/--env-args, or the environment's code failed
        raise CliError(f"cannot load environment {spec!r}: {exc}") from exc


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def _check_reachable(base_url: str, timeout: float = 5.0) -> None:
    """Fail fast, before any rollout, when nothing answers at the endpoint."""
    import urllib.error
    import urllib.request

    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout):
            return
    except urllib.error.HTTPError:
        return  # something answered (401/404 are fine: the server is there)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(
            f"cannot reach the endpoint at {base_url} ({reason}); start the server or fix -b/--base-url"
        ) from None


def _resolve_key(args: argparse.Namespace, base_url: str | None) -> str | None:
    var = args.api_key_var
    key = os.environ.get(var)
    if key:
        return key
    explicit = var != "OPENAI_API_KEY"
    if explicit or base_url is None:
        raise CliError(
            f"environment variable {var} is not set; export {var}=<your key> "
            f"or name another variable with -k/--api-key-var"
        )
    return "EMPTY"  # local OpenAI-compatible servers (vLLM, llama.cpp) accept any key


def _sampling(args: argparse.Namespace) -> dict[str, Any]:
    from harness.client import check_sampling
    from harness.errors import ConfigError

    sampling = _json_arg(args.sampling, "-S/--sampling")
    try:
        check_sampling(sampling, "-S/--sampling")
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if args.max_tokens is not None:
        sampling["max_tokens"] = args.max_tokens
    if args.temperature is not None:
        sampling["temperature"] = args.temperature
    return sampling


# ---------------------------------------------------------------------------------------------
# rubric eval


def _from_recorded_run(args: argparse.Namespace) -> None:
    """`rubric eval --resume DIR`: what the command line leaves out comes from DIR/metadata.json
    (environment, its arguments, model, endpoint, what to run); never a key. Flags that were
    given stay, and the resume check refuses those that differ from the run in one line."""
    from harness.results.storage import read_metadata, section

    folder = Path(args.resume)
    try:
        metadata = read_metadata(folder) or {}
    except RubricError as exc:
        raise CliError(str(exc)) from exc
    env, model, arguments = (
        section(metadata, "env"),
        section(metadata, "model"),
        section(metadata, "arguments"),
    )
    if not env or not model:
        raise CliError(
            f"--resume {folder}: its metadata.json does not record the run; name ENV and -m/--model"
        )
    if args.env is None:
        args.env = _resumable_spec(env, metadata.get("provenance"), folder)
        if args.env_args is None and env.get("load_kwargs"):
            args.env_args = json.dumps(env["load_kwargs"])
    if args.model is None:
        args.model = str(model.get("model"))
        if args.base_url is None and not args.model.startswith("scripted:") and model.get("base_url"):
            args.base_url = str(model["base_url"])
    recorded = {"num_examples": None, "seed": None, "shard": None, "rollouts_per_example": 1, "split": "eval"}
    for name, default in recorded.items():
        if getattr(args, name, default) == default and arguments.get(name) is not None:
            setattr(args, name, arguments[name])
    if (
        args.sampling is None
        and args.max_tokens is None
        and args.temperature is None
        and arguments.get("sampling")
    ):
        args.sampling = json.dumps(arguments["sampling"])
    if args.max_turns is None and isinstance(env.get("max_turns"), int):
        args.max_turns = env["max_turns"]


def _resumable_spec(env: Any, provenance: Any, folder: Path) -> str:
    """The environment a run was made with: an installed name, or a file/folder whose source
    still hashes as recorded (the same code made the run); anything else is named for the user."""
    from envs.provenance import of_directory, of_file
    from envs.registry import recorded_environment

    spec = env.get("load_spec") or env.get("name")
    if isinstance(spec, str) and isinstance(provenance, dict) and provenance.get("hash"):
        path = Path(spec)
        now = of_directory(path) if path.is_dir() else of_file(path) if path.is_file() else None
        if now is not None and now.get("hash") == provenance["hash"]:
            return spec
    try:
        return recorded_environment(env, f"{folder}/metadata.json", command="rubric eval")
    except RubricError as exc:
        raise CliError(f"{exc} --resume {shlex.quote(str(folder))}") from exc


def _output_dir(args: argparse.Namespace, env_name: str) -> tuple[Path, bool]:
    if args.resume:
        path = Path(args.resume)
        if not (path / "results.jsonl").exists() and not (path / "metadata.json").exists():
            raise CliError(
                f"--resume {path}: no earlier run there (no results.jsonl/metadata.json); "
                f"check the path or start a new run with -o"
            )
        return path, True
    if args.output_dir:
        path = Path(args.output_dir)
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{_slug(env_name)}--{_slug(args.model)}--{stamp}"
    if path.exists() and any(path.iterdir()):
        raise CliError(
            f"output directory {path} already exists and is not empty; "
            f"pass --resume {path} to continue it or choose another -o/--output-dir"
        )
    return path, False


# Caps sane for one machine (24 GiB): each planned rollout is kept in memory until the run ends.
MAX_ROLLOUTS_PER_RUN = 1_000_000
_INT_RANGES = (  # flag, attribute, least, most
    ("-n/--num-examples", "num_examples", 1, None),
    ("-r/--rollouts-per-example", "rollouts_per_example", 1, 1000),
    ("-c/--concurrency", "concurrency", 1, 4096),
    ("--max-turns", "max_turns", 1, 1000),
    ("-t/--max-tokens", "max_tokens", 1, 1_000_000),
    ("--max-retries", "max_retries", 0, 100),
    ("--workers", "workers", 1, 256),
    ("--seed", "seed", 0, 2**32 - 1),
)
_FLOAT_RANGES = (  # flag, attribute, low, high, low inclusive
    ("--timeout", "timeout", 0.0, 86400.0, False),  # "a positive number of seconds"
    ("-T/--temperature", "temperature", 0.0, 2.0, True),
    ("--max-error-rate", "max_error_rate", 0.0, 1.0, True),
)


def _check_counts(args: argparse.Namespace) -> None:
    """Reject impossible or harmful values before anything is loaded or started: one line
    naming the flag and the allowed values."""
    for flag, name, least, most in _INT_RANGES:
        value = getattr(args, name, None)
        if value is None:
            continue
        allowed = f" (allowed: {least} to {most:,})" if most is not None else ""
        if value < least:
            raise CliError(f"{flag} must be at least {least}, got {value}{allowed}")
        if most is not None and value > most:
            raise CliError(f"{flag} must be at most {most:,}, got {value:,}{allowed}")
    for flag, name, low, high, inclusive in _FLOAT_RANGES:
        value = getattr(args, name, None)
        if value is None:
            continue
        above = value >= low if inclusive else value > low
        if not (math.isfinite(value) and above and value <= high):
            what = f"a number from {low:g} to {high:g}" if inclusive else f"a positive number up to {high:g}"
            raise CliError(f"{flag} must be {what}, got {value}")
    if args.resume and args.output_dir:
        raise CliError(
            f"--resume {args.resume} continues that run in place, so -o/--output-dir {args.output_dir} "
            "cannot be used with it; drop one of them"
        )
    if args.shard is not None:
        from harness.errors import ConfigError
        from harness.results.sharding import Shard

        try:
            args.shard = Shard.parse(args.shard)
        except ConfigError as exc:
            raise CliError(f"--shard {args.shard}: {exc}") from None


def _check_planned(env: Any, args: argparse.Namespace) -> None:
    """The run's size (examples x rollouts) must fit in memory: checked before it starts."""
    examples = len(env.get_dataset(args.split))
    if args.num_examples is not None:
        examples = min(examples, args.num_examples)
    planned = examples * args.rollouts_per_example
    if planned > MAX_ROLLOUTS_PER_RUN:
        raise CliError(
            f"-n/-r: {examples:,} examples x {args.rollouts_per_example:,} rollouts = {planned:,} rollouts, "
            f"more than {MAX_ROLLOUTS_PER_RUN:,} per run; lower -n or -r, or split it with --shard"
        )


def _warn_in_one_line(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    print(f"rubric: warning: {message}", file=sys.stderr)


def cmd_eval(args: argparse.Namespace) -> int:
    import warnings

    with warnings.catch_warnings():
        warnings.showwarning = _warn_in_one_line
        return _eval(args)


def _print_workers(console: Any, metadata: dict[str, Any]) -> None:
    """One line on the workers of the last session: their rollouts and peak memory."""
    report = (metadata.get("sessions") or [{}])[-1].get("workers")
    if not report:
        return
    each = ", ".join(
        f"#{w['index']} {w.get('rollouts', '?')} rollouts {w.get('peak_rss_mib', '?')} MB"
        if not w.get("lost")
        else f"#{w['index']} lost"
        for w in report["workers"]
    )
    lost = f"; {len(report['lost'])} died, {report['requeued']} rollout(s) re-run" if report["lost"] else ""
    console.print(
        f"{report['executor']} workers: {each}; driver peak {report['driver_peak_rss_mib']} MB{lost}",
        soft_wrap=True,
    )


def _eval_environment(args: argparse.Namespace) -> Any:
    """The environment `rubric eval` runs: from the command line, or from --resume DIR's metadata."""
    _check_counts(args)
    if args.resume and (args.env is None or args.model is None):
        _from_recorded_run(args)
    elif args.env is None or args.model is None:
        raise CliError("the following arguments are required: ENV and -m/--model (or --resume DIR)")
    env_args = _json_arg(args.env_args, "-a/--env-args")
    if args.mcp:  # recorded with the environment's arguments, so workers and resumes get them too
        env_args["mcp_servers"] = [*env_args.get("mcp_servers", []), *args.mcp]
    env = _load_env(args.env, env_args)
    if args.max_turns is not None:
        env.max_turns = args.max_turns
    return env


def _eval(args: argparse.Namespace) -> int:
    from harness.aio import run_sync
    from harness.errors import ConfigError, EndpointError, ResultsError
    from harness.evaluation import evaluate
    from harness.executors.workers import WorkerError

    env = _eval_environment(args)
    sampling = _sampling(args)
    _check_planned(env, args)
    output_dir, resume = _output_dir(args, env.name or args.env)
    args.run_dir = output_dir  # for the Ctrl-C message
    if resume:
        _warn_if_env_changed(output_dir, env)
        if args.retry_errors:
            _drop_errored(output_dir)
    elif args.retry_errors:
        raise CliError(
            "--retry-errors re-runs the errored rollouts of an earlier run: use it with --resume DIR"
        )

    with ExitStack() as stack:
        client = _client(stack, args, env)
        try:
            results = run_sync(
                evaluate(
                    env,
                    client,
                    num_examples=args.num_examples,
                    rollouts_per_example=args.rollouts_per_example,
                    concurrency=args.concurrency,
                    output_dir=output_dir,
                    resume=resume,
                    progress=not args.no_progress,
                    seed=args.seed,
                    split=args.split,
                    sampling=sampling or None,
                    shard=args.shard,
                    workers=args.workers,
                    executor="ray" if args.ray is not None else "local",
                    ray_address=args.ray or None,
                )
            )
        except FileExistsError as exc:
            raise CliError(str(exc)) from exc
        except (ConfigError, WorkerError) as exc:  # bad --workers/--ray, or a worker could not start
            raise CliError(str(exc)) from exc
        except EndpointError as exc:  # the endpoint refused the first requests: stopped early
            raise CliError(str(exc)) from exc
        except ValueError as exc:
            # A settings mismatch on resume, or another writer holding the directory: one
            # line, each difference separated by "; ".
            if resume or isinstance(exc, ResultsError):
                raise CliError(
                    "; ".join(line.strip().rstrip(":") for line in str(exc).splitlines() if line.strip())
                ) from exc
            raise
        finally:
            run_sync(client.aclose())
    errors = _print_eval(results, output_dir)
    return _error_rate_exit(errors, results.summary.num_rollouts, args.max_error_rate)


def _client(stack: ExitStack, args: argparse.Namespace, env: Any):
    """The endpoint client `rubric eval` talks to (starting the scripted endpoint if asked)."""
    from harness.client import Client
    from harness.scripted.endpoint import SCRIPTED_PREFIX, ScriptedEndpoint, scripted_policy

    base_url: str | None
    if args.model.startswith(SCRIPTED_PREFIX):
        # In its own process, so the server does not share the GIL with the harness it serves.
        endpoint = ScriptedEndpoint(scripted_policy(env, args.model), process=True)
        base_url = stack.enter_context(endpoint).base_url
        api_key: str | None = "scripted"
    else:
        base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
        api_key = _resolve_key(args, base_url)
        _check_reachable(base_url or "https://api.openai.com/v1")
    return Client(
        args.model,
        base_url=base_url,
        api_key=api_key,
        max_concurrency=args.concurrency,
        max_retries=args.max_retries,
        timeout=args.timeout,
        transport=args.transport,
    )


def _print_eval(results: Any, output_dir: Path) -> int:
    """Print the summary and where the results are; returns how many rollouts errored."""
    console = _console()
    console.print(results)
    _print_workers(console, results.metadata)
    console.print(f"Results written to [bold]{output_dir}[/bold]", soft_wrap=True)
    errors = results.summary.errors
    if errors:
        console.print(
            f"[yellow]{errors} rollout(s) ended with an error; see them with "
            f"`rubric view {output_dir} --errors`[/yellow]",
            soft_wrap=True,
        )
    return int(errors or 0)


def _error_rate_exit(errors: int, rollouts: int, limit: float | None) -> int:
    """1 when too many rollouts errored: more than `limit` of them, or (no limit) all of them."""
    too_many = errors > limit * rollouts if limit is not None else rollouts > 0 and errors == rollouts
    if not too_many:
        return 0
    allowed = f"more than --max-error-rate {limit:g}" if limit is not None else "every rollout"
    print(f"rubric eval: error: {errors} of {rollouts} rollouts errored ({allowed})", file=sys.stderr)
    return 1


def _warn_if_env_changed(run: Path, env: Any) -> None:
    """On --resume: say so when the environment's name, distribution/version or source hash changed."""
    from envs.provenance import changes
    from harness.results.storage import read_metadata, section
    from harness.text import escape_control

    try:
        saved = read_metadata(run) or {}
    except (OSError, RubricError):
        return  # the resume itself reports an unreadable folder
    names = (section(saved, "env").get("name"), env.name)
    change = changes(saved.get("provenance"), env.provenance, names=names)
    if change:
        print(f"rubric eval: warning: {escape_control(change)}", file=sys.stderr)


def _print_provenance(metadata: Any) -> None:
    from envs.provenance import describe
    from harness.text import escape_control

    if (
        isinstance(metadata, dict) and "provenance" in metadata
    ):  # runs from before it was recorded say nothing
        print(f"environment: {escape_control(describe(metadata['provenance']))}")


# ---------------------------------------------------------------------------------------------
# rubric view / score / list / endpoint


def _load_run(path: str):
    from harness.results.eval_results import load_results

    if not Path(path).exists():
        raise CliError(
            f"no results directory at {path}; pass the directory `rubric eval` wrote (see its last line)"
        )
    try:
        return load_results(path)
    except FileNotFoundError as exc:
        raise CliError(f"{path} holds no results ({exc}); pass a directory written by `rubric eval`") from exc


def _drop_errored(folder: Path) -> None:
    """--retry-errors: take the errored rollouts out of DIR/results.jsonl, so the resume runs them again."""
    from harness.results.storage import RESULTS_FILE, RunLock, iter_rollouts, write_atomic

    results = folder / RESULTS_FILE
    if not results.exists():
        return
    lock = RunLock(folder)
    try:
        lock.acquire()  # refused while another run writes there
        kept = [r for r in iter_rollouts(results, repair=True) if r.error is None]
        write_atomic(results, b"".join(r.model_dump_json().encode() + b"\n" for r in kept))
    except RubricError as exc:
        raise CliError(str(exc)) from exc
    finally:
        lock.release()


def _newest_rescored(folder: Path) -> Path:
    """The latest `rubric score` output in a run folder (`rubric view DIR --rescored`)."""
    found = sorted(folder.glob("results.rescored-*.jsonl"))
    if not found:
        raise CliError(
            f"{folder} has no re-scored results (results.rescored-*.jsonl); run rubric score {folder} first"
        )
    return found[-1]


def _view_html(args: argparse.Namespace, results: Any) -> int:
    from harness.views.report import write_report

    other = _load_run(args.other) if args.other else None
    if args.html:
        out = Path(args.html)
    elif other is None:  # a results file (a re-scored copy) gets its own report beside it
        source = Path(args.dir)
        out = source.with_suffix(".html") if source.is_file() else source / "report.html"
    else:
        out = Path(f"compare--{_slug(Path(args.dir).name)}--{_slug(Path(args.other).name)}.html")
    path = write_report(results, out, other=other)
    print(f"wrote {path} ({path.stat().st_size:,} bytes); open it in a browser")
    return 0


def _view_comparison(console: Any, args: argparse.Namespace, results: Any) -> int:
    from harness.results.compare import compare
    from harness.views.terminal import render_comparison

    if args.rollout or args.worst or args.best or args.errors:
        raise CliError("--rollout/--worst/--best/--errors pick rollouts of one run: view each run on its own")
    console.print(render_comparison(compare(results, _load_run(args.other))))
    console.print(
        f"transcripts side by side: rubric view {shlex.quote(args.dir)} {shlex.quote(args.other)} --html"
    )
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from harness.views.terminal import render_rollout, select_rollouts

    for flag, value in (("--worst", args.worst), ("--best", args.best)):
        if value is not None and value < 1:
            raise CliError(f"{flag} must be a count of at least 1, got {value}")
    if args.rescored:
        args.dir = str(_newest_rescored(Path(args.dir)))
    results = _load_run(args.dir)
    if args.html is not None:
        return _view_html(args, results)
    console = _console()
    if args.other:
        return _view_comparison(console, args, results)
    console.print(results)
    _print_provenance(results.metadata)
    try:
        chosen = select_rollouts(
            list(results.rollouts),
            rollout_id=args.rollout,
            worst=args.worst,
            best=args.best,
            errors=args.errors,
        )
    except KeyError as exc:
        raise CliError(exc.args[0]) from exc
    order = list(results.summary.node_means)  # tree order, as the summary lists the nodes
    for rollout in chosen:
        console.rule()
        console.print(render_rollout(rollout, order))
    return 0


def _recorded_env(env_meta: dict[str, Any], directory: str) -> str:
    """The installed environment DIR/metadata.json names; paths and module:function are refused."""
    from envs.registry import recorded_environment

    try:
        spec = recorded_environment(
            env_meta, f"{directory}/metadata.json", command=f"rubric score {shlex.quote(directory)}"
        )
    except LookupError as exc:
        raise CliError(str(exc)) from exc
    print(f"using the installed environment {spec!r} named in {directory}/metadata.json", file=sys.stderr)
    return spec


def _recorded_args(recorded: Any, directory: str, spec: str) -> dict[str, Any]:
    """The environment arguments a results folder records, used only when the user agrees:
    asked at a terminal, refused otherwise (with the -a to type). A folder is data."""
    if not recorded:
        return {}
    if not isinstance(recorded, dict):
        raise CliError(
            f"{directory}/metadata.json records load_kwargs that are not an object; pass -a '{{...}}'"
        )
    typed = json.dumps(recorded, ensure_ascii=False)
    where = f"{directory}/metadata.json records these arguments for {spec!r}: {typed}"
    if not sys.stdin.isatty():
        raise CliError(
            f"{where}; a results folder's arguments are used only if you pass them: -a {shlex.quote(typed)} "
            f"(or -a '{{}}' for none)"
        )
    _say(f"{where}", file=sys.stderr)
    answer = input("use them? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise CliError("not using the recorded arguments; pass -a '{...}' with the ones you want")
    return dict(recorded)


def cmd_score(args: argparse.Namespace) -> int:
    from harness.results.rescoring import rescore

    results = _load_run(args.dir)
    metadata = results.metadata or {}
    env_meta = metadata.get("env", {}) if isinstance(metadata, dict) else {}
    spec = args.env or _recorded_env(env_meta, args.dir)
    if args.env_args:
        env_args = _json_arg(args.env_args, "-a/--env-args")
    else:
        env_args = _recorded_args(env_meta.get("load_kwargs"), args.dir, spec)
    env = _load_env(spec, env_args)
    out = (
        Path(args.output)
        if args.output
        else Path(args.dir) / f"results.rescored-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    )
    if out.exists():
        raise CliError(f"{out} already exists; choose another -o/--output")

    new = rescore(results, env, concurrency=args.concurrency)
    new.metadata.update(rescored_from=str(args.dir), rescored_with=spec)
    new.to_jsonl(out)
    console = _console()
    console.print(new)
    old_mean, new_mean = results.summary.mean_reward, new.summary.mean_reward
    console.print(
        f"mean reward {_fmt(old_mean)} -> {_fmt(new_mean)}; re-scored rollouts written to [bold]{out}[/bold]",
        soft_wrap=True,
    )
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from harness.results.sharding import merge_results

    try:
        report = merge_results(args.output, args.dirs)
    except (RubricError, FileExistsError, NotADirectoryError) as exc:
        raise CliError(str(exc)) from exc
    console = _console()
    console.print(_load_run(str(report.output_dir)))
    console.print(
        f"merged {len(report.shards)} shard(s) ({', '.join(report.shards)}): {report.rollouts} rollouts "
        f"written to [bold]{report.output_dir}[/bold]",
        soft_wrap=True,
    )
    if report.status != "completed":
        gaps = []
        if report.missing_shards:
            gaps.append(f"shard(s) {', '.join(map(str, report.missing_shards))} not given")
        if report.missing:
            shown = ", ".join(f"{e}:{i}" for e, i in report.missing[:8])
            more = f" and {len(report.missing) - 8} more" if len(report.missing) > 8 else ""
            gaps.append(f"{len(report.missing)} rollout(s) missing ({shown}{more})")
        console.print(
            f"[yellow]incomplete: {'; '.join(gaps)}; run the original command without --shard and with "
            f"--resume {report.output_dir} to fill the gaps[/yellow]",
            soft_wrap=True,
        )
    return 0


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def cmd_list(args: argparse.Namespace) -> int:
    from rich.markdown import Markdown
    from rich.table import Table

    from envs.hub.install import installed_environments
    from harness.text import escape_control, safe_text

    found = installed_environments()
    table = Table(title="installed environments")
    for column in ("name", "version", "distribution", "description"):
        table.add_column(column)
    for env in found:  # a package's strings: control characters escaped, never read as rich markup
        # Descriptions are Markdown (`code`, **bold**): rendered, without hyperlinks (no OSC 8).
        description = Markdown(escape_control(env.description), hyperlinks=False)
        table.add_row(*(safe_text(v) for v in (env.name, env.version, env.distribution)), description)
    _console().print(table if found else "no environments installed (group rubric.environments)")
    return 0


def cmd_endpoint(args: argparse.Namespace) -> int:
    from harness.scripted.endpoint import ScriptedEndpoint, scripted_policy

    env_spec, policy_name = args.policy.split(":", 1) if ":" in args.policy else (args.env, args.policy)
    if not env_spec:
        raise CliError(
            "say whose policy to serve: --policy ENV:POLICY (e.g. gsm8k:oracle) or --env ENV --policy POLICY"
        )
    env = _load_env(env_spec, _json_arg(args.env_args, "-a/--env-args"))
    endpoint = ScriptedEndpoint(
        scripted_policy(env, policy_name),
        host=args.host,
        port=args.port,
        latency=args.latency,
        rate_429=args.rate_429,
        rate_500=args.rate_500,
    )

    def announce(url: str) -> None:
        print(f"serving {env_spec}:{policy_name} at {url} (Ctrl-C stops)", flush=True)

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a standalone server stops
        endpoint.serve_forever(ready=announce)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    import asyncio

    from envs.mcp_serve import HOST, PATH, aserve_mcp

    env = _load_env(args.env, _json_arg(args.env_args, "-a/--env-args"))
    if args.port is not None:
        if not 0 < args.port < 65536:
            raise CliError(f"--port must be a port number 1-65535, got {args.port}")
        # stderr: over stdio, stdout belongs to the protocol.
        print(
            f"serving {env.name!r} tools over MCP at http://{HOST}:{args.port}{PATH} (Ctrl-C stops)",
            file=sys.stderr,
        )
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a standalone server stops
        asyncio.run(aserve_mcp(env, port=args.port))
    return 0


# ---------------------------------------------------------------------------------------------
# environment packages and the hub: rubric init / check (library: envs.hub)


def _hub_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call an envs.hub function; its HubError is the one line the user sees."""
    from envs.hub import HubError

    try:
        return fn(*args, **kwargs)
    except HubError as exc:
        raise CliError(str(exc)) from exc


def cmd_init(args: argparse.Namespace) -> int:
    from envs.hub import init_package

    root = _hub_call(init_package, args.name, args.dir, args.kind)
    where = str(root) if root.is_absolute() else f"./{root}"  # a path, not an installed name
    print(f"Created {where} ({args.kind}). Try it: rubric eval {where} -m scripted:demo -n 3")
    print(f"Then: rubric check {where}; rubric build {where}; rubric push {where} --hub URL")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from envs.hub import check_package

    report = _hub_call(check_package, args.dir)
    print(report.text())
    failed = sum(not r.ok for r in report.results)
    print(f"{len(report.results) - failed} passed, {failed} failed")
    return 0 if report.ok else 1


def cmd_build(args: argparse.Namespace) -> int:
    from envs.hub.build import build_package

    result = _hub_call(build_package, args.dir, isolation=not args.no_isolation)
    for path in result.files:
        print(f"built {path}")
    print(
        f"checked on rubric-rl {', '.join(result.record.compatibility.get('rubric-rl', []))}; next: rubric push"
    )
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from envs.hub.publish import push_package

    result = _hub_call(push_package, args.dir, hub=args.hub, bump=args.bump, isolation=not args.no_isolation)
    print(f"pushed {result.name} {result.version} to {result.hub.url} ({len(result.files)} files)")
    print(f"install it with: rubric install {result.name}=={result.version} --hub {result.hub.url}")
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    from envs.hub.install import install

    env = _hub_call(install, args.spec, hub=args.hub)
    print(f"installed {env.distribution} {env.version}: environment {env.name!r} ({env.entry_point})")
    print(f"run it: rubric eval {env.name} -m MODEL -n 5")
    return 0


def _say(text: str, file: Any = None) -> None:
    """Print text that holds strings from a package or an index: their control, bidi and
    invisible characters shown as escapes (the terminal sanitiser model text goes through)."""
    from harness.text import escape_control

    print(escape_control(text), file=file)


def _print_entry(entry: Any, full: bool) -> None:
    if entry.problem:  # one line naming the package; the listing goes on
        _say(f"note: {entry.name}: card skipped: {entry.problem}", file=sys.stderr)
    _say(f"{entry.name} {entry.version}  (versions: {', '.join(entry.versions)})")
    _say(f"  {entry.description}")
    _say(f"  tags: {', '.join(entry.tags) or '-'}")
    compat = "; ".join(f"{k} {', '.join(v)}" for k, v in entry.compatibility.items())
    _say(f"  checked on: {compat or 'unknown (no valid rubric_card.json)'}")
    if full:
        from envs.hub.card import split_front_matter

        card = (entry.record or {}).get("card") or {}
        needs = card.get("needs") or {}
        wanted = [*needs.get("api_keys", []), *(k for k in ("sandbox", "network") if needs.get(k))]
        _say(
            f"  kind: {card.get('kind', '?')}; reward range {card.get('reward_range', '?')}; "
            f"license {card.get('license', '?')}; needs {', '.join(wanted) or 'nothing else'}"
        )
        for node in (entry.record or {}).get("rubric", []):
            extra = ", ".join(f"{k}={v}" for k, v in node.items() if k not in ("path", "type"))
            _say(f"  rubric {node['path'] or '(root)'}: {node['type']}{f' ({extra})' if extra else ''}")
        print()
        _say(split_front_matter(entry.readme)[1].strip())


def cmd_hub(args: argparse.Namespace) -> int:
    from envs.hub.index import info, search

    if args.hub_command == "info":
        _print_entry(_hub_call(info, args.name, hub=args.hub), full=True)
        return 0
    entries = _hub_call(search, args.query, tag=args.tag, hub=args.hub)
    for entry in entries:
        _print_entry(entry, full=False)
    if not entries:
        print("no environment packages match")
    return 0


def _add_hub_commands(sub: Any) -> None:
    """`rubric init/check/build/push/install` and `rubric hub search/info`: thin wrappers over envs.hub."""
    hub_help = "index URL (default: $RUBRIC_HUB_URL), e.g. http://127.0.0.1:8080"
    init = sub.add_parser("init", help="write a new environment package, ready to eval, check and push")
    init.add_argument("name", metavar="NAME", help="environment/package name, e.g. my-env")
    init.add_argument("--dir", default=".", help="folder to create NAME/ in (default: here)")
    init.add_argument(
        "--kind",
        default="single",
        choices=["single", "tool", "multi", "mcp"],
        help="single-turn, tool calls, multi-turn, or tool calls to an MCP server shipped in the package",
    )
    init.set_defaults(func=cmd_init)
    check = sub.add_parser("check", help="run the checks a hub entry must pass (non-zero exit on failure)")
    check.add_argument("dir", metavar="DIR", nargs="?", default=".")
    check.set_defaults(func=cmd_check)
    build = sub.add_parser("build", help="check, then build sdist and wheel (with the card) into DIR/dist")
    push = sub.add_parser("push", help="upload DIR/dist's files for the current version to the hub")
    for parser in (build, push):
        parser.add_argument("dir", metavar="DIR", nargs="?", default=".")
        parser.add_argument(
            "--no-isolation", action="store_true", help="build with the backend installed here"
        )
    build.set_defaults(func=cmd_build)
    push.add_argument("--hub", help=hub_help)
    push.add_argument(
        "--bump", choices=["patch", "minor", "major"], help="raise the version and rebuild first"
    )
    push.set_defaults(func=cmd_push)
    inst = sub.add_parser("install", help="install an environment from the hub into this Python")
    inst.add_argument("spec", metavar="NAME[==VERSION]")
    inst.add_argument("--hub", help=hub_help)
    inst.set_defaults(func=cmd_install)
    hub = sub.add_parser("hub", help="search the hub and show an environment's card")
    hub_sub = hub.add_subparsers(dest="hub_command", metavar="COMMAND", required=True)
    search = hub_sub.add_parser("search", help="environment packages on the hub (name, versions, card)")
    search.add_argument("query", metavar="QUERY", nargs="?")
    search.add_argument("--tag", help="only entries with this tag")
    info = hub_sub.add_parser("info", help="one environment: versions, card, rubric tree, compatibility")
    info.add_argument("name", metavar="NAME")
    for parser in (search, info):
        parser.add_argument("--hub", help=hub_help)
    hub.set_defaults(func=cmd_hub)
    for parser in (search, info):  # build_parser adds --debug to top-level commands only
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)


# ---------------------------------------------------------------------------------------------
# argument parsing


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rubric",
        description="Write rewards and rubrics, bundle them into environments, and evaluate "
        "them against any OpenAI-compatible endpoint.",
    )
    parser.add_argument("--version", action="version", version=f"rubric {_version()}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_eval(sub)
    _add_results_commands(sub)
    _add_endpoint(sub)
    _add_hub_commands(sub)
    for command in sub.choices.values():  # --debug also after the command name
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    return parser


def _add_eval(sub: Any) -> None:
    ev = sub.add_parser("eval", help="run an environment against a model and score every rollout")
    ev.add_argument(
        "env",
        metavar="ENV",
        nargs="?",
        help="registered name, path to a .py file, or module:function (with --resume DIR: the run's own)",
    )
    ev.add_argument("-a", "--env-args", help="JSON object passed to load_environment")
    _add_eval_endpoint(ev.add_argument_group("model and endpoint"))
    _add_eval_sampling(ev.add_argument_group("what to run"))
    _add_eval_run(ev.add_argument_group("results, failures and scale"))
    ev.set_defaults(func=cmd_eval)


def _add_eval_endpoint(group: Any) -> None:
    group.add_argument(
        "-m",
        "--model",
        help="model name at the endpoint, or scripted:POLICY for the built-in offline endpoint "
        "(with --resume DIR: the run's own by default)",
    )
    group.add_argument(
        "-b", "--base-url", help="OpenAI-compatible base URL (default: $OPENAI_BASE_URL or OpenAI)"
    )
    group.add_argument(
        "-k", "--api-key-var", default="OPENAI_API_KEY", help="name of the env var holding the key"
    )
    group.add_argument(
        "-c", "--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="rollouts (and requests) in flight"
    )
    group.add_argument("--max-retries", type=int, default=5)
    group.add_argument("--timeout", type=float, default=120.0, help="seconds per request, the whole of it")
    group.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default=DEFAULT_TRANSPORT,
        help="HTTP client for the endpoint: aiohttp (lean, default) or the openai SDK; same requests and results",
    )


def _add_eval_sampling(group: Any) -> None:
    group.add_argument("-n", "--num-examples", type=int, help="examples to run (default: all)")
    group.add_argument("-r", "--rollouts-per-example", type=int, default=1)
    group.add_argument("--split", default="eval", choices=["eval", "train"])
    group.add_argument("--seed", type=int, help="shuffle examples with this seed")
    group.add_argument("--max-turns", type=int, help="override the environment's max_turns")
    group.add_argument(
        "--mcp",
        action="append",
        metavar="CMD|URL",
        help="add an MCP server's tools to the environment: a stdio command line ('npx -y @x/server') "
        "or a streamable-HTTP URL; repeatable",
    )
    group.add_argument("-t", "--max-tokens", type=int)
    group.add_argument("-T", "--temperature", type=float)
    group.add_argument("-S", "--sampling", help="JSON object of extra sampling arguments")


def _add_eval_run(group: Any) -> None:
    group.add_argument("-o", "--output-dir", help="results directory (default runs/<env>--<model>--<time>)")
    group.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR")
    group.add_argument(
        "--retry-errors",
        action="store_true",
        help="with --resume: run the rollouts that errored again (their rows are replaced)",
    )
    group.add_argument(
        "--max-error-rate",
        type=float,
        metavar="F",
        help="exit non-zero when more than this share (0-1) of rollouts errored (default: when all did)",
    )
    group.add_argument("--no-progress", action="store_true")
    group.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="run rollouts in N worker processes (-c is the total across them)",
    )
    group.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run the workers as Ray actors on the cluster at ADDRESS (no ADDRESS: a local Ray); "
        "needs pip install 'rubric-rl[ray]'",
    )
    group.add_argument(
        "--shard",
        metavar="I/N",
        help="run only slice I of N (from 0) of the examples; join with `rubric merge`",
    )


def _add_results_commands(sub: Any) -> None:
    vw = sub.add_parser("view", help="show a run's summary and whole conversations, or an HTML report")
    vw.add_argument("dir", metavar="DIR")
    vw.add_argument(
        "other",
        metavar="OTHER",
        nargs="?",
        help="a second run to compare with DIR (B − A; add --html for a page with the transcripts)",
    )
    vw.add_argument(
        "--html",
        nargs="?",
        const="",
        metavar="OUT",
        help="write a self-contained HTML report (default DIR/report.html; two runs: ./compare--A--B.html)",
    )
    vw.add_argument("--rollout", metavar="ID", help="example id, or EXAMPLE:ROLLOUT_INDEX")
    vw.add_argument("--worst", type=int, metavar="N")
    vw.add_argument("--best", type=int, metavar="N")
    vw.add_argument("--errors", action="store_true", help="show rollouts that errored or have unscored nodes")
    vw.add_argument(
        "--rescored",
        action="store_true",
        help="show the newest re-scored results of DIR (rubric score's results.rescored-*.jsonl)",
    )
    vw.set_defaults(func=cmd_view)

    sc = sub.add_parser("score", help="re-score saved rollouts with the environment's current rubric")
    sc.add_argument("dir", metavar="DIR")
    sc.add_argument("env", metavar="ENV", nargs="?", help="default: the environment recorded in DIR")
    sc.add_argument("-a", "--env-args", help="JSON object passed to load_environment")
    sc.add_argument("-o", "--output", help="new results file (default DIR/results.rescored-<time>.jsonl)")
    sc.add_argument("-c", "--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    sc.set_defaults(func=cmd_score)

    mg = sub.add_parser("merge", help="merge the result directories of a sharded run into one")
    mg.add_argument("output", metavar="OUT", help="new directory for the merged run")
    mg.add_argument("dirs", metavar="DIR", nargs="+", help="the shards' result directories")
    mg.set_defaults(func=cmd_merge)

    ls = sub.add_parser("list", help="list installed environments")
    ls.set_defaults(func=cmd_list)


def _add_endpoint(sub: Any) -> None:
    ep = sub.add_parser("endpoint", help="serve the scripted OpenAI-compatible endpoint")
    ep.add_argument("--policy", required=True, help="ENV:POLICY, e.g. gsm8k:oracle (or POLICY with --env)")
    ep.add_argument("--env", help="environment whose policy to serve")
    ep.add_argument("-a", "--env-args", help="JSON object passed to load_environment")
    ep.add_argument("--host", default="127.0.0.1")
    ep.add_argument("--port", type=int, default=8000)
    ep.add_argument("--latency", type=float, default=0.0, help="seconds added to every response")
    ep.add_argument("--rate-429", type=float, default=0.0)
    ep.add_argument("--rate-500", type=float, default=0.0)
    ep.set_defaults(func=cmd_endpoint)

    mc = sub.add_parser(
        "mcp", help="serve an environment's Python tools as an MCP server (stdio, or HTTP with --port)"
    )
    mc.add_argument("env", metavar="ENV", help="installed name, path to a .py file, or module:function")
    mc.add_argument("-a", "--env-args", help="JSON object passed to load_environment")
    mc.add_argument("--port", type=int, help="serve streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio")
    mc.set_defaults(func=cmd_mcp)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so Python's flush at exit does not fail on the closed pipe."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except RubricError as exc:  # every error a user can cause: one line, the fix in it
        if args.debug:
            raise
        # Errors quote files, packages and servers: their control characters are shown escaped.
        _say(f"rubric {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, CliError) else 1
    except KeyboardInterrupt:
        print(f"rubric {args.command}: interrupted; finished rollouts are kept", file=sys.stderr)
        run_dir = getattr(args, "run_dir", None)  # set by rubric eval once it knows its directory
        if run_dir is not None:
            _say(f"continue with: rubric eval --resume {shlex.quote(str(run_dir))}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`rubric hub info X | head`): stop quietly
        _silence_stdout()
        return 141  # 128 + SIGPIPE, as a Unix tool killed by it
    except Exception as exc:  # an unexpected failure still prints one line unless --debug
        if args.debug:
            raise
        _say(
            f"rubric {args.command}: error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
