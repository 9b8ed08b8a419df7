"""The two simple-API project pages, read into a :class:`ReleaseList` (pure, no I/O).

- PEP 691 JSON: ``meta.api-version`` 1.x, ``files`` with ``filename``, ``yanked`` (PEP 592),
  ``upload-time`` (PEP 700), ``requires-python``, ``hashes``, ``core-metadata`` (PEP 714).
- PEP 503 HTML: one anchor per file; the filename is the last path component of ``href``, its
  hash the URL fragment (``#sha256=…``); ``data-yanked``, ``data-requires-python``,
  ``data-core-metadata`` / ``data-dist-info-metadata`` and ``data-upload-time`` where the index
  gives them; ``<meta name="pypi:repository-version">`` (PEP 629) must be 1.x when present.

Versions come from the file names (``packaging.utils``); files of other projects, ``.egg`` and
``.exe`` are passed over. A page of the wrong shape is a reason (a string), never an exception.

**What is a project page.** An answer that is not one is a :class:`PageError`, never a project
without files (that would read as "no release has the fix"):

- JSON: an object with ``meta.api-version`` 1.x and a ``files`` list (``[]`` is a project with no
  files), and ``name``, when given, this project's;
- HTML: markup (at least one tag), no NUL or other control bytes, and either at least one anchor
  to a distribution file (a wheel, an sdist, ``.egg``…; PEP 503's one anchor per file) — not all
  of them another project's — or, with no file anchors, a page whose text is empty or names the
  project (``<h1>Links for x</h1>``: a well-formed empty project page). A maintenance notice, a
  log-in page, an empty body or a body of NUL bytes is refused.

**Reading is bounded** by the probe's deadline: ``expired`` is asked between chunks of HTML and
every few hundred files, and past it the reader stops with a :class:`PageTimeoutError`.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Iterable, Iterator
from html.parser import HTMLParser
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import Version

from retire.evidence.values import Release, ReleaseFile, ReleaseList
from shims import times

__all__ = [
    "HTML_API",
    "JSON_API",
    "PageError",
    "PageTimeoutError",
    "parse_html_page",
    "parse_json_page",
]

T = TypeVar("T")

JSON_API = "PEP 691 JSON"
HTML_API = "PEP 503 HTML"
#: Characters of HTML fed to the parser between two looks at the deadline (about 0.1 s of work).
_CHUNK = 2**17
#: The most a single construct (a tag, a comment, a quoted value) may hold: a project page's
#: largest is an anchor of a few hundred bytes.
_UNCLOSED = 2 * _CHUNK
#: Files read between two looks at the deadline.
_EVERY = 500
#: What a distribution file's name ends with (PEP 503 links one per file; ``.egg``, ``.exe`` are
#: files too, though no lane installs them).
_FILE_SUFFIXES = (
    ".whl",
    ".tar.gz",
    ".zip",
    ".tar.bz2",
    ".tar.xz",
    ".tgz",
    ".tar",
    ".egg",
    ".exe",
    ".msi",
    ".rpm",
    ".dmg",
)
#: C0 controls other than tab, line feed, form feed and carriage return: never in an HTML page.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")


def _never() -> bool:
    return False


class PageError(ValueError):
    """What is wrong with a page; ``truncated`` when it stops mid-document."""

    def __init__(self, reason: str, *, truncated: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.truncated = reason, truncated


class PageTimeoutError(PageError):
    """The page was not read within the probe's deadline (a huge page, a slow host)."""


def _bounded(items: Iterable[T], expired: Callable[[], bool], what: str) -> Iterator[T]:
    """``items``, with a look at the deadline every few hundred."""
    for count, item in enumerate(items):
        if count % _EVERY == 0 and expired():
            raise PageTimeoutError(f"the page was not read within the deadline ({count} {what})")
        yield item


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


#: A wheel's distribution name as the file spells it (PEP 427: no ``-``).
_WHEEL_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._]*[A-Za-z0-9])?")


