"""`rubrics._judge.labels.read_labels`: a malformed labels file is one clear line naming the row
and field, read with bounds (issue 33)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from harness import ConfigError
from rubrics._judge.labels import MAX_LINE_BYTES, read_labels


def _file(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _refused(labels: object) -> str:
    with pytest.raises(ConfigError) as caught:
        read_labels(labels)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message, message
    return message


GOOD = {"prompt": "2+2?", "completion": "4", "label": True}


@pytest.mark.parametrize(
    ("row", "says"),
    [
        (
            {"prompt": 5, "completion": "4", "label": True},
            "row 2: 'prompt' is int 5; give text or a list of messages",
        ),
        ({"prompt": "q", "completion": 4.5, "label": 1}, "row 2: 'completion' is float 4.5"),
        (
            {"prompt": "q", "completion": [{"role": 1}], "label": 1},
            "row 2: 'completion': role: Input should be",
        ),
        ({"prompt": "q", "label": True}, "row 2 has no 'completion' (the response the judge grades)"),
    ],
)
def test_a_bad_row_is_one_line_naming_the_row_and_field(tmp_path: Path, row: dict, says: str) -> None:
    assert says in _refused(_file(tmp_path, GOOD, row))
    assert says.replace("labels.jsonl ", "") in _refused([GOOD, row])  # the same from Python dicts


def test_an_explicit_empty_completion_is_kept(tmp_path: Path) -> None:
    [(rollout, label)] = read_labels(_file(tmp_path, {"prompt": "q", "completion": "", "label": 0}))
    assert rollout.completion[0].content == "" and label == 0


def test_deep_nesting_is_a_clear_error(tmp_path: Path) -> None:
    deep = '{"prompt": "q", "completion": "a", "label": 1, "info": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "line 2 nests too deeply to read" in _refused(_file(tmp_path, GOOD, deep))


def test_a_huge_line_is_refused_early_with_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    with path.open("w") as handle:
        handle.write(json.dumps(GOOD) + "\n")
        handle.write('{"prompt": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n')
    tracemalloc.start()
    try:
        message = _refused(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"line 2 is longer than {MAX_LINE_BYTES // 2**20} MiB" in message
    assert peak < 3 * MAX_LINE_BYTES, peak


def test_a_gigabyte_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    with path.open("wb") as handle:
        handle.truncate(2**30)  # sparse: 1 GiB that takes no disk
    assert "is larger than 256 MiB" in _refused(path)


@pytest.mark.slow
def test_what_is_not_a_file_is_named_as_what_it_is(tmp_path: Path) -> None:
    assert "is a directory, not a file" in _refused(tmp_path)
    assert "/dev/zero is a character device, not a file" in _refused(Path("/dev/zero"))
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "s"))
        assert "is a socket, not a file" in _refused(tmp_path / "s")
    assert "does not exist" in _refused(tmp_path / "missing.jsonl")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a pipe (e.g. a shell's <(...)) is read, with the same bounds
    write = f"open({str(fifo)!r}, 'w').write({json.dumps(GOOD) + chr(10)!r})"
    with subprocess.Popen([sys.executable, "-c", write]) as writer:
        assert len(read_labels(fifo)) == 1
    assert writer.returncode == 0
