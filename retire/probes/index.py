"""The index probe: the releases of a distribution through the PEP 691 JSON simple API.

Upload times come from PEP 700 (``upload-time``), yanks from PEP 592 (a release is yanked when
all its files are). Pre-releases and nightlies (``.devYYYYMMDD``) are kept and flagged; the
reader decides (``ReleaseList.matching`` follows pip's pre-release rule).

The index URL is the lane's, else the one given, else this host's uv default
(``retire.uv.host_indexes().default``); no registry is named here.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from retire.core import times
from retire.evidence.values import ProbeFailure, Release, ReleaseFile, ReleaseList
from retire.probes.http import Fetched, Fetcher

__all__ = ["JSON_TYPE", "parse_project", "probe_releases", "project_url"]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def project_url(index_url: str, distribution: str) -> str:
    return f"{index_url.rstrip('/')}/{canonicalize_name(distribution)}/"


def _moment(text: object) -> _dt.datetime | None:
    """A PEP 700 ``upload-time`` (UTC by the spec), or None when absent or unreadable."""
    try:
        return times.parse(text, assume_utc=True) if text is not None else None
    except times.TimeError:
        return None


def _version_of(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None  # .egg, .exe, odd names: not something a lane installs


def parse_project(data: object, distribution: str, index_url: str) -> ReleaseList | str:
    """A PEP 691 project page into a ReleaseList, or what is wrong with it."""
    if not isinstance(data, dict):
        return "the project page is not a JSON object"
    meta = data.get("meta")
    version = meta.get("api-version") if isinstance(meta, dict) else None
    if not isinstance(version, str) or not version.startswith("1."):
        return f"unsupported simple API version {version!r} (PEP 691 needs 1.x)"
    files = data.get("files")
    if not isinstance(files, list):
        return "no 'files' list in the project page"
    by_version: dict[Version, list[ReleaseFile]] = {}
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            return "a file entry has no filename"
        found = _version_of(item["filename"])
        if found is None:
            continue
        yanked = item.get("yanked", False)
        by_version.setdefault(found, []).append(ReleaseFile(
            filename=item["filename"],
            upload_time=_moment(item.get("upload-time")),
            yanked=bool(yanked),
            yanked_reason=yanked if isinstance(yanked, str) and yanked else None,
        ))
    releases = tuple(Release(v, tuple(by_version[v])) for v in sorted(by_version))
    return ReleaseList(canonicalize_name(distribution), index_url, releases)


def probe_releases(fetcher: Fetcher, distribution: str, index_urls: Sequence[str]) -> ReleaseList | ProbeFailure:
    """The releases of ``distribution`` on the first of ``index_urls`` that has the project
    (uv's first-index rule); never raises."""
    name = canonicalize_name(distribution)
    if not index_urls:
        return ProbeFailure("index", name, "no index URL: set UV_DEFAULT_INDEX or give the lane an index")
    for index_url in index_urls:
        url = project_url(index_url, name)
        answer = fetcher.get_json(url, probe="index", accept=JSON_TYPE)
        if isinstance(answer, ProbeFailure):
            return answer
        if isinstance(answer, Fetched):  # 404 / 410: try the next index
            continue
        data, fetched = answer
        content_type = fetched.headers.get("content-type", "")
        if content_type and "json" not in content_type:
            return ProbeFailure("index", url, f"the index answered {content_type}, not PEP 691 JSON")
        parsed = parse_project(data, name, index_url)
        if isinstance(parsed, str):
            return ProbeFailure("index", url, f"invalid PEP 691 response: {parsed}")
        return parsed
    where = ", ".join(index_urls)
    return ProbeFailure("index", name, f"no project {name!r} on {where}")
