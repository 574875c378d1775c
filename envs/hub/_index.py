"""Read a package index: the simple API (PEP 503 HTML, PEP 691 JSON) and each file's metadata.

A hub is any PyPI-compatible index. Names, files and versions come from its simple API; a
package's core metadata from its PEP 658 `.metadata` file where the index serves one, and its
entry points and `rubric_card.json` from the wheel itself (they are not core metadata). HTTP
goes through the HTTP client package the `openai` SDK already depends on.
"""

from __future__ import annotations

import asyncio
import configparser
import importlib
import io
import os
import zipfile
import zlib
from dataclasses import dataclass, field
from email.parser import Parser
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from envs._project import CARD_FILE, ENTRY_POINT_GROUP, HubError
from envs.hub._card import MAX_CARD_BYTES, read_record
from harness._core.aio import run_sync

HUB_URL_VAR = "RUBRIC_HUB_URL"
HUB_UPLOAD_URL_VAR = "RUBRIC_HUB_UPLOAD_URL"
HUB_USER_VAR = "RUBRIC_HUB_USER"
HUB_PASSWORD_VAR = "RUBRIC_HUB_PASSWORD"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
TIMEOUT = 30.0
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024
#: The most of a wheel's METADATA read (decompressed): its long description is shown by `info`.
MAX_METADATA_BYTES = 1024 * 1024
#: Known indexes whose upload API lives on another host than their simple API.
_UPLOAD_HOSTS = {
    "pypi.org": "https://upload.pypi.org/legacy/",
    "test.pypi.org": "https://test.pypi.org/legacy/",
}


@dataclass(frozen=True)
class Hub:
    """Where an index's simple API and upload API are, derived from one URL.

    `http://host:8080` (pypiserver) reads `http://host:8080/simple/` and uploads to the URL
    itself; a URL ending in `/simple/` (or devpi's `/+simple/`) uploads to the part before it;
    `https://pypi.org` uploads to `https://upload.pypi.org/legacy/`. `RUBRIC_HUB_UPLOAD_URL`
    overrides the upload URL for indexes that keep it elsewhere (e.g. Artifactory).

    Attributes:
        url: The URL as given.
        simple_url: Its simple API (PEP 503/691), ending in a slash.
        upload_url: Where uploads go.
    """

    url: str
    simple_url: str
    upload_url: str

    @classmethod
    def resolve(cls, url: str | None = None) -> Hub:
        """The hub at `url`, else `$RUBRIC_HUB_URL`; HubError when neither is a usable http(s) URL."""
        given = (url or os.environ.get(HUB_URL_VAR) or "").strip()
        if not given:
            raise HubError(f"no hub given; pass --hub URL or set {HUB_URL_VAR} (e.g. http://127.0.0.1:8080)")
        parts = urlsplit(given)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise HubError(
                f"hub URL {given!r} is not an http(s) URL; e.g. http://127.0.0.1:8080 or https://pypi.org"
            )
        base = given.rstrip("/") + "/"
        for marker in ("+simple/", "simple/"):
            if base.endswith("/" + marker):
                simple, upload = base, base[: -len(marker)]
                break
        else:
            simple, upload = base + "simple/", base
        upload = os.environ.get(HUB_UPLOAD_URL_VAR) or _UPLOAD_HOSTS.get(parts.netloc, upload)
        return cls(url=given, simple_url=simple, upload_url=upload)

    def project_url(self, name: str) -> str:
        return urljoin(self.simple_url, canonicalize_name(name) + "/")


@dataclass(frozen=True)
class DistFile:
    """One file of a project on the index."""

    filename: str
    url: str
    version: Version
    is_wheel: bool
    metadata_url: str | None = None  # PEP 658/714: where the core metadata is served alone
    sha256: str | None = None  # the index's hash of the file (PEP 691 `hashes`, or the URL fragment)


