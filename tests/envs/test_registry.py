"""The environment registry: installed entry points, .py files and module:function specs.

The "installed" distribution is a real site-packages layout (a package plus a `*.dist-info`
directory with METADATA and entry_points.txt) on a temporary sys.path entry, which is exactly
what `importlib.metadata` reads after `pip install`, without running pip.
"""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import pytest

from envs import Environment, EnvironmentNotFoundError, list_environments, load_environment

ENV_SOURCE = textwrap.dedent(
    """
    from envs import SingleTurnEnv


    def exact(response: str, answer: str) -> float:
        return float(response.strip() == answer)


    def load_environment(n: int = 2, system_prompt: str = "Be brief.") -> SingleTurnEnv:
        rows = [{"question": f"{i}+{i}?", "answer": str(2 * i)} for i in range(n)]
        return SingleTurnEnv(rows, exact, system_prompt=system_prompt)
    """
)


def install(site: Path, package: str, dist: str, version: str, entry_points: dict[str, str]) -> None:
    """Write `package` and a `dist`-`version`.dist-info declaring `entry_points` into `site`."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(ENV_SOURCE)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[rubric.environments]\n{lines}")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site-packages"
    site.mkdir()
    install(site, "adder_env", "adder-env", "1.2.3", {"adder-env": "adder_env:load_environment"})
    install(site, "module_ep_env", "module-ep-env", "0.1.0", {"module_ep": "module_ep_env"})
    monkeypatch.syspath_prepend(str(site))  # also invalidates importlib's metadata caches
    return site


def test_list_environments_shows_name_distribution_version(site: Path) -> None:
    found = {e.name: e for e in list_environments()}
    assert found["adder-env"].distribution == "adder-env"
    assert found["adder-env"].version == "1.2.3"
    assert found["adder-env"].value == "adder_env:load_environment"
    assert found["module_ep"].distribution == "module-ep-env"


def test_load_by_name_with_kwargs_hyphen_or_underscore(site: Path) -> None:
    env = load_environment("adder-env", n=3)
    assert isinstance(env, Environment) and len(env.get_dataset()) == 3
    assert env.name == "adder-env"
    assert env.load_spec == "adder-env" and env.load_kwargs == {"n": 3}
    assert env.config()["load_kwargs"] == {"n": 3}
    assert load_environment("ADDER_ENV").load_spec == "ADDER_ENV"


def test_entry_point_naming_a_module_uses_its_load_environment(site: Path) -> None:
    assert len(load_environment("module_ep").get_dataset()) == 2


def test_unknown_name_lists_installed(site: Path) -> None:
    with pytest.raises(EnvironmentNotFoundError, match="no environment named 'adder'") as err:
        load_environment("adder")
    assert "adder-env" in str(err.value) and "module_ep" in str(err.value)
    assert isinstance(err.value, LookupError)


def test_unknown_kwarg_lists_accepted(site: Path) -> None:
    with pytest.raises(TypeError, match="does not accept argument") as err:
        load_environment("adder-env", size=3)
    assert "n, system_prompt" in str(err.value)


def test_same_name_from_two_distributions_is_ambiguous(site: Path) -> None:
    install(site, "other_adder", "other-adder", "9.0", {"adder_env": "other_adder:load_environment"})
    with pytest.raises(EnvironmentNotFoundError, match="more than once") as err:
        load_environment("adder-env")
    assert "other-adder" in str(err.value) and "adder-env" in str(err.value)


def test_load_from_py_file(tmp_path: Path) -> None:
    path = tmp_path / "my_env.py"
    path.write_text(ENV_SOURCE)
    env = load_environment(str(path), n=1, system_prompt="Hi")
    assert len(env.get_dataset()) == 1
    assert env.format_prompt(env.get_dataset()[0])[0].content == "Hi"
    assert env.load_spec == str(path) and env.name == "SingleTurnEnv"


def test_py_file_without_load_environment(tmp_path: Path) -> None:
    path = tmp_path / "empty_env.py"
    path.write_text("X = 1\n")
    with pytest.raises(EnvironmentNotFoundError, match="defines no load_environment"):
        load_environment(str(path))


def test_missing_py_file(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentNotFoundError, match="missing.py"):
        load_environment(str(tmp_path / "missing.py"))


def test_module_colon_function(site: Path) -> None:
    env = load_environment("adder_env:load_environment", n=4)
    assert len(env.get_dataset()) == 4 and env.load_spec == "adder_env:load_environment"
    with pytest.raises(EnvironmentNotFoundError, match="no attribute 'nope'"):
        load_environment("adder_env:nope")
    with pytest.raises(EnvironmentNotFoundError, match="no module named 'no_such_module_xyz'"):
        load_environment("no_such_module_xyz:load_environment")


def test_importable_module_with_load_environment_works_by_name(site: Path) -> None:
    (site / "bare_env.py").write_text(ENV_SOURCE)
    importlib.invalidate_caches()
    assert load_environment("bare-env").load_spec == "bare-env"


def test_loader_must_return_an_environment(tmp_path: Path) -> None:
    path = tmp_path / "wrong.py"
    path.write_text("def load_environment():\n    return 42\n")
    with pytest.raises(TypeError, match="returned an object of type int"):
        load_environment(str(path))


def test_spec_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="non-empty string"):
        load_environment("")
