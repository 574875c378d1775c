"""The guessing environment served by OpenEnv 0.10's server, run in its own venv: `PYTHON openenv10_server.py PORT [MODE [SESSIONS]]`.

It is the game of `openenv_guess` (imported from beside this file; its environment class
uses only API that OpenEnv 0.4 and 0.10 share) served with what only OpenEnv 0.10's
`create_app` takes: a `State` subclass (`state_cls`, published in `/schema`), a distinct reset
observation (`reset_observation_cls`, published as `reset_observation`) and the server `mode`
("simulation", or "production": no HTTP /reset, /step, /state; the WebSocket only). Run with
OpenEnv 0.4's python it fails with a TypeError, so a test that gets an answer talks to 0.10.
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from openenv.core.env_server import Observation, State, create_app
from openenv_guess import GuessAction, GuessEnvironment, GuessObservation
from pydantic import Field


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


def main(port: int, mode: str = "simulation", max_sessions: int = 8) -> None:
    app = create_app(
        TrackedGuessEnvironment,
        GuessAction,
        GuessObservation,
        max_concurrent_envs=max_sessions,
        state_cls=GuessState,
        mode=mode,
        reset_observation_cls=GuessStart,
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    port, mode, sessions = [*sys.argv[1:], "simulation", "8"][:3]
    main(int(port), mode, int(sessions))
