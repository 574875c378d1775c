"""The environment card: README.md front matter, validated, and the record a wheel carries.

The card is the package's README.md, whose YAML front matter says what a hub listing needs:

    ---
    name: my-env
    description: Two-digit additions, answered with a tool call.
    tags: [math, tool-use]
    license: Apache-2.0
    kind: tool                # single-turn | tool | multi-turn
    reward_range: [0, 1]
    needs: {api_keys: [], sandbox: false, network: false}
    ---

`rubric build` writes `HubRecord` (card + the rubric tree as `Rubric.tree()` describes it +
compatibility record + content hash) as `rubric_card.json` inside the package, so every wheel carries it; `rubric list` and
`rubric hub info` read it back.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envs._project import CARD_FILE, HubError
from harness._core.tree import TreeNode, read_tree

Kind = Literal["single-turn", "tool", "multi-turn"]
RECORD_FORMAT = 1


class Needs(BaseModel):
    """What running the environment needs besides a model endpoint.

    Attributes:
        api_keys: The environment variables it reads keys from (a judge's, say).
        sandbox: Whether it runs code in a sandbox.
        network: Whether it reaches the network.
    """

    model_config = ConfigDict(extra="forbid")

    api_keys: list[str] = Field(default_factory=list, description="environment variables that must be set")
    sandbox: bool = False
    network: bool = False


class Card(BaseModel):
    """The front matter of an environment's README.md.

    Attributes:
        name: The environment's name.
        description: One line on what it is.
        tags: Words to find it by (`rubric hub search --tag`).
        license: Its license (an SPDX name such as MIT).
        kind: single-turn, tool or multi-turn.
        reward_range: The lowest and highest reward its rubric gives.
        needs: What running it needs besides a model endpoint.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    license: str = Field(min_length=1)
    kind: Kind
    reward_range: tuple[float, float] = (0.0, 1.0)
    needs: Needs = Field(default_factory=Needs)

    @field_validator("reward_range")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"must be two finite numbers [low, high] with low < high, got {list(value)}")
        return value


class HubRecord(BaseModel):
    """What `rubric build` ships in the wheel as `rubric_card.json`.

    Attributes:
        format: The record's format version.
        name: The distribution's name.
        version: Its version.
        entry_points: Its `rubric.environments` entry points (name -> object).
        card: The README's card.
        rubric: The rubric tree summary, root first.
        compatibility: The versions it was checked on (package -> versions).
        content_hash: The hash of the package's files, to refuse a different upload of one version.
    """

    model_config = ConfigDict(extra="allow")

    format: int = RECORD_FORMAT
    name: str
    version: str
    entry_points: dict[str, str]
    card: Card
    rubric: list[TreeNode] = Field(description="the rubric tree, as `Rubric.tree()` describes it")
    compatibility: dict[str, list[str]] = Field(
        description="package -> versions `rubric check` passed on, e.g. {'rubric-rl': ['0.1.0']}"
    )
    content_hash: str

    @field_validator("rubric", mode="before")
    @classmethod
    def _readable_nodes(cls, value: object) -> object:
        """A card is data: its tree is read as a run's is (malformed nodes left out, a judge's
        model and parse beside its path, as cards first wrote them, read as its settings)."""
        nodes = read_tree(value)
        return value if nodes is None else nodes


#: The largest `rubric_card.json` read (decompressed): a card is a few KB; a bigger one is refused.
MAX_CARD_BYTES = 256 * 1024


def read_record(data: bytes | None) -> tuple[HubRecord | None, str | None]:
    """A package's `rubric_card.json` bytes (read at most MAX_CARD_BYTES + 1 of them) as a
    validated record, or None and why it was skipped; never raises for a bad card."""
    if data is None:
        return None, None
    if len(data) > MAX_CARD_BYTES:
        return None, f"its {CARD_FILE} is larger than {MAX_CARD_BYTES:,} bytes"
    try:
        value = json.loads(data)
    except ValueError as exc:
        return None, f"its {CARD_FILE} is not JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"its {CARD_FILE} is a JSON {type(value).__name__}, not an object"
    try:
        return HubRecord.model_validate(value), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(card)"
        return None, f"its {CARD_FILE} does not follow the card schema ({where}: {first['msg']})"


def split_front_matter(text: str) -> tuple[dict[str, Any] | None, str]:
    """(front matter mapping or None when absent, the rest of the text)."""
    if not text.startswith("---"):
        return None, text
    end = text.find("\n---", 3)
    if end < 0:
        raise HubError("README.md front matter opens with '---' but never closes; end it with a '---' line")
    try:
        data = yaml.safe_load(text[3:end]) or {}
    except yaml.YAMLError as exc:
        raise HubError(f"README.md front matter is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise HubError("README.md front matter must be a mapping of fields (name: ..., description: ...)")
    body = text[end + 4 :].lstrip("\n")
    return data, body


def parse_card(text: str) -> Card:
    """The validated card of a README.md text.

    Args:
        text: The README.md, front matter first.

    Returns:
        The card.

    Raises:
        HubError: no front matter, or a field missing or invalid (each named, with its fix).
    """
    data, _ = split_front_matter(text)
    if data is None:
        raise HubError(
            "README.md has no front matter; start it with '---', then name, description, tags, license, "
            "kind, reward_range, needs, then '---' (see `rubric init`)"
        )
    try:
        return Card.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'card'}: {err['msg']}" for err in exc.errors()
        )
        raise HubError(f"README.md front matter is invalid: {problems}") from None


__all__ = [
    "Card",
    "HubRecord",
    "Kind",
    "Needs",
    "parse_card",
    "split_front_matter",
]
