"""`wordle`: guess a secret five-letter word in six tries, with per-letter feedback (multi-turn).

A template for games and other environments that talk back. The model guesses either by
calling the `guess(word)` tool or by writing `<guess>word</guess>`; the environment answers
each guess with one letter per position:

    G  right letter, right spot      Y  in the word, elsewhere      X  not in the word (again)

The episode ends when the word is found (stop reason `won`) or six guesses are used
(`out_of_guesses`). Words outside the word list are rejected and still use up a guess.

Reward (a `Sequential` of a `Gate` and a `WeightedSum`): if fewer than half the guesses were
real words the reward is 0 (guessing noise is not play); otherwise
0.75 * win + 0.125 * speed + 0.125 * valid, where speed = (7 - guesses used) / 6 for a win, else 0,
and valid is the fraction of guesses that were words. A first-try win scores 1.0 (the
weights are binary fractions, so that sum is exactly 1.0 in floating point).
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envs._conditions import stop
from envs._presets import MultiTurnEnv
from envs._tools.functions import Tool
from envs.reference._data import data_path
from envs.reference._scripting import Attempts, RowLookup, attempt_seed, message_text
from harness._core.errors import ConfigError
from harness._core.types import Rollout
from rubrics import Gate, Sequential, WeightedSum
from rubrics.parsers import extract_xml

WORD_LENGTH = 5
WORDS_FILE = "wordle_words.txt"
SYSTEM_PROMPT = """You are playing Wordle. Find the secret five-letter English word in at most {max_guesses} guesses.
Guess by calling the `guess` tool with one word, or by writing <guess>word</guess>.
After each guess you get one letter per position:
G = right letter in the right spot, Y = the letter is in the word but elsewhere,
X = the letter is not in the word (or not as many times as you used it).
Words that are not in the word list are rejected and still cost a guess."""


# ----------------------------------------------------------------------------- the game


def feedback(guess: str, secret: str) -> str:
    """Per-letter marks for `guess` against `secret`, e.g. feedback("eerie", "there") == "YXYXG".

    Greens are marked first; then each remaining letter is yellow only while the secret still
    has an unmatched copy of it, so a letter guessed twice but present once gets one mark.
    """
    if len(guess) != len(secret):
        raise ValueError(f"guess {guess!r} and secret {secret!r} differ in length")
    marks = ["X"] * len(guess)
    unmatched: Counter[str] = Counter()
    for i, (g, s) in enumerate(zip(guess, secret)):
        if g == s:
            marks[i] = "G"
        else:
            unmatched[s] += 1
    for i, g in enumerate(guess):
        if marks[i] != "G" and unmatched[g] > 0:
            marks[i] = "Y"
            unmatched[g] -= 1
    return "".join(marks)


def load_words(path: str | Path | None = None) -> list[str]:
    """The word list (one word per line); every entry must be five lowercase letters."""
    path = Path(path) if path is not None else data_path(WORDS_FILE)
    words: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        word = line.strip().lower()
        if not word:
            continue
        if len(word) != WORD_LENGTH or not word.isascii() or not word.isalpha():
            raise ConfigError(f"{path}:{number}: {word!r} is not a {WORD_LENGTH}-letter word")
        words.append(word)
    if not words:
        raise ConfigError(f"word list {path} is empty")
    return sorted(set(words))


def make_games(words: Sequence[str], num_games: int = 50, seed: int = 0) -> list[dict[str, str]]:
    """`num_games` games with distinct secrets drawn from `words` (seeded: same seed, same games)."""
    if not 1 <= num_games <= len(words):
        raise ConfigError(f"num_games must be between 1 and the word count ({len(words)}), got {num_games}")
    secrets = random.Random(seed).sample(sorted(words), num_games)
    return [
        {
            "id": f"game-{i:03d}",
            "question": f"Game #{i}: the secret word is chosen. Make your first guess.",
            "answer": secret,
        }
        for i, secret in enumerate(secrets)
    ]


def _guesses(count: int) -> str:
    return "no guesses" if count == 0 else f"{count} guess" if count == 1 else f"{count} guesses"


class WordleEnv(MultiTurnEnv):
    """Wordle as a multi-turn environment; the rollout's state holds the secret and every guess."""

    def __init__(
        self,
        dataset: Any,
        rubric: Any,
        *,
        words: Iterable[str],
        max_guesses: int = 6,
        use_tool: bool = True,
        **kwargs: Any,
    ) -> None:
        self.words = frozenset(words)
        if max_guesses < 1:
            raise ConfigError(f"max_guesses must be >= 1, got {max_guesses}")
        self.max_guesses = max_guesses
        tools = [Tool.from_function(self.guess, name="guess")] if use_tool else None
        # A turn without a guess earns a reminder, so allow a few more turns than guesses.
        if kwargs.get("max_turns") is None:
            kwargs["max_turns"] = max_guesses + 4
        super().__init__(dataset, rubric, tools=tools, **kwargs)

    def setup_state(self, state: dict[str, Any], example: Mapping[str, Any]) -> None:
        secret = str(example["answer"]).strip().lower()
        if secret not in self.words:
            raise ConfigError(
                f"example {example.get('example_id')!r}: secret {secret!r} is not in the word list"
            )
        state.update(secret=secret, guesses=[], won=False, max_guesses=self.max_guesses)

    def play(self, state: dict[str, Any], word: str) -> str:
        """Record one guess in `state` and return the feedback text the model sees."""
        guesses: list[dict[str, Any]] = state["guesses"]
        if state["won"] or len(guesses) >= self.max_guesses:
            return "The game is over; no more guesses are accepted."
        word = word.strip().lower()
        valid = len(word) == WORD_LENGTH and word in self.words
        marks = feedback(word, state["secret"]) if valid else None
        guesses.append({"word": word, "valid": valid, "feedback": marks})
        left = _guesses(self.max_guesses - len(guesses)).capitalize() + " left."
        if not valid:
            why = (
                f"is not a {WORD_LENGTH}-letter word"
                if len(word) != WORD_LENGTH
                else "is not in the word list"
            )
            return f"{word!r} {why}; the guess is used up. {left}"
        if marks == "G" * WORD_LENGTH:
            state["won"] = True
            return f"{word} -> {marks}. Solved in {_guesses(len(guesses))}!"
        return f"{word} -> {marks}. {left}"

    async def guess(self, word: str, state: dict[str, Any]) -> str:
        """Guess the secret word and get one mark per letter (G, Y or X).

        Args:
            word: a five-letter English word.
        """
        # async so that it runs on the event loop: parallel guesses in one turn never race.
        return self.play(state, word)

    def env_response(self, rollout: Rollout) -> str:
        word = extract_xml(rollout.response, "guess")
        if not word:
            return "No guess found. Call the guess tool or write your guess as <guess>word</guess>."
        return self.play(rollout.state, word)

    @stop
    def won(self, rollout: Rollout) -> bool:
        return bool(rollout.state.get("won"))

    @stop
    def out_of_guesses(self, rollout: Rollout) -> bool:
        return len(rollout.state.get("guesses", [])) >= self.max_guesses


