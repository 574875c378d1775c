"""The hub end to end: init, check, build, push to a real pypiserver, then install into a fresh venv.

The hub serves rubric-rl too: the test uploads this project's wheel (built from the working
tree) beside the environment, and the fresh venv installs the environment from the hub alone,
rubric-rl coming with it as its dependency. rubric-rl's own dependencies (openai, datasets,
...) are already in that venv: each is linked from this interpreter's site-packages (its
`.dist-info` a real copy), leaving out rubric-rl itself, so pip finds them installed and never
needs another index or the internet. Every pip call there sees only the local hub (its config
is blanked), runs outside the checkout and without PYTHONPATH: nothing of the tree is on the path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from cli import main
from tests.helpers.hub import HubServer, serve_pypiserver
from tests.helpers.install import build_rubric_wheel

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.hub,
    pytest.mark.install,
    pytest.mark.slow,
]  # many pip installs into a fresh venv
NAME = "e2e-adder"


def _link_dependencies(site: Path) -> None:
    """Give the new venv this interpreter's packages, except rubric-rl's own and the venv's
    own pip and setuptools, without a download: each package's code is a link, and its
    `.dist-info` directory a real copy, so pip and uv alike see it installed (uv does not
    follow a linked `.dist-info`, nor read what a `.pth` file adds). In site-packages itself:
    dill (under `datasets`' fingerprints) pickles modules by reference only from there."""
    own = {entry.name.split("-")[0].lower() for entry in site.glob("*.dist-info")}
    sources = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for source in sources:
        for entry in Path(source).iterdir():
            lowered = entry.name.lower()
            if lowered.startswith(("__editable__", "rubric_rl", "rubric-rl")) or lowered.endswith(".pth"):
                continue
            if lowered.split("-")[0] in own or lowered in own or (site / entry.name).exists():
                continue  # the venv's own pip / setuptools stay
            if entry.name.endswith(".dist-info"):
                shutil.copytree(entry, site / entry.name)
            else:
                (site / entry.name).symlink_to(entry)


@pytest.fixture(scope="module")
def rubric_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_rubric_wheel(tmp_path_factory.mktemp("rubric-rl"))


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv holding rubric-rl's dependencies (linked) but not rubric-rl."""
    target = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
    )
    _link_dependencies(site)
    return target


def _serve_rubric_rl(hub: HubServer, wheel: Path) -> None:
    """Upload rubric-rl's wheel to the hub, as a private index that serves it would have it."""
    upload = [sys.executable, "-m", "twine", "upload", "--non-interactive", "--disable-progress-bar"]
    _run([*upload, "--repository-url", hub.url, "-u", hub.user, "-p", hub.password, str(wheel)])


def _pip_install_from_hub(target: Path, hub: HubServer, *requirements: str) -> str:
    """`pip install REQUIREMENTS` in the fresh venv with the hub as its only index; pip's output."""
    done = subprocess.run(
        [str(target / "bin" / "python"), "-m", "pip", "install", *requirements],
        capture_output=True,
        text=True,
        timeout=300,
        env=_offline_env(hub),
        cwd=target.parent,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=_offline_env(None))
    assert done.returncode == 0, done.stdout + done.stderr


