"""`JudgeConfig`: an LLMJudge's settings, validated in one place.

Every setting a judge saves in `state_dict()` is a field of this pydantic model, checked by
one validator when the judge is built and again whenever the field is assigned
(`judge.parse = "json"`). Rules that tie several fields together (`parse="choice"` needs
`choices`) live in `check()`, run at construction and before every call, because
`load_state_dict` sets fields one at a time. To add a setting, add a field (with a validator
if it needs one) and a matching `Setting` on `LLMJudge`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness._core.errors import ConfigError
from rubrics._judge.prompt import TEMPLATE_FIELDS, JudgeTemplate
from rubrics._judge.verdicts import PARSE_MODES, REDUCTIONS, ParseMode, Reduce


@functools.lru_cache(maxsize=1024)
def compile_template(source: str, what: str) -> JudgeTemplate:
    """The compiled template for `source` (compiled once; a judge looks it up per call)."""
    return JudgeTemplate(source, what=what)


def _one_of(field: str, value: Any, options: Sequence[str]) -> str:
    """`value` if it is one of `options`; otherwise the error naming the field and the options."""
    if value not in options:
        raise ConfigError(f"LLMJudge {field}={value!r}; use one of {', '.join(options)}")
    return str(value)


class JudgeSettings(TypedDict, total=False):
    """Settings to change on a judge (`LLMJudge.configure`, `JudgeConfig.replace`): any of
    `JudgeConfig`'s fields, each validated as at construction.

    Attributes:
        prompt: The jinja2 template over the rollout's fields that the judge is sent.
        system_prompt: A system message sent before the rendered `prompt`.
        model: The judge's model name.
        base_url: The judge endpoint's base URL.
        parse: How the reply is read: "number", "choice" or "json".
        choices: Label -> score for `parse="choice"`.
        score_range: The judge's scale, rescaled to [0, 1].
        pattern: A regex whose first group is the number or label.
        json_key: The field holding the score for `parse="json"`.
        samples: How many times to ask.
        reduce: How samples combine: mean, median or majority.
        cache: Answer identical requests once.
        sampling: Request arguments (temperature and the like).
        variables: Constants the template may name.
    """

    prompt: str
    system_prompt: str | None
    model: str
    base_url: str | None
    parse: ParseMode
    choices: Mapping[str, float] | None
    score_range: tuple[float, float]
    pattern: str | None
    json_key: str
    samples: int
    reduce: Reduce
    cache: bool
    sampling: Mapping[str, Any]
    variables: Mapping[str, Any]


class JudgeConfig(BaseModel):
    """What an LLMJudge asks, of whom, and how it reads the reply (see `LLMJudge` for each).

    Attributes:
        prompt: The jinja2 template over the rollout's fields that the judge is sent.
        system_prompt: A system message sent before the rendered `prompt` (none by default).
        model: The judge's model name.
        base_url: The judge endpoint's base URL (default: OPENAI_BASE_URL).
        parse: How the reply is read: "number", "choice" or "json".
        choices: Label -> score for `parse="choice"`.
        score_range: The judge's scale, rescaled to [0, 1].
        pattern: A regex whose first group is the number or label, replacing the defaults.
        json_key: The field holding the score for `parse="json"`.
        samples: How many times to ask.
        reduce: How samples combine: mean, median or majority.
        cache: Answer identical requests once, from the judge's `answer_cache`.
        sampling: Request arguments (temperature and the like).
        variables: Constants the template may name, inserted as safely as rollout values.
    """

    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    prompt: str
    system_prompt: str | None = None
    model: str
    base_url: str | None = None
    parse: ParseMode = "number"
    choices: dict[str, float] | None = None
    score_range: tuple[float, float] = (0.0, 1.0)
    pattern: str | None = None
    json_key: str = "score"
    samples: int = 1
    reduce: Reduce = "mean"
    cache: bool = True
    sampling: dict[str, Any] = Field(default_factory=dict)
    variables: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def build(cls, values: Mapping[str, Any]) -> JudgeConfig:
        """Validate `values` into a config; a bad one raises ConfigError naming the fix."""
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            raise config_error(exc) from None

    def replace(self, **changes: Unpack[JudgeSettings]) -> JudgeConfig:
        """A copy with `changes`, each validated as at construction (self is unchanged).

        Args:
            **changes: The fields to change (see `JudgeSettings`).
        """
        return self.build({**dict(self), **changes})

    def check(self) -> None:
        """Rules that tie several settings together; raises ConfigError."""
        if self.parse == "choice" and not self.choices:
            raise ConfigError('LLMJudge parse="choice" needs choices, e.g. {"C": 1.0, "P": 0.5, "I": 0.0}')
        if self.parse == "number" and self.choices:
            raise ConfigError('LLMJudge choices only apply to parse="choice" or parse="json"')
        if self.parse == "json" and self.pattern is not None:
            raise ConfigError('LLMJudge pattern does not apply to parse="json" (it reads json_key)')
        low, high = self.score_range
        outside = {k: v for k, v in (self.choices or {}).items() if not low <= v <= high}
        if outside:
            raise ConfigError(f"LLMJudge choices {outside} lie outside score_range {self.score_range}")

    # ------------------------------------------------------------------ one validator per field
    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, value: Any) -> str:
        return (
            compile_template(value, "prompt").source
            if isinstance(value, str)
            else _no_template(value, "prompt")
        )

    @field_validator("system_prompt", mode="before")
    @classmethod
    def _system_prompt(cls, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            return _no_template(value, "system_prompt")
        return compile_template(value, "system_prompt").source

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"LLMJudge model must be a non-empty model name, got {value!r}")
        return value

    @field_validator("base_url", mode="before")
    @classmethod
    def _base_url(cls, value: Any) -> str | None:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(
                f"LLMJudge base_url must be a URL such as 'http://127.0.0.1:8000/v1', got {value!r}"
            )
        return value

    @field_validator("parse", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> str:
        return _one_of("parse", value, PARSE_MODES)

    @field_validator("choices", mode="before")
    @classmethod
    def _choices(cls, value: Any) -> dict[str, float] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping) or not value:
            raise ConfigError('choices must be a non-empty dict of label -> score, e.g. {"C": 1.0, "I": 0.0}')
        out: dict[str, float] = {}
        for label, score in value.items():
            if not isinstance(label, str) or not label.strip():
                raise ConfigError(f"choice labels must be non-empty strings, got {label!r}")
            if isinstance(score, (str, bytes)):
                raise ConfigError(f"choice {label!r} must map to a number, got {score!r}")
            try:
                out[label.strip()] = float(score)
            except (TypeError, ValueError):
                raise ConfigError(f"choice {label!r} must map to a number, got {score!r}") from None
        return out

    @field_validator("score_range", mode="before")
    @classmethod
    def _score_range(cls, value: Any) -> tuple[float, float]:
        try:
            low, high = (float(v) for v in value)
        except (TypeError, ValueError):
            raise ConfigError(f"score_range must be a pair (low, high) of numbers, got {value!r}") from None
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise ConfigError(f"score_range must be finite with low < high, got {value!r}")
        return (low, high)

    @field_validator("pattern", mode="before")
    @classmethod
    def _pattern(cls, value: Any) -> str | None:
        if value is None:
            return None
        try:
            compiled = re.compile(value)
        except (re.error, TypeError) as exc:
            raise ConfigError(f"LLMJudge pattern {value!r} is not a valid regex: {exc}") from None
        if compiled.groups < 1:
            raise ConfigError(
                f"LLMJudge pattern {value!r} needs a group around the score, e.g. r'Score: (\\d+)'"
            )
        return str(compiled.pattern)

    @field_validator("json_key", mode="before")
    @classmethod
    def _json_key(cls, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"LLMJudge json_key must be a non-empty string, got {value!r}")
        return value

    @field_validator("samples", mode="before")
    @classmethod
    def _samples(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"LLMJudge samples must be an int >= 1, got {value!r}")
        return value

    @field_validator("reduce", mode="before")
    @classmethod
    def _reduce(cls, value: Any) -> str:
        return _one_of("reduce", value, REDUCTIONS)

    @field_validator("cache", mode="before")
    @classmethod
    def _cache(cls, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ConfigError(
                f"LLMJudge cache must be True or False, got {value!r} "
                "(a judge gets its own JudgeCache when built: LLMJudge(..., cache=JudgeCache()))"
            )
        return value

    @field_validator("sampling", mode="before")
    @classmethod
    def _sampling(cls, value: Any) -> dict[str, Any]:
        if value is not None and not isinstance(value, Mapping):
            raise ConfigError(f"LLMJudge sampling must be a dict like {{'max_tokens': 512}}, got {value!r}")
        return dict(value or {})

    @field_validator("variables", mode="before")
    @classmethod
    def _variables(cls, value: Any) -> dict[str, Any]:
        if value is not None and not isinstance(value, Mapping):
            raise ConfigError(f"LLMJudge variables must be a dict of template constants, got {value!r}")
        clash = sorted(set(value or {}) & TEMPLATE_FIELDS)
        if clash:
            raise ConfigError(f"LLMJudge variables {clash} would hide the rollout's own fields; rename them")
        return dict(value or {})


def _no_template(value: Any, what: str) -> str:
    raise ConfigError(
        f"LLMJudge {what} must be a non-empty jinja2 template string, got {type(value).__name__}"
    )


def config_error(exc: ValidationError) -> ConfigError:
    """The ConfigError a validator raised (pydantic wraps it), else one naming the field."""
    errors = exc.errors()
    for error in errors:
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, ConfigError):
            return cause
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "settings"
    return ConfigError(f"LLMJudge {where}: {first['msg']}")


__all__ = ["JudgeConfig", "compile_template", "config_error"]
