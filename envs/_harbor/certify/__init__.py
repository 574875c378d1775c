"""Certificates of Harbor tasks (`rubric audit harbor:PATH`): hack probes, verdicts, the cache."""

from envs._harbor.certify.certificate import (
    CERTIFICATE_FORMAT,
    PASS_THRESHOLD,
    Certificate,
    HackOutcome,
    acertify_harbor_tasks,
    cached_certificates,
    certificate_cache,
    certify_harbor_tasks,
    hackable_warning,
    rubric_version,
)
from envs._harbor.certify.probes import PROBES, VECTORS, HackProbe
from envs._harbor.certify.view import certificates_table, write_certificates_html

__all__ = [
    "CERTIFICATE_FORMAT",
    "PASS_THRESHOLD",
    "PROBES",
    "VECTORS",
    "Certificate",
    "HackOutcome",
    "HackProbe",
    "acertify_harbor_tasks",
    "cached_certificates",
    "certificate_cache",
    "certificates_table",
    "certify_harbor_tasks",
    "hackable_warning",
    "rubric_version",
    "write_certificates_html",
]
