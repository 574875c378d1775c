"""`rubric check`: the checks an environment package must pass before it goes on a hub.

Each check is one line in the report (PASS/FAIL, name, what it found or how to fix it). The
package is imported from its directory, as `rubric eval ./DIR` does, so nothing needs to be
installed first. Later checks that depend on an earlier failure are reported as skipped.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envs import _dataset as ds_utils
from envs._environment import Environment
from envs._project import HubError, Project
from envs._registry import load_environment
from envs.hub._card import Card, parse_card
from harness._core.aio import run_sync
from harness._core.types import Rollout

#: Examples each scripted policy runs on.
POLICY_EXAMPLES = 3
#: What each fixture group must score: gold 1, bad 0, unscored NaN (e.g. an unparseable judge reply).
FIXTURE_TARGETS = {"gold": 1.0, "bad": 0.0, "unscored": math.nan}


@dataclass(frozen=True)
class CheckResult:
    """One check: its name, whether it passed, and what it found (or why it failed).

    Attributes:
        name: The check's name.
        ok: Whether it passed.
        detail: What it found, or why it failed.
    """

    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


@dataclass
class CheckReport:
    """Every check run on one package.

    Attributes:
        directory: The package's folder.
        results: Each check, in the order run.
        env: The environment built (None if it did not build).
        card: The README's card (None if it did not parse).
        project: The package's pyproject (None if it did not parse).
    """

    directory: Path
    results: list[CheckResult] = field(default_factory=list)
    env: Environment | None = None
    card: Card | None = None
    project: Project | None = None

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return bool(self.results) and all(r.ok for r in self.results)

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.results.append(CheckResult(name, ok, detail))
        return ok

    def built(self) -> Environment:
        """The environment built; raises HubError when it did not build."""
        if self.env is None:
            raise HubError("the environment did not build; see the load_environment check")
        return self.env

    def text(self) -> str:
        """One line per check."""
        return "\n".join(r.line() for r in self.results)


def _check_metadata(report: CheckReport) -> None:
    project = Project.load(report.directory)
    name, version_ = project.name, project.version
    requirements = []
    for raw in project.table.get("dependencies") or []:
        try:
            requirements.append(Requirement(str(raw)))
        except InvalidRequirement as exc:
            raise HubError(f"dependency {raw!r} is not a valid requirement ({exc})") from None
    names: dict[str, Requirement] = {canonicalize_name(r.name): r for r in requirements}
    if "rubric" in names:
        raise HubError("depends on 'rubric', which on PyPI is another project; depend on 'rubric-rl' instead")
    if "rubric-rl" not in names:
        raise HubError(
            "does not depend on rubric-rl; add it to [project] dependencies, e.g. 'rubric-rl>=0.1,<0.2'"
        )
    report.project = project
    report.add("metadata", True, f"{name.distribution} {version_}, requires {names['rubric-rl']}")


def _check_entry_point(report: CheckReport) -> None:
    assert report.project is not None
    env_name, target = report.project.entry_point()
    report.project.resolve_entry_point()
    report.add("entry point", True, f"{env_name} = {target} resolves")


def _check_builds(report: CheckReport) -> None:
    try:
        report.env = load_environment(str(report.directory))
    except Exception as exc:
        raise HubError(f"load_environment() with its defaults raised {type(exc).__name__}: {exc}") from None
    report.add("load_environment", True, f"built {type(report.env).__name__} {report.env.name!r}")


def _check_dataset(report: CheckReport) -> None:
    env = report.built()
    data = env.get_dataset("eval")
    if len(data) == 0:
        raise HubError("the eval dataset is empty; give load_environment's dataset at least one row")
    report.add("dataset", True, f"{len(data)} eval examples")
    required = set(getattr(env.rubric, "required_columns", set)())
    available = set(data.column_names) | ds_utils.info_keys(data)
    missing = sorted(required - available)
    if missing:
        raise HubError(
            f"the rubric needs column(s) {missing} the dataset lacks; available: {sorted(available)}"
        )
    report.add("columns", True, f"rubric needs {sorted(required) or 'no extra columns'}; all present")


async def _check_policies(report: CheckReport) -> None:
    from harness._endpoint.client import Client
    from harness.scripted._endpoint import ScriptedEndpoint

    env = report.built()
    policies: Mapping[str, Any] = getattr(env, "scripted_policies", None) or {}
    if not policies:
        report.add("scripted policies", True, "none declared (env.scripted_policies = {'demo': fn} adds one)")
        return
    for name, policy in sorted(policies.items()):
        with ScriptedEndpoint(policy) as endpoint:
            client = Client(f"scripted:{name}", base_url=endpoint.base_url, max_retries=0)
            try:
                results = await env.aevaluate(client, num_examples=POLICY_EXAMPLES, progress=False)
            finally:
                await client.aclose()
        bad = [r for r in results.rollouts if r.error or not math.isfinite(r.reward)]
        rewards = [r.reward for r in results.rollouts]
        if bad:
            first = bad[0]
            report.add(
                f"policy {name}",
                False,
                f"{len(bad)} of {len(rewards)} rollouts failed or scored NaN; first: "
                f"{first.error or first.score_errors or 'reward NaN'}",
            )
        else:
            report.add(f"policy {name}", True, f"rewards {', '.join(f'{r:.3f}' for r in rewards)}")


def _check_card(report: CheckReport) -> None:
    assert report.project is not None
    readme = report.directory / "README.md"
    if not readme.is_file():
        raise HubError("no README.md; the card is README.md with front matter (see `rubric init`)")
    card = parse_card(readme.read_text(encoding="utf-8"))
    if canonicalize_name(card.name) != report.project.name.distribution:
        raise HubError(
            f"card name {card.name!r} differs from the package name {report.project.name.distribution!r}; "
            "make them the same"
        )
    report.card = card
    report.add("card", True, f"{card.kind}, reward range {list(card.reward_range)}, tags {card.tags}")


async def _check_fixtures(report: CheckReport) -> None:
    fixtures: Mapping[str, Any] = getattr(report.env, "reward_fixtures", None) or {}
    unknown = sorted(set(fixtures) - set(FIXTURE_TARGETS))
    if unknown:
        raise HubError(f"reward_fixtures has unknown group(s) {unknown}; use {sorted(FIXTURE_TARGETS)}")
    if not fixtures:
        report.add(
            "reward fixtures", True, "none declared (env.reward_fixtures = {'gold': [...], 'bad': [...]})"
        )
        return
    counted = 0
    for group, target in FIXTURE_TARGETS.items():
        for position, sample in enumerate(fixtures.get(group) or []):
            rollout = Rollout.model_validate(sample)
            await report.built().score(rollout)
            got = rollout.reward
            good = math.isnan(got) if math.isnan(target) else math.isclose(got, target, abs_tol=1e-9)
            if not good:
                why = f" ({rollout.score_errors})" if rollout.score_errors else ""
                raise HubError(f"{group} fixture {position} scored {got} instead of {target}{why}")
            counted += 1
    report.add("reward fixtures", True, f"{counted} fixture(s) scored as declared")


# (name, check, whether later checks need it to pass)
_STEPS: list[tuple[str, Callable[[CheckReport], Any], bool]] = [
    ("metadata", _check_metadata, True),
    ("entry point", _check_entry_point, True),
    ("load_environment", _check_builds, True),
    ("dataset", _check_dataset, True),
    ("scripted policies", _check_policies, False),
    ("card", _check_card, False),
    ("reward fixtures", _check_fixtures, False),
]


async def acheck_package(directory: str | Path = ".") -> CheckReport:
    """Run the hub checks on the package in `directory`; never raises for a failing check.

    Checks, in order: package metadata, entry point, `load_environment()` with defaults,
    dataset not empty, rubric columns present, each scripted policy on a few examples
    (finite rewards), the card's front matter, reward fixtures (`gold` score 1, `bad` 0,
    `unscored` NaN). A failure stops the checks that depend on it.

    Args:
        directory: The environment package's folder.

    Returns:
        Every check run, and what they built.
    """
    report = CheckReport(directory=Path(directory).resolve())
    if not report.directory.is_dir():
        raise HubError(f"no folder at {directory}; pass an environment package's folder (see `rubric init`)")
    for name, step, essential in _STEPS:
        try:
            result = step(report)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # HubError says the fix; anything else is a bug in the package
            report.add(name, False, str(exc) if isinstance(exc, HubError) else f"{type(exc).__name__}: {exc}")
            if essential:  # the later checks need what this one failed to make
                break
    return report


def check_package(directory: str | Path = ".") -> CheckReport:
    """Synchronous `acheck_package` (works inside a running event loop too).

    Args:
        directory: The environment package's folder.

    Returns:
        Every check run, and what they built.
    """
    return run_sync(acheck_package(directory))


def rubric_version() -> str:
    """The installed rubric-rl version the checks ran on."""
    try:
        return version("rubric-rl")
    except PackageNotFoundError:
        return "0+unknown"


__all__ = ["CheckReport", "CheckResult", "acheck_package", "check_package", "rubric_version"]
