"""The one exception hierarchy: every error the project raises on purpose is a `RubricError`.

Why one root: a caller (the CLI, a notebook, a training loop) can catch `RubricError` and show
one clear line, while anything else is a bug worth a traceback. Each class also keeps the builtin
base a caller would have caught before (`ValueError`, `LookupError`, `FileNotFoundError`), so
existing `except ValueError:` code keeps working.

    RubricError
    ├── ConfigError (ValueError)                  bad input, caught at construction
    │   └── ConfigTypeError (TypeError)           ... of the wrong type (a str where a list belongs)
    ├── NotScoreableError (TypeError, NotImplementedError)  calling a RubricList/RubricDict
    ├── ScoringError                              a rubric node could not score a rollout
    ├── EndpointError                             an endpoint failed for good
    ├── EnvironmentNotFoundError (LookupError)    no environment by that name, path or spec
    ├── UserCodeError                             an environment's own code failed while loading
    ├── WorkerError                               a worker process could not start, or all died
    └── ResultsError (ValueError)                 a results directory cannot be read or used
        └── ResultsNotFoundError (FileNotFoundError)
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConfigTypeError",
    "EndpointError",
    "EnvironmentNotFoundError",
    "NotScoreableError",
    "ResultsError",
    "ResultsNotFoundError",
    "ResultsWarning",
    "RubricError",
    "ScoringError",
    "TooManyErrorsError",
    "UserCodeError",
    "WorkerError",
    "WorkersHint",
    "describe_error",
    "raised_at",
]


class RubricError(Exception):
    """Root of every error rubric raises on purpose; its message says what is wrong and the fix."""


class ConfigError(RubricError, ValueError):
    """Bad input to a constructor or entry point: raised before anything runs."""


class ConfigTypeError(ConfigError, TypeError):
    """Bad input of the wrong type at construction; still a `TypeError`, as Python would raise."""


class NotScoreableError(RubricError, TypeError, NotImplementedError):
    """A rubric that only holds others (`RubricList`, `RubricDict`) was asked for a score.

    Both a `TypeError` (as calling a non-callable is) and a `NotImplementedError` (as OpenEnv
    raises for containers without a forward), so either `except` catches it.
    """


class ScoringError(RubricError):
    """Raise inside `forward` to mark the node unscored (NaN) with `str(error)` as the reason.

    Unlike other exceptions, its reason is recorded without the exception type in front,
    so it reads as a plain explanation ("judge reply had no verdict").
    """


class EndpointError(RubricError):
    """The endpoint failed for good: retries exhausted, or a 4xx that retrying cannot fix.

    Args:
        message: What failed, for people.

    Attributes:
        status: The HTTP status of the last attempt, or None when no response came.
        attempts: How many requests were made.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class EnvironmentNotFoundError(RubricError, LookupError):
    """No installed environment, file or `module:function` matches the name given."""


class UserCodeError(RubricError):
    """Code the user wrote (an environment's `load_environment`) raised or exited; the message
    names the file, line and function where it happened."""


class WorkerError(RubricError):
    """A worker could not start (its environment failed to load), or every worker died."""


def raised_at(exc: BaseException) -> str:
    """Where `exc` was raised, from its innermost frame: "my_env.py:12 in load_environment"."""
    tb = exc.__traceback__
    if tb is None:
        return "unknown location"
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}"


class ResultsError(RubricError, ValueError):
    """A results directory is unreadable, inconsistent, or not one `evaluate` wrote."""


class TooManyErrorsError(RubricError):
    """More rollouts errored than `evaluate(fail_on_error=...)` allows. The run finished and was
    saved as usual; its results are on the error (`.results`).

    Args:
        message: How many rollouts errored, against the allowance.
        results: The finished run's results (an `EvalResults`).
    """

    def __init__(self, message: str, results: object) -> None:
        super().__init__(message)
        self.results = results


class ResultsNotFoundError(ResultsError, FileNotFoundError):
    """The results directory, or both of its files, do not exist."""


class ResultsWarning(UserWarning):
    """A results file was readable only in part: corrupt lines skipped or repeats ignored."""


class WorkersHint(RuntimeWarning):
    """Worker processes cannot speed this run up (too few rollouts per worker, or the endpoint
    is the limit): said once, before the run, with what to do instead."""


def describe_error(exc: BaseException) -> str:
    """'ExcType: message' — the form stored in `Rollout.error`."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
