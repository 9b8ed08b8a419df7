"""A release's core metadata as the index serves it beside a wheel (PEP 658 / 714), for the URLs
it names (:mod:`retire.evidence.coremetadata`): where the distribution says its code lives.

The project's PEP 691 JSON page names each file's URL and whether its metadata is served
(``core-metadata``); the newest release with a wheel whose metadata is
served gives ``<wheel URL>.metadata``, a few kilobytes. An index that serves only PEP 503 HTML,
or no metadata, gives none: a convenience, never a failure of whatever asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urldefrag, urljoin

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from retire.evidence.coremetadata import MetadataUrl, metadata_urls
from retire.evidence.values import ProbeFailure
from retire.probes.fetched import BadBodyError, decode_json
from retire.probes.http import Fetcher
from retire.probes.index import JSON_TYPE, project_url

__all__ = ["index_metadata"]

#: A METADATA file is a few kilobytes; a long description can make it a few hundred.
_MAX_BYTES = 4 << 20


def _wheels(page: object, distribution: str) -> list[tuple[Version, str]]:
    """(version, URL as the page gives it) of every wheel of ``distribution`` whose metadata the
    index serves."""
    files = page.get("files") if isinstance(page, Mapping) else None
    found: list[tuple[Version, str]] = []
    for item in files if isinstance(files, list) else []:
        if not isinstance(item, Mapping):
            continue
        name, url = item.get("filename"), item.get("url")
        served = item.get("core-metadata", item.get("dist-info-metadata"))
        if not (isinstance(name, str) and isinstance(url, str) and served):
            continue
        try:
            project, version, _, _ = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if project == distribution:
            found.append((version, url))
    return found


def index_metadata(fetcher: Fetcher, index_url: str, distribution: str) -> tuple[MetadataUrl, ...]:
    """The URLs the core metadata of ``distribution`` (its newest release with served metadata)
    names on ``index_url``; none when the index serves no JSON page or no metadata, or a look-up
    fails (never raises)."""
    name = canonicalize_name(distribution)
    page_url = project_url(index_url, name)
    fetched = fetcher.get(page_url, probe="index", accept=JSON_TYPE)
    if isinstance(fetched, ProbeFailure) or fetched.status != 200:
        return ()
    try:
        page = decode_json(fetched)
    except BadBodyError:
        return ()
    wheels = _wheels(page, name)
    if not wheels:
        return ()
    newest, url = max(wheels, key=lambda wheel: wheel[0])
    metadata = urldefrag(urljoin(page_url, url)).url + ".metadata"
    answer = fetcher.get(metadata, probe="index", accept="*/*")
    if isinstance(answer, ProbeFailure) or answer.status != 200 or len(answer.body) > _MAX_BYTES:
        return ()
    text = answer.body.decode("utf-8", errors="replace")
    return metadata_urls(text, f"the {name} {newest} wheel")