# ----------------------------------------------------------------------------- reward


def win(state: dict[str, Any]) -> float:
    """1.0 if the secret was found."""
    return 1.0 if state.get("won") else 0.0


def speed(state: dict[str, Any]) -> float:
    """For a win, 1.0 on the first guess down to 1/max_guesses on the last; 0 otherwise."""
    if not state.get("won"):
        return 0.0
    most = state["max_guesses"]
    return (most + 1 - len(state["guesses"])) / most


def valid_guesses(state: dict[str, Any]) -> float:
    """Fraction of guesses that were words from the list (0 with no guesses at all)."""
    guesses = state.get("guesses") or []
    return sum(g["valid"] for g in guesses) / len(guesses) if guesses else 0.0


def make_rubric() -> Sequential:
    """Gate on mostly-real guesses, then grade: win first, speed second, tidiness last."""
    return Sequential(
        {
            "real_words": Gate(valid_guesses, threshold=0.5),
            "grade": WeightedSum(
                {"win": win, "speed": speed, "valid": valid_guesses},
                weights={"win": 0.75, "speed": 0.125, "valid": 0.125},
            ),
        }
    )


# ----------------------------------------------------------------------------- policies


def _guess_message(
    word: str, tools: list[dict[str, Any]] | None, call_id: str, use_tool: bool
) -> dict[str, Any] | str:
    offered = any(t.get("function", {}).get("name") == "guess" for t in tools or [])
    if use_tool and offered:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "guess", "arguments": {"word": word}},
                }
            ],
        }
    return f"My guess: <guess>{word}</guess>"


