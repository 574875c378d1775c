"""Docstrings in Google, NumPy and reST style become the tool and parameter descriptions."""

from __future__ import annotations

import functools

from envs import Tool
from envs._tools.docstrings import DocInfo, docs_of, parse_docstring


def google(city: str, days: int = 1) -> str:
    """Get the weather forecast.

    Uses the national service; results are cached for an hour.

    Args:
        city: Name of the city,
            e.g. "Paris".
        days (int): How many days ahead.

    Returns:
        The forecast as text.
    """
    return city


def numpy(city: str, days: int = 1) -> str:
    """Get the weather forecast.

    Parameters
    ----------
    city : str
        Name of the city.
    days : int, optional
        How many days ahead.

    Returns
    -------
    str
        The forecast.
    """
    return city


def rest(city: str, days: int = 1) -> str:
    """Get the weather forecast.

    :param city: Name of the city.
    :param days: How many days ahead.
    :returns: The forecast.
    """
    return city


def test_google_style() -> None:
    t = Tool.from_function(google)
    assert (
        t.description
        == "Get the weather forecast.\n\nUses the national service; results are cached for an hour."
    )
    assert t.parameters["properties"] == {
        "city": {"description": 'Name of the city, e.g. "Paris".', "type": "string"},
        "days": {"default": 1, "description": "How many days ahead.", "type": "integer"},
    }
    assert t.schema["function"]["description"] == t.description


def test_numpy_style() -> None:
    t = Tool.from_function(numpy)
    assert t.description == "Get the weather forecast."
    assert t.parameters["properties"] == {
        "city": {"description": "Name of the city.", "type": "string"},
        "days": {"default": 1, "description": "How many days ahead.", "type": "integer"},
    }


def test_rest_style() -> None:
    t = Tool.from_function(rest)
    assert t.description == "Get the weather forecast."
    assert t.parameters["properties"] == {
        "city": {"description": "Name of the city.", "type": "string"},
        "days": {"default": 1, "description": "How many days ahead.", "type": "integer"},
    }


def test_no_docstring_means_no_description_key() -> None:
    def bare(x: int) -> int:
        return x

    t = Tool.from_function(bare)
    assert t.description == ""
    assert t.schema["function"] == {
        "name": "bare",
        "parameters": {
            "additionalProperties": False,
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "type": "object",
        },
    }


def test_explicit_description_overrides_docstring() -> None:
    t = Tool.from_function(google, description="Weather.")
    assert t.schema["function"]["description"] == "Weather."
    # parameter descriptions still come from the docstring
    assert t.parameters["properties"]["city"]["description"] == 'Name of the city, e.g. "Paris".'


def test_numpy_shared_parameter_line() -> None:
    doc = """Move.

    Parameters
    ----------
    x, y : float
        Target coordinates.
    """
    assert parse_docstring(doc) == DocInfo("Move.", {"x": "Target coordinates.", "y": "Target coordinates."})


def test_empty_and_plain_docstrings() -> None:
    assert parse_docstring(None) == DocInfo()
    assert parse_docstring("   ") == DocInfo()
    assert parse_docstring("Just a sentence.") == DocInfo("Just a sentence.", {})


def test_partial_and_callable_objects_use_the_wrapped_docstring() -> None:
    assert docs_of(functools.partial(rest, days=2)).description == "Get the weather forecast."

    class Search:
        def __call__(self, q: str) -> str:
            """Search the index.

            Args:
                q: The query.
            """
            return q

    assert docs_of(Search()) == DocInfo("Search the index.", {"q": "The query."})
    t = Tool.from_function(Search(), name="search")
    assert t.parameters["properties"] == {"q": {"description": "The query.", "type": "string"}}
