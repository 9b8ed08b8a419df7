"""The two simple-API project pages, read into a :class:`ReleaseList` (pure, no I/O).

- PEP 691 JSON: ``meta.api-version`` 1.x, ``files`` with ``filename``, ``yanked`` (PEP 592),
  ``upload-time`` (PEP 700), ``requires-python``, ``hashes``, ``core-metadata`` (PEP 714).
- PEP 503 HTML: one anchor per file; the filename is the last path component of ``href``, its
  hash the URL fragment (``#sha256=…``); ``data-yanked``, ``data-requires-python``,
  ``data-core-metadata`` / ``data-dist-info-metadata`` and ``data-upload-time`` where the index
  gives them; ``<meta name="pypi:repository-version">`` (PEP 629) must be 1.x when present.

Versions come from the file names (``packaging.utils``); files of other projects, ``.egg`` and
``.exe`` are passed over. A page of the wrong shape is a reason (a string), never an exception.
"""

from __future__ import annotations

import datetime as _dt
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from retire.evidence.values import Release, ReleaseFile, ReleaseList
from shims import times

__all__ = ["HTML_API", "JSON_API", "parse_html_page", "parse_json_page"]

JSON_API = "PEP 691 JSON"
HTML_API = "PEP 503 HTML"


class PageError(ValueError):
    """What is wrong with a page; ``truncated`` when it stops mid-document."""

    def __init__(self, reason: str, *, truncated: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.truncated = reason, truncated


def _moment(text: object, filename: str) -> _dt.datetime | None:
    """A PEP 700 upload time (UTC by the spec); None when absent."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise PageError(f"{filename}: upload-time is {type(text).__name__}, not a string")
    try:
        return times.parse(text, assume_utc=True)
    except times.TimeError:
        raise PageError(f"{filename}: upload-time {text[:40]!r} is not an ISO 8601 time") from None


def _version_of(filename: str, project: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        # .egg, .exe, odd names: not something a lane installs
        return None
    return version if canonicalize_name(name) == project else None


def _release_list(files: list[ReleaseFile], project: str, index_url: str, api: str) -> ReleaseList:
    by_version: dict[Version, list[ReleaseFile]] = {}
    for item in files:
        found = _version_of(item.filename, project)
        if found is not None:
            by_version.setdefault(found, []).append(item)
    releases = tuple(Release(v, tuple(by_version[v])) for v in sorted(by_version))
    return ReleaseList(project, index_url, releases, api)


def _optional(item: dict, key: str, kinds: tuple[type, ...], filename: str):
    value = item.get(key)
    if value is not None and not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise PageError(f"{filename}: {key} is {type(value).__name__}, not {names}")
    return value


def _json_file(item: object) -> ReleaseFile:
    if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
        raise PageError("a file entry has no filename")
    filename = item["filename"]
    yanked = _optional(item, "yanked", (bool, str), filename) or False
    hashes = _optional(item, "hashes", (dict,), filename) or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in hashes.items()):
        raise PageError(f"{filename}: hashes must map names to hex strings")
    metadata = item.get("core-metadata", item.get("dist-info-metadata"))
    return ReleaseFile(
        filename=filename,
        upload_time=_moment(item.get("upload-time"), filename),
        yanked=bool(yanked),
        yanked_reason=yanked if isinstance(yanked, str) and yanked else None,
        requires_python=_optional(item, "requires-python", (str,), filename),
        hashes=tuple(sorted(hashes.items())),
        core_metadata=bool(metadata),
    )


def parse_json_page(data: object, distribution: str, index_url: str) -> ReleaseList:
    """A PEP 691 project page; :class:`PageError` when it is not one (or is another project's)."""
    project = canonicalize_name(distribution)
    if not isinstance(data, dict):
        raise PageError("the project page is not a JSON object")
    meta = data.get("meta")
    version = meta.get("api-version") if isinstance(meta, dict) else None
    if not isinstance(version, str) or not version.startswith("1."):
        raise PageError(f"unsupported simple API version {version!r} (PEP 691 needs 1.x)")
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or canonicalize_name(name) != project):
        raise PageError(f"the page is for project {name!r}, not {project!r}")
    files = data.get("files")
    if not isinstance(files, list):
        raise PageError("no 'files' list in the project page")
    return _release_list([_json_file(item) for item in files], project, index_url, JSON_API)


class _Anchors(HTMLParser):
    """The anchors of a PEP 503 page, with their attributes and whether the document ended."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[dict[str, str | None]] = []
        self.repository_version: str | None = None
        self.opened = self.closed = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))
        elif tag == "html":
            self.opened = True
        elif tag == "meta":
            found = dict(attrs)
            if found.get("name") == "pypi:repository-version":
                self.repository_version = found.get("content") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "html":
            self.closed = True


def _html_file(anchor: dict[str, str | None]) -> ReleaseFile | None:
    href = anchor.get("href")
    if not href:
        return None
    parts = urlsplit(href)
    filename = unquote(parts.path.rstrip("/").rpartition("/")[2])
    if not filename:
        return None
    algorithm, _, digest = parts.fragment.partition("=")
    yanked = "data-yanked" in anchor
    reason = anchor.get("data-yanked") or None
    metadata = anchor.get("data-core-metadata", anchor.get("data-dist-info-metadata"))
    has_metadata = (
        "data-core-metadata" in anchor or "data-dist-info-metadata" in anchor
    ) and metadata != "false"
    return ReleaseFile(
        filename=filename,
        upload_time=_moment(anchor.get("data-upload-time"), filename),
        yanked=yanked,
        yanked_reason=reason,
        requires_python=anchor.get("data-requires-python") or None,
        hashes=((algorithm, digest),) if algorithm and digest else (),
        core_metadata=has_metadata,
    )


def parse_html_page(text: str, distribution: str, index_url: str) -> ReleaseList:
    """A PEP 503 project page; :class:`PageError` when it is cut short or of an unknown version."""
    parser = _Anchors()
    try:
        parser.feed(text)
        parser.close()
    # html.parser's own complaints
    except (AssertionError, ValueError) as exc:
        raise PageError(f"unreadable HTML ({exc})") from None
    if parser.repository_version is not None and not parser.repository_version.startswith("1."):
        raise PageError(
            f"unsupported repository version {parser.repository_version!r} (PEP 629: 1.x)"
        )
    if parser.opened and not parser.closed:
        raise PageError("the HTML page stops before </html>", truncated=True)
    files = [found for anchor in parser.anchors if (found := _html_file(anchor)) is not None]
    return _release_list(files, canonicalize_name(distribution), index_url, HTML_API)