@dataclass
class HubEntry:
    """One environment package on a hub: what `rubric hub search` lists and `info` shows.

    Attributes:
        name: The distribution's name.
        versions: Every version on the hub, oldest first.
        version: The newest, whose card this is.
        description: The card's description.
        tags: The card's tags.
        compatibility: The versions it was checked on (package -> versions).
        entry_points: Its `rubric.environments` entry points.
        record: Its whole `rubric_card.json` (None when it has none that is valid).
        readme: Its README.md.
        problem: Why its card was skipped, if it was.
    """

    name: str
    versions: list[str]
    version: str
    description: str = ""
    tags: list[str] = field(default_factory=list)
    compatibility: dict[str, list[str]] = field(default_factory=dict)
    entry_points: dict[str, str] = field(default_factory=dict)
    record: dict[str, Any] | None = None
    readme: str = ""
    #: Why the package's card was skipped (too large, not JSON, not the schema), if it was.
    problem: str | None = None


def _http() -> Any:
    """The HTTP client package of the installed `openai` SDK (`httpx`, or `httpx2` later)."""
    import openai  # deferred: heavy, and only hub commands need HTTP here

    package = next(
        base.__module__.split(".")[0]
        for base in openai.DefaultAsyncHttpxClient.__mro__
        if base.__name__ == "AsyncClient"
    )
    return importlib.import_module(package)


def _auth() -> tuple[str, str] | None:
    user, password = os.environ.get(HUB_USER_VAR), os.environ.get(HUB_PASSWORD_VAR)
    return (user, password) if user and password else None


class IndexReader:
    """An open connection to one hub's simple API; use as `async with IndexReader(hub) as reader`."""

    def __init__(self, hub: Hub, *, timeout: float = TIMEOUT) -> None:
        self.hub = hub
        self._http = _http()
        self._client = self._http.AsyncClient(timeout=timeout, follow_redirects=True, auth=_auth())

    async def __aenter__(self) -> IndexReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def _get(self, url: str, accept: str = "*/*") -> Any:
        try:
            return await self._client.get(url, headers={"Accept": accept})
        except self._http.HTTPError as exc:
            raise HubError(
                f"cannot reach the hub at {self.hub.url} ({type(exc).__name__}: {exc or 'no answer'}); "
                f"check --hub/{HUB_URL_VAR} and that the index is running"
            ) from None

    async def project_names(self) -> list[str]:
        """Every project the index lists (normalized names)."""
        response = await self._get(self.hub.simple_url, ACCEPT)
        page = _parse_page(response, self.hub)
        if page is None:
            raise HubError(
                f"{self.hub.url} is not a package index: GET {self.hub.simple_url} answered "
                f"{response.status_code} {response.headers.get('content-type', '')!s}; pass the index's "
                "base URL (pypiserver: http://host:port) or its simple URL (.../simple/)"
            )
        return sorted({canonicalize_name(name) for name, _ in page})

    async def project_files(self, name: str) -> list[DistFile] | None:
        """The project's wheels and sdists, or None when the index has no such project."""
        url = self.hub.project_url(name)
        response = await self._get(url, ACCEPT)
        if response.status_code == 404:
            return None
        page = _parse_page(response, self.hub, url)
        if page is None:
            raise HubError(f"{url} answered {response.status_code}, not a project page of a package index")
        files = []
        for filename, attrs in page:
            dist = _dist_file(filename, attrs, url)
            if dist is not None:
                files.append(dist)
        return files

    async def download(self, url: str) -> bytes:
        response = await self._get(url)
        if response.status_code != 200:
            raise HubError(f"downloading {url} answered {response.status_code}")
        if len(response.content) > MAX_DOWNLOAD_BYTES:
            raise HubError(f"{url} is larger than {MAX_DOWNLOAD_BYTES} bytes; not read")
        return bytes(response.content)

    async def core_metadata(self, dist: DistFile) -> Any | None:
        """The PEP 658 core metadata (an email.message.Message) when the index serves it, else None."""
        if dist.metadata_url is None:
            return None
        response = await self._get(dist.metadata_url)
        return Parser().parsestr(response.text) if response.status_code == 200 else None

    async def entry(self, name: str) -> HubEntry | None:
        """The project as an environment package, or None when it is not one (no entry point)."""
        files = await self.project_files(name)
        if not files:
            return None
        versions = sorted({f.version for f in files})
        wheels = sorted((f for f in files if f.is_wheel), key=lambda f: f.version)
        if not wheels:
            return None
        latest = wheels[-1]
        metadata = await self.core_metadata(latest)
        if metadata is not None and not _requires_rubric(metadata):
            return None  # PEP 658 let us skip a download: an environment package requires rubric-rl
        return _entry_from_wheel(await self.download(latest.url), name, [str(v) for v in versions])


