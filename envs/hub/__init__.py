"""Environments as packages on a hub: scaffold, check, build, push, install, list, search.

A hub is any PyPI-compatible index (PyPI, devpi, pypiserver, Artifactory, one on localhost);
an environment package is a normal wheel that registers the `rubric.environments` entry point
and carries `rubric_card.json` (card, rubric tree summary, compatibility record). Every
function here is what the matching `rubric` command calls (`init_package`, `check_package`,
`build_package`, `push_package`, `install`, `installed_environments`, `search`, `info`); what
the commands print is the command line's own (`envs.hub._display`, which cli.py imports).
"""

from __future__ import annotations

from envs._project import CARD_FILE, BumpPart, HubError, PackageName, Project
from envs.hub._build import BuildResult, abuild_package, build_package
from envs.hub._card import Card, HubRecord, Needs, parse_card
from envs.hub._checks import CheckReport, CheckResult, acheck_package, check_package
from envs.hub._index import Hub, HubEntry, ainfo, asearch, info, search
from envs.hub._install import InstalledEnvironment, ainstall, install, installed_environments
from envs.hub._publish import PushResult, apush_package, push_package
from envs.hub._scaffold import KindOption, init_package

__all__ = [
    "CARD_FILE",
    "BuildResult",
    "BumpPart",
    "Card",
    "CheckReport",
    "CheckResult",
    "Hub",
    "HubEntry",
    "HubError",
    "HubRecord",
    "InstalledEnvironment",
    "KindOption",
    "Needs",
    "PackageName",
    "Project",
    "PushResult",
    "abuild_package",
    "acheck_package",
    "ainfo",
    "ainstall",
    "apush_package",
    "asearch",
    "build_package",
    "check_package",
    "info",
    "init_package",
    "install",
    "installed_environments",
    "parse_card",
    "push_package",
    "search",
]
