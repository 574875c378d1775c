"""docs/guides/training.md's Harbor example runs as written: GRPOTrainer trains the `bash` agent on the
shipped Harbor tasks, each episode in its task's Docker sandbox, scored by the task's verifier."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from tests.helpers.docs import code_block
from tests.helpers.training import tiny_chat_model

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.agents,
    pytest.mark.docker,
    pytest.mark.trl,
    pytest.mark.slow,
    pytest.mark.timeout(300),
]


def test_the_training_guides_harbor_example_trains_the_bash_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")  # the guide's path, from the checkout
    monkeypatch.chdir(tmp_path)
    model, tokenizer = tiny_chat_model("hi")  # the guide's "your model", tiny
    namespace = {"model": model, "tokenizer": tokenizer}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(
            compile(code_block("python", 'env = from_harbor("datasets/harbor")'), "<training.md>", "exec"),
            namespace,
        )
    assert out.getvalue().strip().splitlines()[-1] == "[1.0]"
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 1  # type: ignore[attr-defined]