def _identify(filename: str) -> tuple[str, Version] | None:
    """The canonical project name and the version of a wheel or sdist file; None for ``.egg``,
    ``.exe`` and odd names (nothing a lane installs).

    A wheel's name is read by its five or six parts (PEP 427) rather than
    ``parse_wheel_filename``, whose tag parsing costs most of the time of a 300 000-file page."""
    try:
        if filename.endswith(".whl"):
            parts = filename[:-4].split("-")
            build = parts[2] if len(parts) == 6 else "0"
            if len(parts) not in (5, 6) or not all(parts) or not build[:1].isdigit():
                return None
            if not _WHEEL_NAME.fullmatch(parts[0]):
                return None
            return canonicalize_name(parts[0]), Version(parts[1])
        name, version = parse_sdist_filename(filename)
    except (InvalidSdistFilename, ValueError):
        return None
    return canonicalize_name(name), version


def _release_list(
    files: list[ReleaseFile],
    project: str,
    index_url: str,
    api: str,
    expired: Callable[[], bool] = _never,
) -> tuple[ReleaseList, list[str]]:
    """The releases of ``project`` among ``files``, and the names of the files that are another
    project's."""
    by_version: dict[Version, list[ReleaseFile]] = {}
    others: list[str] = []
    for item in _bounded(files, expired, "files sorted"):
        found = _identify(item.filename)
        if found is not None and found[0] == project:
            by_version.setdefault(found[1], []).append(item)
        elif found is not None:
            others.append(item.filename)
    releases = tuple(Release(v, tuple(by_version[v])) for v in sorted(by_version))
    return ReleaseList(project, index_url, releases, api), others


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


def parse_json_page(
    data: object, distribution: str, index_url: str, *, expired: Callable[[], bool] = _never
) -> ReleaseList:
    """A PEP 691 project page; :class:`PageError` when it is not one (or is another project's),
    :class:`PageTimeoutError` once ``expired()``."""
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
    read = [_json_file(item) for item in _bounded(files, expired, "files read")]
    releases, others = _release_list(read, project, index_url, JSON_API, expired)
    if read and len(others) == len(read):
        raise PageError(f"every file on the page is another project's ({others[0]!r}, …)")
    return releases


#: Characters of a page's text kept to tell an empty project page from a notice.
_TEXT_KEPT = 2**16
#: The tags of a project page (PEP 503's anchors and what indexes put around them); a page with no
#: file links and any other tag (a form, a script, an image) is not a project page.
_STRUCTURE = frozenset(
    {"html", "head", "body", "title", "meta", "link", "style", "a", "br", "hr", "p", "div"}
    | {"span", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "table", "tr", "td"}
)


