"""Release notes of an upgraded package, where the index gives them (never raises).

A bump PR links each upgraded package's release notes so a reviewer can read what changed. The
index says where they are: the core metadata of the locked wheel (PEP 658 / 714, served beside
the wheel as ``<wheel URL>.metadata``, a few kilobytes) lists ``Project-URL: <label>, <url>``
entries, and a label that normalises (PEP 753: lower case, punctuation and spaces removed) to
``changelog``, ``releasenotes``, ``changes``, ``whatsnew``, ``history`` or ``news`` names the
notes. A package whose metadata names none, an index without PEP 658, or a failed look-up gives
no link: a link is a convenience, so nothing here can fail a bump.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name

from retire.evidence.coremetadata import label_key, metadata_urls
from retire.evidence.values import ProbeFailure

__all__ = ["NOTES_LABELS", "notes_url", "release_notes"]

#: PEP 753 normalised labels that name release notes, the most specific first.
NOTES_LABELS = ("releasenotes", "changelog", "changes", "whatsnew", "history", "news")


def notes_url(metadata: str) -> str | None:
    """The release-notes URL a core-metadata text names, or None."""
    found: dict[str, str] = {}
    for entry in metadata_urls(metadata):
        key = label_key(entry.label)
        web = urlsplit(entry.url).scheme in ("https", "http")
        if entry.field == "Project-URL" and web and key in NOTES_LABELS:
            found.setdefault(key, entry.url)
    return next((found[label] for label in NOTES_LABELS if label in found), None)


def _wheel_url(lock: Mapping, name: str, version: str) -> str | None:
    for package in lock.get("packages", []):
        if (
            isinstance(package, Mapping)
            and canonicalize_name(str(package.get("name", ""))) == name
            and str(package.get("version")) == version
        ):
            for wheel in package.get("wheels") or []:
                url = wheel.get("url") if isinstance(wheel, Mapping) else None
                if isinstance(url, str) and urlsplit(url).scheme in ("https", "http"):
                    return url
    return None


def release_notes(
    fetcher, lock: Mapping | None, upgraded: Iterable[tuple[str, str]]
) -> dict[str, str]:
    """``{canonical name: notes URL}`` for the ``(name, new version)`` pairs whose locked wheel's
    metadata names release notes. ``fetcher`` is a :class:`retire.probes.http.Fetcher`."""
    found: dict[str, str] = {}
    for name, version in upgraded:
        name = canonicalize_name(name)
        url = _wheel_url(lock or {}, name, version)
        if url is None or name in found:
            continue
        fetched = fetcher.get(url + ".metadata", probe="index", accept="*/*")
        if isinstance(fetched, ProbeFailure) or fetched.status != 200:
            continue
        link = notes_url(fetched.body.decode("utf-8", errors="replace"))
        if link:
            found[name] = link
    return found
