"""Audit a reward: score probe completions (empty, bare answer, injection, ...) and flag weak nodes.

`audit(env)` / `await aaudit(env)` return an `AuditReport`; `envs._auditing.result` draws it
in the terminal and as HTML; `rubric audit ENV` is the command line form.
"""

from envs._auditing.driver import aaudit, audit
from envs._auditing.probes import PROBES, Probe
from envs._auditing.result import AuditReport, Cell, Flag, ProbeInfo

__all__ = ["PROBES", "AuditReport", "Cell", "Flag", "Probe", "ProbeInfo", "aaudit", "audit"]
