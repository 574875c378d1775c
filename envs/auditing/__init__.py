"""Audit a reward: score probe completions (empty, bare answer, injection, ...) and flag weak nodes.

`audit(env)` / `await aaudit(env)` return an `AuditReport`; `envs.auditing.views` draws it
in the terminal and as HTML; `rubric audit ENV` is the command line form.
"""

from envs.auditing.driver import aaudit, audit
from envs.auditing.probes import PROBES, Probe
from envs.auditing.report import AuditReport, Cell, Flag, ProbeInfo

__all__ = ["PROBES", "AuditReport", "Cell", "Flag", "Probe", "ProbeInfo", "aaudit", "audit"]
