"""Text from a package or an index reaches the terminal sanitised (issue 28.4): card text with
escape sequences, rich markup, a card that is not JSON or is a list, a zip-bomb card; and a
closed pipe ends `rubric hub info` quietly (issue 27.14). Against a real pypiserver."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envs.hub._card import MAX_CARD_BYTES
from tests.helpers.hub import HubServer
from tests.helpers.processes import RUBRIC, run

pytestmark = [pytest.mark.hub, pytest.mark.slow]

# ANSI colour, OSC 8 hyperlink, OSC window title, BEL, NUL, right-to-left override, rich markup.
HOSTILE = "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07click\x1b]8;;\x07 \x1b]0;title\x07 \x00 \u202egnp.exe [/bold] [red]x"
RAW = ("\x1b", "\x07", "\x00", "\u202e")


def _record(name: str, description: str) -> dict[str, object]:
    card = {"name": name, "description": description, "tags": ["evil", description[:40]], "license": "MIT"}
    card |= {"kind": "single-turn"}
    return {
        "format": 1,
        "name": name,
        "version": "0.1.0",
        "entry_points": {name: f"{name.replace('-', '_')}.environment:load_environment"},
        "card": card,
        "rubric": [{"path": "", "type": "WeightedSum"}, {"path": description[:30], "type": "reward"}],
        "compatibility": {"rubric-rl": ["0.1.0"]},
        "content_hash": "sha256:0",
    }


def _wheel(
    packages: Path, name: str, card: bytes | None, summary: str = "a package", body: str = HOSTILE
) -> None:
    module = name.replace("-", "_")
    info = f"{module}-0.1.0.dist-info"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\nSummary: {summary}\nRequires-Dist: rubric-rl\n\n{body}\n"
        wheel.writestr(f"{info}/METADATA", metadata)
        wheel.writestr(
            f"{info}/entry_points.txt",
            f"[rubric.environments]\n{name} = {module}.environment:load_environment\n",
        )
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{module}/__init__.py", "")
        if card is not None:
            wheel.writestr(f"{module}/rubric_card.json", card)
    (packages / f"{module}-0.1.0-py3-none-any.whl").write_bytes(buffer.getvalue())


@pytest.fixture
def hostile_hub(hub_server: HubServer) -> HubServer:
    _wheel(hub_server.packages, "ansi-env", json.dumps(_record("ansi-env", HOSTILE)).encode(), HOSTILE)
    _wheel(hub_server.packages, "notjson-env", b"{not json")
    _wheel(hub_server.packages, "list-env", b"[1, 2, 3]")
    bomb = b'{"card": {"description": "' + b" " * (200 * 1024 * 1024) + b'"}}'
    _wheel(hub_server.packages, "bomb-env", bomb)
    long_readme = "\n".join(f"line {i} of a long README" for i in range(20_000))  # more than a pipe holds
    fine = json.dumps(_record("fine-env", "An honest environment.")).encode()
    _wheel(hub_server.packages, "fine-env", fine, body=long_readme)
    return hub_server


def test_search_and_info_print_no_raw_control_text(hostile_hub: HubServer, tmp_path: Path) -> None:
    env = {"RUBRIC_HUB_URL": hostile_hub.url}
    # The CLI in a child that reports its own peak memory on its last stderr line.
    measure = (
        "import sys; from cli import main; from harness._engine.executors.workers import peak_rss_mib; "
        "code = main(['hub', 'search']); sys.stderr.write(f'PEAK_MIB {peak_rss_mib()}'); sys.exit(code)"
    )
    search = subprocess.run(
        [sys.executable, "-c", measure],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, **env, "COLUMNS": "200", "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    peak_mib = float(search.stderr.rsplit("PEAK_MIB ", 1)[1])  # VmHWM: unlike ru_maxrss, reset by exec
    assert search.returncode == 0, search.stderr
    out = search.stdout
    assert not any(c in out + search.stderr for c in RAW), repr(out[:500])
    assert "\\x1b[31mred" in out and "\\u202e" in out and "[/bold]" in out  # shown, escaped
    assert "fine-env 0.1.0" in out and "An honest environment." in out  # one bad card fails nothing else
    for bad in ("notjson-env", "list-env", "bomb-env"):
        assert f"note: {bad}: card skipped: its rubric_card.json" in search.stderr
    assert f"larger than {MAX_CARD_BYTES:,} bytes" in search.stderr and "not JSON" in search.stderr
    assert "a JSON list, not an object" in search.stderr
    assert len(out) < 20_000 and peak_mib < 200, (len(out), peak_mib)  # a 200 MB card is never inflated
    info = run("hub", "info", "ansi-env", cwd=tmp_path, env=env, timeout=120)
    assert info.returncode == 0, info.stderr
    assert not any(c in info.stdout for c in RAW) and "\\x1b]8;;http://evil.example\\x07" in info.stdout


def test_rubric_list_shows_markup_as_text(tmp_path: Path) -> None:
    site = tmp_path / "site"
    described = HOSTILE + " Uses `run_python`, **fast**."  # Markdown, as docstrings and cards are
    _wheel(tmp_path, "markup-env", json.dumps(_record("markup-env", described)).encode())
    with zipfile.ZipFile(tmp_path / "markup_env-0.1.0-py3-none-any.whl") as wheel:
        wheel.extractall(site)
    proc = run(
        "list",
        cwd=tmp_path,
        env={"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 0, proc.stderr  # was MarkupError on "[/bold]"
    assert "markup-env" in proc.stdout and "[/bold]" in proc.stdout
    assert "run_python" in proc.stdout and "`" not in proc.stdout and "**" not in proc.stdout  # rendered
    assert not any(c in proc.stdout for c in RAW)


def test_a_closed_pipe_ends_quietly(hostile_hub: HubServer, tmp_path: Path) -> None:
    with subprocess.Popen(
        [str(RUBRIC), "hub", "info", "fine-env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "RUBRIC_HUB_URL": hostile_hub.url},
    ) as rubric:
        assert rubric.stdout is not None and rubric.stderr is not None
        rubric.stdout.readline()
        rubric.stdout.close()  # like `| head -1`
        rubric.wait(60)
        errors = rubric.stderr.read().decode()
    assert "BrokenPipeError" not in errors and "Traceback" not in errors, errors
    assert rubric.returncode in (0, 141)