class _Anchors(HTMLParser):
    """The anchors of a PEP 503 page, with their attributes and whether the document ended; how
    many tags it has, and the start of its text outside anchors."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[dict[str, str | None]] = []
        self.repository_version: str | None = None
        self.opened = self.closed = False
        self.tags = 0
        # names of the tags outside a page's usual structure (a form, a script, an image…)
        self.unusual: set[str] = set()
        # hrefs of anchors that lead elsewhere than a parent folder
        self.elsewhere = 0
        self.text: list[str] = []
        self._kept = 0
        self._in_anchor = False

    def handle_data(self, data: str) -> None:
        if not self._in_anchor and self._kept < _TEXT_KEPT and data.strip():
            self.text.append(data.strip()[: _TEXT_KEPT - self._kept])
            self._kept += len(self.text[-1])

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags += 1
        self._in_anchor = tag == "a" or self._in_anchor
        if tag not in _STRUCTURE and len(self.unusual) < 8:
            self.unusual.add(tag)
        if tag == "a":
            self.anchors.append(dict(attrs))
        elif tag == "html":
            self.opened = True
        elif tag == "meta":
            found = dict(attrs)
            if found.get("name") == "pypi:repository-version":
                self.repository_version = found.get("content") or ""

    def handle_endtag(self, tag: str) -> None:
        self.tags += 1
        if tag == "a":
            self._in_anchor = False
        elif tag == "html":
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


def _is_file(filename: str) -> bool:
    return filename.lower().endswith(_FILE_SUFFIXES)


def _names(text: str, project: str) -> bool:
    """Whether ``text`` names ``project`` (as a word, spelled any way PEP 503 normalises)."""
    words = re.sub(r"[-_.]+", "-", text.lower())
    return re.search(rf"(?<![a-z0-9-]){re.escape(project)}(?![a-z0-9]|-[a-z])", words) is not None


def _feed(parser: _Anchors, text: str, expired: Callable[[], bool]) -> None:
    """``text`` through ``parser`` in chunks, looking at the deadline between them.

    What html.parser holds back sits inside a construct that has not closed yet (a comment, a tag,
    a quote), and every later chunk makes it scan that again: a page whose one construct outgrows
    :data:`_UNCLOSED` is no project page, and is refused there, before the scans turn quadratic
    (and before ``close()`` would parse the rest in one unbounded go)."""
    try:
        for start in range(0, len(text), _CHUNK):
            if expired():
                raise PageTimeoutError(
                    f"the page was not read within the deadline ({start // 2**20} MiB of "
                    f"{len(text) / 2**20:.0f} MiB, {len(parser.anchors)} links so far)"
                )
            _no_control(text, start)
            parser.feed(text[start : start + _CHUNK])
            _not_unclosed(parser)
        parser.close()
    # html.parser's own complaints
    except (AssertionError, ValueError) as exc:
        if isinstance(exc, PageError):
            raise
        raise PageError(f"unreadable HTML ({exc})") from None


def _no_control(text: str, start: int) -> None:
    """:class:`PageError` for a control character in the chunk at ``start`` (looked for chunk by
    chunk, so that no scan of the whole page comes before the first look at the deadline)."""
    control = _CONTROL.search(text, start, start + _CHUNK)
    if control:
        raise PageError(
            f"not an HTML page: control character {control.group()!r} at offset {control.start()}"
        )


def _not_unclosed(parser: _Anchors) -> None:
    pending = len(parser.rawdata)
    if pending > _UNCLOSED:
        raise PageError(
            f"the page holds a comment, tag or quote that does not close within {pending // 1024} "
            "KiB: not a project page"
        )


def _check_page(parser: _Anchors, files: int, others: list[str], project: str) -> None:
    """:class:`PageError` when what was read is not a PEP 503 project page of ``project``
    (``files`` file links were found, ``others`` of them another project's)."""
    if parser.repository_version is not None and not parser.repository_version.startswith("1."):
        raise PageError(
            f"unsupported repository version {parser.repository_version!r} (PEP 629: 1.x)"
        )
    if parser.opened and not parser.closed:
        raise PageError("the HTML page stops before </html>", truncated=True)
    if not parser.tags:
        raise PageError("not an HTML page: no markup at all")
    if files:
        if len(others) == files:
            raise PageError(f"every file on the page is another project's ({others[0]!r}, …)")
        return
    if parser.unusual:
        raise PageError(
            f"no file links, and the page has <{'>, <'.join(sorted(parser.unusual))}>: "
            "not a project page"
        )
    text = " ".join(parser.text)
    links = [a.get("href") or "" for a in parser.anchors]
    if (text or any(not href.endswith("/") for href in links)) and not _names(text, project):
        said = f" (it says {' '.join(text.split())[:80]!r})" if text else ""
        raise PageError(
            f"no file links, and the page does not name {project!r}{said}: "
            "a notice, not a project page"
        )


def parse_html_page(
    text: str, distribution: str, index_url: str, *, expired: Callable[[], bool] = _never
) -> ReleaseList:
    """A PEP 503 project page; :class:`PageError` when it is cut short, of an unknown version or
    not a project page at all, :class:`PageTimeoutError` once ``expired()``."""
    parser = _Anchors()
    _feed(parser, text, expired)
    files = [
        file
        for anchor in _bounded(parser.anchors, expired, "links read")
        if (file := _html_file(anchor)) is not None and _is_file(file.filename)
    ]
    project = canonicalize_name(distribution)
    releases, others = _release_list(files, project, index_url, HTML_API, expired)
    _check_page(parser, len(files), others, project)
    return releases