def _guessed_word(message: Mapping[str, Any]) -> str:
    """The word an assistant message guessed (through the tool or as <guess>...</guess> text)."""
    for call in message.get("tool_calls") or []:
        arguments = call.get("function", {}).get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments)
        if isinstance(arguments, Mapping):
            return str(arguments.get("word", ""))
    found = re.search(r"<guess>(.*?)</guess>", message_text(message), re.S)
    return found.group(1).strip() if found else ""


class NoisyPlayer:
    """wordle's "noisy" scripted player: seeded random words (some not words at all) before
    trying the secret, so it sometimes wins late and sometimes loses; each attempt at a game
    plays differently (`Attempts`), so `-r K` shows pass@k rising."""

    def __init__(self, lookup: RowLookup, vocabulary: Sequence[str]) -> None:
        self.lookup, self.vocabulary = lookup, list(vocabulary)
        self.attempts = Attempts()

    def fresh(self) -> NoisyPlayer:
        return NoisyPlayer(self.lookup, self.vocabulary)

    def __getstate__(self) -> dict[str, Any]:
        return {"lookup": self.lookup, "vocabulary": self.vocabulary}  # a copy counts afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["lookup"], state["vocabulary"])  # type: ignore[misc]

    def move(self, game: Mapping[str, Any], attempt: int, turn: int) -> tuple[str, bool]:
        """The word guessed at `turn` of `attempt`, and whether through the tool."""
        plan = attempt_seed("wordle-noisy", game["question"], attempt=attempt)
        detours = plan.choice([0, 1, 2, 3, 4, 6, 7])  # 6 or more: the game is lost
        rng = attempt_seed("wordle-noisy", game["question"], turn, attempt=attempt)
        if turn >= detours:
            word = str(game["answer"])
        elif rng.random() < 0.25:
            word = rng.choice(["qzxvk", "aeiou", "cat", "brrrr"])
        else:
            word = rng.choice(self.vocabulary)
        return word, rng.random() < 0.5

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> dict[str, Any] | str:
        game = self.lookup.find(messages)
        attempt = self.attempts.of(
            str(game["question"]), messages, lambda a: self.move(game, a, 0)[0], _guessed_word
        )
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        word, use_tool = self.move(game, attempt, turn)
        return _guess_message(word, tools, f"call_noisy_{turn}", use_tool=use_tool)


def make_policies(games: Sequence[Mapping[str, Any]], words: Sequence[str]) -> dict[str, Any]:
    """ "oracle" knows each game's secret (keyed by the "Game #N" prompt) and wins at once;
    "noisy" is a `NoisyPlayer`."""
    lookup = RowLookup(games)

    def oracle(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
        secret = str(lookup.find(messages)["answer"])
        return _guess_message(secret, tools, "call_oracle", use_tool=True)

    return {"oracle": oracle, "noisy": NoisyPlayer(lookup, sorted(words))}


def load_environment(
    num_games: int = 50,
    seed: int = 0,
    max_guesses: int = 6,
    words_path: str | Path | None = None,
    use_tool: bool = True,
    max_turns: int | None = None,
    sampling: Mapping[str, Any] | None = None,
) -> WordleEnv:
    """The wordle environment: `num_games` seeded games over the bundled (or given) word list.

    Args:
        num_games: How many games (one example each).
        seed: Seeds which words are chosen.
        max_guesses: Guesses per game.
        words_path: A word list of your own (one five-letter word a line).
        use_tool: Offer the `guess` tool; False (for endpoints without tool calling) reads
            guesses from `<guess>word</guess>` only.
        max_turns: Model turns per rollout (default: `max_guesses` + 4, room for invalid guesses).
        sampling: Sampling arguments for the policy, e.g. {"max_tokens": 1024}.

    Returns:
        The environment.
    """
    words = load_words(words_path)
    games = make_games(words, num_games, seed)
    env = WordleEnv(
        games,
        make_rubric(),
        words=words,
        max_guesses=max_guesses,
        use_tool=use_tool,
        system_prompt=SYSTEM_PROMPT.format(max_guesses=max_guesses),
        max_turns=max_turns,
        sampling=sampling,
        name="wordle",
        success="grade.win",  # pass@k counts wins (the reward of a win is below 1: speed, valid guesses)
    )
    env.scripted_policies = make_policies(games, words)
    return env


__all__ = [
    "SYSTEM_PROMPT",
    "WordleEnv",
    "feedback",
    "load_environment",
    "load_words",
    "make_games",
    "make_policies",
    "make_rubric",
    "speed",
    "valid_guesses",
    "win",
]
