"""`rubric view` shows text from models, tools, judges and datasets escaped, never as markup."""

from __future__ import annotations

import json
from pathlib import Path

from harness._core.text import escape_control, safe_text
from tests.cli.conftest import Invoke

NASTY = "\x1b[2J\x1b]0;pwned\x07\u202eevil\x00[/bold][red]x[/red]\x9b"


def test_escape_control_keeps_text_and_shows_controls() -> None:
    assert escape_control("a\tb\nc") == "a\tb\nc"
    assert escape_control("\x1b[2J\x00\x7f\x9b") == "\\x1b[2J\\x00\\x7f\\x9b"
    assert escape_control("\u202eabc\u2066\ufeff\u200b") == "\\u202eabc\\u2066\\ufeff\\u200b"
    assert escape_control("naïve café 日本 🙂") == "naïve café 日本 🙂"
    assert safe_text("[/bold]").plain == "[/bold]"  # a Text is never parsed as markup


def test_view_escapes_everything_that_came_from_outside(rubric: Invoke, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    rollout = {
        "example_id": f"id{NASTY}",
        "rollout_index": 0,
        "prompt": [{"role": "user", "content": f"question {NASTY}"}],
        "completion": [
            {
                "role": "assistant",
                "content": f"reply {NASTY}",
                "tool_calls": [
                    {
                        "id": f"c{NASTY}",
                        "type": "function",
                        "function": {"name": f"t{NASTY}", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "content": f"tool says {NASTY}", "tool_call_id": "c1", "name": f"t{NASTY}"},
        ],
        "answer": f"answer {NASTY}",
        "error": f"error {NASTY}",
        "stop_reason": f"stop{NASTY}",
        "reward": 0.0,
        "scores": {f"judge{NASTY}": 0.0},
        "score_errors": {"": f"root {NASTY}"},
        "score_details": {f"judge{NASTY}": {"reply": f"GRADE: [/bold] {NASTY}"}},
    }
    (folder / "results.jsonl").write_text(json.dumps(rollout) + "\n")
    metadata = {"status": f"odd{NASTY}", "env": {"name": f"env{NASTY}"}, "model": {"model": f"m{NASTY}"}}
    (folder / "metadata.json").write_text(json.dumps(metadata))
    proc = rubric("view", str(folder), "--worst", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for raw in ("\x1b", "\x07", "\u202e", "\x00", "\x9b"):
        assert raw not in out, f"{raw!r} reached the terminal"
    assert out.count("\\x1b[2J") >= 10 and "\\u202eevil" in out and "[/bold][red]x[/red]" in out
    assert "GRADE: [/bold] \\x1b[2J" in out  # a judge reply with markup in it, shown as written
    for text in ("reply", "tool says", "answer", "error", "root", "question"):
        assert f"{text} \\x1b[2J" in out, text
