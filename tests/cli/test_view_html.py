"""`rubric view DIR --html [OUT]` and `rubric view A B --html`: the self-contained reports it writes."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Invoke


def test_view_html_writes_one_self_contained_file(rubric: Invoke, tmp_path: Path) -> None:
    for name, policy in (("a", "noisy"), ("b", "oracle")):
        proc = rubric(
            "eval", "gsm8k", "-m", f"scripted:{policy}", "-n", "12", "--no-progress", "-o", name, cwd=tmp_path
        )
        assert proc.returncode == 0, proc.stderr

    single = rubric("view", "a", "--html", cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    assert f"wrote {Path('a') / 'report.html'}" in single.stdout
    page = (tmp_path / "a" / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="report-data"' in page
    assert "http://" not in page and "https://" not in page  # nothing to fetch: works from file://
    assert "gsm8k" in page and "<svg" in page

    named = rubric("view", "a", "--html", "out/x.html", cwd=tmp_path)
    assert named.returncode == 0 and (tmp_path / "out" / "x.html").exists()

    pair = rubric("view", "a", "b", "--html", cwd=tmp_path)
    assert pair.returncode == 0, pair.stderr
    compared = (tmp_path / "compare--a--b.html").read_text()
    assert '"mode":"compare"' in compared and "B − A" in compared

    bare = rubric("view", "a", "b", cwd=tmp_path)  # the same comparison in the terminal
    assert bare.returncode == 0 and "B − A" in bare.stdout and "rubric view a b --html" in bare.stdout