def _requires_rubric(metadata: Any) -> bool:
    return any(
        canonicalize_name(req.split(";")[0].split("[")[0].strip().split(" ")[0].rstrip("<>=!~"))
        == "rubric-rl"
        for req in metadata.get_all("Requires-Dist") or []
    )


def _entry_from_wheel(data: bytes, name: str, versions: list[str]) -> HubEntry | None:
    """Entry points, metadata and `rubric_card.json` read from a wheel's bytes."""
    try:
        wheel = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return None
    names = wheel.namelist()
    info_dir = next((n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA")), None)
    if info_dir is None:
        return None
    raw_metadata = _read_member(wheel, f"{info_dir}/METADATA", MAX_METADATA_BYTES) or b""
    metadata = Parser().parsestr(raw_metadata[:MAX_METADATA_BYTES].decode("utf-8", "replace"))
    points = _entry_points(wheel, f"{info_dir}/entry_points.txt")
    if not points:
        return None
    card_path = next((n for n in names if n.count("/") == 1 and n.endswith("/" + CARD_FILE)), None)
    record, problem = read_record(_read_member(wheel, card_path, MAX_CARD_BYTES) if card_path else None)
    return HubEntry(
        name=str(metadata.get("Name", name)),
        versions=versions,
        version=str(metadata.get("Version", versions[-1])),
        description=record.card.description if record else str(metadata.get("Summary") or ""),
        tags=list(record.card.tags) if record else [],
        compatibility=dict(record.compatibility) if record else {},
        entry_points=points,
        record=record.model_dump(mode="json", exclude_none=True) if record else None,
        readme=str(metadata.get_payload() or ""),
        problem=problem,
    )


def _read_member(wheel: zipfile.ZipFile, member: str, cap: int) -> bytes | None:
    """At most `cap` + 1 decompressed bytes of `member` (a zip bomb is never inflated whole)."""
    try:
        with wheel.open(member) as handle:
            return handle.read(cap + 1)
    except (KeyError, zipfile.BadZipFile, OSError, EOFError, zlib.error):
        return None


def _entry_points(wheel: zipfile.ZipFile, path: str) -> dict[str, str]:
    if path not in wheel.namelist():
        return {}
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names' case
    parser.read_string(wheel.read(path).decode("utf-8", "replace"))
    return dict(parser[ENTRY_POINT_GROUP]) if parser.has_section(ENTRY_POINT_GROUP) else {}


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, dict[str, str | None]]] = []
        self.marked = False  # a PEP 629 repository-version meta tag, or a "Simple index" title
        self._in_anchor: dict[str, str | None] | None = None
        self._in_title = False
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "a":
            self._in_anchor, self._text = values, ""
        elif tag == "title":
            self._in_title = True
        elif tag == "meta" and values.get("name") == "pypi:repository-version":
            self.marked = True

    def handle_data(self, data: str) -> None:
        if self._in_anchor is not None:
            self._text += data
        if self._in_title and "simple index" in data.lower():
            self.marked = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._in_anchor is not None:
            self.links.append((self._text.strip(), self._in_anchor))
            self._in_anchor = None
        elif tag == "title":
            self._in_title = False


def _parse_page(response: Any, hub: Hub, url: str | None = None) -> list[tuple[str, dict[str, Any]]] | None:
    """(name or filename, attributes with an absolute `url`) per link; None when not an index page."""
    if response.status_code != 200:
        return None
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    base = url or hub.simple_url
    if kind == JSON_TYPE:
        data = response.json()
        if not isinstance(data, dict) or "meta" not in data:
            return None
        if "files" in data:
            return [(f["filename"], {**f, "url": urljoin(base, f["url"])}) for f in data["files"]]
        return [(p["name"], {}) for p in data.get("projects", [])]
    if kind not in ("text/html", "application/vnd.pypi.simple.v1+html"):
        return None
    parser = _Anchors()
    parser.feed(response.text)
    if not parser.marked and not parser.links:
        return None
    return [(text, {**attrs, "url": urljoin(base, attrs.get("href") or "")}) for text, attrs in parser.links]


