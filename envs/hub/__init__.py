"""Environments as packages on a hub: scaffold, check, build, push, install, list, search.

A hub is any PyPI-compatible index (PyPI, devpi, pypiserver, Artifactory, one on localhost);
an environment package is a normal wheel that registers the `rubric.environments` entry point
and carries `rubric_card.json` (card, rubric tree summary, compatibility record). Every
function here is what the matching `rubric` command calls.
"""

from __future__ import annotations

from envs._project import CARD_FILE, HubError, PackageName, Project
from envs.hub._card import Card, HubRecord, Needs, parse_card
from envs.hub._checks import CheckReport, CheckResult, acheck_package, check_package
from envs.hub._scaffold import init_package

__all__ = [
    "CARD_FILE",
    "Card",
    "CheckReport",
    "CheckResult",
    "HubError",
    "HubRecord",
    "Needs",
    "PackageName",
    "Project",
    "acheck_package",
    "check_package",
    "init_package",
    "parse_card",
]
