"""A small OpenEnv environment written with OpenEnv's own server API, for the interop tests.

Guess a secret number in 0..15 (the seed picks it): each step answers "higher", "lower" or
"correct"; a wrong guess is rewarded -0.1, the right one 1.0 and ends the episode. `app` is
OpenEnv's server app for it (`openenv:tests.envs.interop.openenv_guess:app` starts it locally).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field


class GuessAction(Action):
    """Guess the secret number."""

    guess: int = Field(ge=0, le=15, description="your guess, 0 to 15")


class GuessObservation(Observation):
    feedback: str = ""


SLOW_GUESS = 14
"""A guess the environment answers only after SLOW_SECONDS (a hung server, for timeout tests)."""
SLOW_SECONDS = 3.0
FLOOD_BYTES = 40 * 2**20
"""The size of the first observation when reset with `flood=True` (more than a client should read)."""


class GuessEnvironment(Environment[GuessAction, GuessObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Instances not yet closed: the server makes one per session and closes it with the session.
    open_instances = 0
    _lock = threading.Lock()

    def __init__(self) -> None:
        super().__init__()
        self.secret = 0
        self._state = State(step_count=0)
        with GuessEnvironment._lock:
            GuessEnvironment.open_instances += 1

    def close(self) -> None:
        with GuessEnvironment._lock:
            GuessEnvironment.open_instances -= 1

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        self.secret = (7 * (seed or 0) + 5) % 16
        self._state = State(episode_id=episode_id, step_count=0)
        if kwargs.get("flood"):
            return GuessObservation(feedback="x" * FLOOD_BYTES)
        return GuessObservation(feedback="Guess my number, 0 to 15.")

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        if action.guess == SLOW_GUESS:
            time.sleep(SLOW_SECONDS)
        if action.guess == self.secret:
            return GuessObservation(feedback="correct", reward=1.0, done=True)
        return GuessObservation(feedback="higher" if action.guess < self.secret else "lower", reward=-0.1)

    @property
    def state(self) -> State:
        return self._state


app = create_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=16)


def bisect_tool_policy(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> dict[str, Any] | str:
    """Bisects with the `guess` tool, driven by the tool's "higher"/"lower"; stops at "correct"."""
    low, high, guess = 0, 15, None
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            arguments = m["tool_calls"][0]["function"]["arguments"]
            guess = int(re.findall(r"\d+", str(arguments))[0])
        elif m["role"] == "tool" and guess is not None:
            if m["content"] == "higher":
                low = guess + 1
            elif m["content"] == "lower":
                high = guess - 1
            elif m["content"] == "correct":
                return "found it"
    return {"tool_calls": [{"function": {"name": "guess", "arguments": {"guess": (low + high) // 2}}}]}


class ChatAction(Action):
    """A chat message (one text field: the model's reply is the action)."""

    message: str


class ChatObservation(Observation):
    reply: str = ""


class PoliteEnvironment(Environment[ChatAction, ChatObservation, State]):
    """Ask twice; each message with "please" in it earns 1.0, others 0.0."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ChatObservation:
        self.turns = 0
        return ChatObservation(reply="Ask me for something, twice.")

    def step(self, action: ChatAction, timeout_s: float | None = None, **kwargs: Any) -> ChatObservation:
        self.turns += 1
        polite = "please" in action.message.lower()
        return ChatObservation(
            reply="gladly" if polite else "say the magic word", reward=float(polite), done=self.turns == 2
        )

    @property
    def state(self) -> State:
        return State(step_count=self.turns)


chat_app = create_app(PoliteEnvironment, ChatAction, ChatObservation, max_concurrent_envs=4)
