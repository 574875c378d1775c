"""The wordle reference environment: feedback (duplicate letters), the game state machine,
both guess forms (tool and <guess> tag), the rubric tree, and end-to-end scripted runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.reference import _wordle as wordle
from harness import Message, Rollout, run_sync


@pytest.mark.parametrize(
    ("guess", "secret", "marks"),
    [
        ("crane", "crane", "GGGGG"),
        ("stone", "crane", "XXXGG"),
        ("eerie", "there", "YXYXG"),  # three e's against two: one yellow, one green, one grey
        ("geese", "those", "XXXGG"),  # the only e is green, so the other e's are grey
        ("speed", "abide", "XXYXY"),  # two e's against one: the first gets the yellow
        ("llama", "hello", "YYXXX"),  # two l's against two: both yellow
        ("hello", "llama", "XXYYX"),
        ("abbey", "babes", "YYGGX"),
    ],
)
def test_feedback_handles_duplicate_letters(guess, secret, marks):
    assert wordle.feedback(guess, secret) == marks


def test_feedback_rejects_length_mismatch():
    with pytest.raises(ValueError, match="differ in length"):
        wordle.feedback("cat", "crane")


def test_word_list_loading_and_errors(tmp_path: Path):
    words = wordle.load_words()
    assert len(words) >= 300 and all(len(w) == 5 and w.isalpha() and w.islower() for w in words)
    bad = tmp_path / "words.txt"
    bad.write_text("crane\ncats\n")
    with pytest.raises(ValueError, match=r"words.txt:2: 'cats' is not a 5-letter word"):
        wordle.load_words(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        wordle.load_words(empty)


def test_games_are_seeded_and_distinct():
    words = wordle.load_words()
    games = wordle.make_games(words, 50, seed=0)
    assert games == wordle.make_games(words, 50, seed=0)
    assert games != wordle.make_games(words, 50, seed=1)
    assert len({g["answer"] for g in games}) == 50 and len({g["question"] for g in games}) == 50
    with pytest.raises(ValueError, match="num_games must be between"):
        wordle.make_games(words, 0)


async def _start(env: wordle.WordleEnv, index: int = 0) -> Rollout:
    example = env.get_dataset()[index]
    return await env.setup_rollout(example)


async def test_text_guesses_invalid_words_and_a_win():
    env = wordle.load_environment(num_games=3)
    rollout = await _start(env)
    secret = rollout.state["secret"]
    other = next(w for w in sorted(env.words) if w != secret)

    rollout.completion.append(Message(role="assistant", content="Hmm, no guess yet."))
    reply = await env.respond(rollout)
    assert "No guess found" in reply[0].text and rollout.state["guesses"] == []

    rollout.completion.append(Message(role="assistant", content="<guess>zzzzz</guess>"))
    reply = await env.respond(rollout)
    assert "not in the word list" in reply[0].text and "5 guesses left" in reply[0].text

    rollout.completion.append(Message(role="assistant", content=f"<guess>{other.upper()}</guess>"))
    reply = await env.respond(rollout)
    assert reply[0].text.startswith(f"{other} -> {wordle.feedback(other, secret)}")
    assert await env.stop_reason(rollout) is None

    rollout.completion.append(Message(role="assistant", content=f"<guess>{secret}</guess>"))
    reply = await env.respond(rollout)
    assert "Solved in 3 guesses" in reply[0].text
    assert await env.stop_reason(rollout) == "won"
    assert [g["valid"] for g in rollout.state["guesses"]] == [False, True, True]
    await env.score(rollout)
    # 0.75 win + 0.125 * (7 - 3) / 6 speed + 0.125 * 2/3 valid
    assert rollout.reward == pytest.approx(0.75 + 0.125 * 4 / 6 + 0.125 * 2 / 3)
    assert rollout.scores["grade.win"] == 1.0 and rollout.scores["real_words"] == pytest.approx(2 / 3)


async def test_tool_guess_and_running_out_of_guesses():
    env = wordle.load_environment(num_games=3, max_guesses=2)
    assert [t["function"]["name"] for t in env.tool_schemas] == ["guess"]
    rollout = await _start(env, 1)
    wrong = next(w for w in sorted(env.words) if w != rollout.state["secret"])
    for i in range(2):
        rollout.completion.append(
            Message.model_validate(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": "guess", "arguments": {"word": wrong}},
                        }
                    ],
                }
            )
        )
        reply = await env.respond(rollout)
        assert reply[0].role == "tool" and reply[0].tool_call_id == f"c{i}"
    assert "No guesses left" in reply[0].text
    assert await env.stop_reason(rollout) == "out_of_guesses"
    assert env.play(rollout.state, rollout.state["secret"]).startswith("The game is over")
    await env.score(rollout)
    assert rollout.reward == 0.125  # a loss with only real words keeps the tidiness share


def test_without_the_tool_only_tags_work():
    env = wordle.load_environment(num_games=2, use_tool=False)
    assert env.tool_schemas == []
    game = env.get_dataset()[1]
    reply = env.scripted_policies["oracle"](
        [{"role": "user", "content": game["question"]}], env.tool_schemas or None
    )
    assert reply == f"My guess: <guess>{game['answer']}</guess>"


@pytest.mark.parametrize(
    ("guesses", "won", "reward"),
    [
        ([True], True, 1.0),
        ([True] * 6, False, 0.125),
        ([False, False, True], True, 0.0),  # mostly noise: the gate zeroes everything
        ([], False, 0.0),
    ],
)
def test_rubric_tree(guesses, won, reward):
    state = {"won": won, "max_guesses": 6, "guesses": [{"valid": v} for v in guesses]}
    assert wordle.make_rubric()({"state": state}) == pytest.approx(reward)


def test_unknown_secret_is_rejected_at_setup():
    env = wordle.load_environment(num_games=1)
    example = dict(env.get_dataset()[0], answer="qqqqq")
    with pytest.raises(ValueError, match="not in the word list"):
        run_sync(env.setup_rollout(example))


def test_oracle_wins_every_game_at_once():
    env = wordle.load_environment()
    rollouts = env.evaluate("scripted:oracle", num_examples=20, progress=False).rollouts
    assert len(rollouts) == 20
    assert all(r.stop_reason == "won" and r.turns == 1 and r.error is None for r in rollouts)
    assert [r.reward for r in rollouts] == [1.0] * 20


def test_noisy_policy_wins_some_loses_some_with_both_guess_forms():
    env = wordle.load_environment()
    rollouts = env.evaluate("scripted:noisy", num_examples=20, progress=False).rollouts
    mean = sum(r.reward for r in rollouts) / len(rollouts)
    assert 0.0 < mean < 1.0
    assert {r.stop_reason for r in rollouts} == {"won", "out_of_guesses"}
    messages = [m for r in rollouts for m in r.completion if m.role == "assistant"]
    assert any(m.tool_calls for m in messages) and any("<guess>" in m.text for m in messages)
    assert any(not g["valid"] for r in rollouts for g in r.state["guesses"])
