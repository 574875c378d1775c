"""The guessing environment as an OpenEnv 0.10 server app, for a venv of its own: `tests.envs.interop.openenv10_server:app`.

It is the game of `openenv_guess` (whose environment class uses only API that OpenEnv 0.4
and 0.10 share) served with what only OpenEnv 0.10's `create_app` takes: a `State` subclass
(`state_cls`, published in `/schema`) and a distinct reset observation
(`reset_observation_cls`, published as `reset_observation`); 0.10 also reads the server mode
from OPENENV_MODE ("production": no HTTP /reset, /step, /state; the WebSocket only).
GUESS_SESSIONS sets the most concurrent sessions (default 8). Imported with OpenEnv 0.4 it
fails with a TypeError, so a test that gets an answer from it talks to 0.10.
"""

from __future__ import annotations

import os
from typing import Any

from openenv.core.env_server import Observation, State, create_app
from pydantic import Field

from tests.envs.interop.openenv_guess import GuessAction, GuessEnvironment, GuessObservation


class GuessState(State):
    guesses: list[int] = Field(default_factory=list, description="the guesses so far")


class GuessStart(Observation):
    feedback: str = ""
    low: int = 0
    high: int = 15


class TrackedGuessEnvironment(GuessEnvironment):
    """The game, starting with a `GuessStart` and keeping a `GuessState` of every guess."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GuessStart:
        first = super().reset(seed, episode_id, **kwargs)
        self._state = GuessState(episode_id=episode_id, step_count=0)
        return GuessStart(feedback=first.feedback)

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        assert isinstance(self._state, GuessState)
        self._state.guesses.append(action.guess)
        return super().step(action, timeout_s, **kwargs)


app = create_app(
    TrackedGuessEnvironment,
    GuessAction,
    GuessObservation,
    max_concurrent_envs=int(os.environ.get("GUESS_SESSIONS", "8")),
    state_cls=GuessState,
    reset_observation_cls=GuessStart,
)