def _dist_file(filename: str, attrs: dict[str, Any], page_url: str) -> DistFile | None:
    url, fragment = urldefrag(attrs["url"])
    hashes = attrs.get("hashes")
    digest = hashes.get("sha256") if isinstance(hashes, dict) else None
    if digest is None and fragment.startswith("sha256="):
        digest = fragment.removeprefix("sha256=")
    try:
        if filename.endswith(".whl"):
            version, is_wheel = parse_wheel_filename(filename)[1], True
        else:
            version, is_wheel = parse_sdist_filename(filename)[1], False
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    metadata = attrs.get(
        "core-metadata", attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
    )
    served = metadata not in (None, False, "false")
    metadata_url = url + ".metadata" if served else None
    return DistFile(
        filename, url, version, is_wheel, metadata_url, digest.lower() if isinstance(digest, str) else None
    )


async def asearch(
    query: str | None = None, *, tag: str | None = None, hub: str | Hub | None = None, concurrency: int = 8
) -> list[HubEntry]:
    """Environment packages on the hub whose name, description or tags match.

    Args:
        query: Text to find in the name, description or tags (case-insensitive); None lists all.
        tag: Keep only entries with this tag.
        hub: The index URL (default `$RUBRIC_HUB_URL`).
        concurrency: Projects read at once.

    Returns:
        Entries sorted by name; only projects that declare the `rubric.environments` entry point.
    """
    where = hub if isinstance(hub, Hub) else Hub.resolve(hub)
    needle = (query or "").lower()
    async with IndexReader(where) as reader:
        names = await reader.project_names()
        limit = asyncio.Semaphore(concurrency)

        async def one(name: str) -> HubEntry | None:
            async with limit:
                try:
                    return await reader.entry(name)
                except (ValueError, LookupError, OSError, zipfile.BadZipFile) as exc:  # one bad package
                    return HubEntry(name=name, versions=[], version="?", problem=f"unreadable ({exc})")

        entries = [e for e in await asyncio.gather(*(one(n) for n in names)) if e is not None]
    found = []
    for entry in entries:
        text = " ".join([entry.name, entry.description, *entry.tags]).lower()
        if needle and needle not in text and canonicalize_name(needle) not in text:
            continue
        if tag and tag.lower() not in (t.lower() for t in entry.tags):
            continue
        found.append(entry)
    return sorted(found, key=lambda e: canonicalize_name(e.name))


async def ainfo(name: str, *, hub: str | Hub | None = None) -> HubEntry:
    """One environment package on the hub, with its card and rubric tree summary.

    Args:
        name: The distribution's name.
        hub: The index URL (default `$RUBRIC_HUB_URL`).

    Returns:
        The entry, with its card and README.

    Raises:
        HubError: the hub has no such project, or the project is not an environment package.
    """
    where = hub if isinstance(hub, Hub) else Hub.resolve(hub)
    async with IndexReader(where) as reader:
        entry = await reader.entry(name)
        if entry is None:
            files = await reader.project_files(name)
            if files is None:
                raise HubError(f"no package {name!r} on {where.url}; `rubric hub search` lists what is there")
            raise HubError(
                f"{name!r} on {where.url} is not an environment package (no rubric.environments entry point)"
            )
    return entry


def search(
    query: str | None = None, *, tag: str | None = None, hub: str | Hub | None = None
) -> list[HubEntry]:
    """Synchronous `asearch` (works inside a running event loop too).

    Args:
        query: Text to find in the name, description or tags (case-insensitive); None lists all.
        tag: Keep only entries with this tag.
        hub: The index URL (default `$RUBRIC_HUB_URL`).

    Returns:
        Entries sorted by name.
    """
    return run_sync(asearch(query, tag=tag, hub=hub))


def info(name: str, *, hub: str | Hub | None = None) -> HubEntry:
    """Synchronous `ainfo` (works inside a running event loop too).

    Args:
        name: The distribution's name.
        hub: The index URL (default `$RUBRIC_HUB_URL`).

    Returns:
        The entry, with its card and README.
    """
    return run_sync(ainfo(name, hub=hub))