def _offline_env(hub: HubServer | None) -> dict[str, str]:
    dropped = ("PIP_", "UV_", "RUBRIC_HUB", "TWINE_", "PYTHONPATH")  # no checkout on the path
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env["PATH"] = "/usr/bin:/bin"  # no uv unless a test adds it: `rubric install` then uses pip
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", COLUMNS="200")
    env.update(UV_NO_CONFIG="1", PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    if hub is not None:  # pip's only index is the local hub
        env.update(PIP_INDEX_URL=hub.url + "/simple/", UV_INDEX_URL=hub.url + "/simple/")
    return env


def _in_venv(
    target: Path, hub: HubServer, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(target / "bin" / "rubric"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=_offline_env(hub),
        cwd=cwd or target.parent,
    )


def test_init_check_build_push_install_list_eval_search_repush_bump(
    tmp_path: Path,
    fresh_venv: Path,
    rubric_wheel: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serve_pypiserver(tmp_path / "hub") as hub:
        monkeypatch.setenv("RUBRIC_HUB_USER", hub.user)
        monkeypatch.setenv("RUBRIC_HUB_PASSWORD", hub.password)
        monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
        package = tmp_path / NAME
        # 1. init -> check -> build -> push
        assert main(["init", NAME, "--dir", str(tmp_path), "--kind", "tool"]) == 0
        assert main(["check", str(package)]) == 0
        assert main(["build", str(package), "--no-isolation"]) == 0
        assert main(["push", str(package), "--hub", hub.url]) == 0
        assert f"pushed {NAME} 0.1.0 to {hub.url}" in capsys.readouterr().out

        # 2. the fresh venv has no rubric-rl: pip installs NAME from the hub alone, and rubric-rl
        # (NAME's dependency) from the hub too; then rubric install NAME --hub URL from it
        assert not (fresh_venv / "bin" / "rubric").exists()
        _serve_rubric_rl(hub, rubric_wheel)
        installed = _pip_install_from_hub(fresh_venv, hub, NAME)
        version = rubric_wheel.name.split("-")[1]
        assert f"Successfully installed {NAME}-0.1.0 rubric-rl-{version}" in installed, installed
        done = _in_venv(fresh_venv, hub, "install", NAME, "--hub", hub.url)
        assert done.returncode == 0, done.stderr
        assert f"installed {NAME} 0.1.0: environment '{NAME}'" in done.stdout

        # 3. rubric list shows it, with its card's description
        listed = _in_venv(fresh_venv, hub, "list")
        assert NAME in listed.stdout and "A tool environment of two-number additions." in listed.stdout

        # 4. rubric eval NAME -m scripted:demo -n 3: finite rewards, provenance recorded
        run = tmp_path / "run"
        evaluated = _in_venv(
            fresh_venv, hub, "eval", NAME, "-m", "scripted:demo", "-n", "3", "--no-progress", "-o", str(run)
        )
        assert evaluated.returncode == 0, evaluated.stderr
        rewards = [json.loads(line)["reward"] for line in (run / "results.jsonl").read_text().splitlines()]
        assert rewards == [1.0, 1.0, 1.0]

        # 5. rubric hub search finds it with its version
        found = _in_venv(fresh_venv, hub, "hub", "search", "additions", "--hub", hub.url)
        assert found.returncode == 0, found.stderr
        assert f"{NAME} 0.1.0  (versions: 0.1.0)" in found.stdout

        # 6. pushing the same version again is refused, in one line
        assert main(["push", str(package), "--hub", hub.url]) == 2
        err = capsys.readouterr().err.strip()
        assert f"{NAME} 0.1.0 is already on {hub.url}; bump the version" in err and "\n" not in err

        # 7. a bumped version goes up; NAME==0.1.0 still installs the old one
        data = package / "e2e_adder" / "data.jsonl"
        data.write_text(data.read_text() + '{"id": "extra", "question": "What is 40 + 2?", "answer": "42"}\n')
        assert main(["push", str(package), "--hub", hub.url, "--bump", "patch", "--no-isolation"]) == 0
        assert f"pushed {NAME} 0.1.1" in capsys.readouterr().out
        assert _in_venv(fresh_venv, hub, "install", NAME, "--hub", hub.url).returncode == 0
        assert f"{NAME} │ 0.1.1" in _in_venv(fresh_venv, hub, "list").stdout
        old = _in_venv(fresh_venv, hub, "install", f"{NAME}==0.1.0", "--hub", hub.url)
        assert old.returncode == 0, old.stderr
        assert f"{NAME} │ 0.1.0" in _in_venv(fresh_venv, hub, "list").stdout
        missing = _in_venv(fresh_venv, hub, "install", f"{NAME}==9.9.9", "--hub", hub.url)
        assert missing.returncode == 2
        assert f"{NAME} has no version 9.9.9 on {hub.url}; it has 0.1.0, 0.1.1" in missing.stderr
    # the installs went to the fresh venv, never to this interpreter's environment
    assert not list(Path(sysconfig.get_paths()["purelib"]).glob("e2e_adder*"))


def _impostor_wheel(folder: Path, canary: Path) -> Path:
    """A different `e2e-adder 0.1.0` with a build tag (pip prefers it over the plain name), whose
    import leaves a canary: what a squatter would put on a public index."""
    import zipfile

    module, info = "e2e_adder", "e2e_adder-0.1.0.dist-info"
    path = folder / "e2e_adder-0.1.0-1-py3-none-any.whl"
    code = f"open({str(canary)!r}, 'w').write('impostor ran')\ndef load_environment(**kwargs):\n    raise SystemExit\n"
    files = {
        f"{module}/__init__.py": code,
        f"{module}/environment.py": "from e2e_adder import load_environment\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: 0.1.0\nSummary: impostor\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\nBuild: 1\n",
        f"{info}/entry_points.txt": f"[rubric.environments]\n{NAME} = e2e_adder.environment:load_environment\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            wheel.writestr(name, text)
    return path


def _installer_path(installer: str, tmp_path: Path, fresh_venv: Path) -> str:
    """PATH for `rubric install`: the fresh venv's scripts, and uv only when asked for (a
    folder holding just a link to the uv the test extra installs), so each installer is used."""
    entries = [str(fresh_venv / "bin")]
    if installer == "uv":
        uv = shutil.which("uv")
        assert uv is not None, "uv comes with the test extra"
        (tmp_path / "uv-only").mkdir()
        (tmp_path / "uv-only" / "uv").symlink_to(uv)
        entries.append(str(tmp_path / "uv-only"))
    return os.pathsep.join([*entries, "/usr/bin", "/bin"])


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_install_takes_the_hubs_own_file_never_a_public_namesake(
    tmp_path: Path, fresh_venv: Path, rubric_wheel: Path, monkeypatch: pytest.MonkeyPatch, installer: str
) -> None:
    canary = tmp_path / "CANARY"
    with serve_pypiserver(tmp_path / "hub") as hub, serve_pypiserver(tmp_path / "public") as public:
        monkeypatch.setenv("RUBRIC_HUB_USER", hub.user)
        monkeypatch.setenv("RUBRIC_HUB_PASSWORD", hub.password)
        monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
        package = tmp_path / NAME
        assert main(["init", NAME, "--dir", str(tmp_path), "--kind", "tool"]) == 0
        assert main(["build", str(package), "--no-isolation"]) == 0
        assert main(["push", str(package), "--hub", hub.url]) == 0
        _serve_rubric_rl(hub, rubric_wheel)
        _pip_install_from_hub(fresh_venv, hub, "rubric-rl")  # the venv's `rubric`, from the hub
        _impostor_wheel(public.packages, canary)
        env = _offline_env(public)  # the configured (default) index is the "public" one
        env["PATH"] = _installer_path(installer, tmp_path, fresh_venv)
        done = subprocess.run(
            [str(fresh_venv / "bin" / "rubric"), "install", NAME, "--hub", hub.url],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert f"installed {NAME} 0.1.0: environment '{NAME}'" in done.stdout
        shown = subprocess.run(
            [str(fresh_venv / "bin" / "python"), "-m", "pip", "show", "-f", NAME],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert "Summary: A tool environment" in shown.stdout and "impostor" not in shown.stdout
        installed_by = subprocess.run(
            [
                str(fresh_venv / "bin" / "python"),
                "-c",
                f"import importlib.metadata as m; print(m.distribution({NAME!r}).read_text('INSTALLER'))",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        assert installed_by.stdout.strip() == installer, installed_by.stderr  # that installer did it
        listed = subprocess.run(
            [str(fresh_venv / "bin" / "rubric"), "list"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            cwd=tmp_path,
        )
        assert NAME in listed.stdout and not canary.exists()
        subprocess.run(
            [str(fresh_venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", NAME],
            capture_output=True,
            env=env,
            cwd=tmp_path,
        )
