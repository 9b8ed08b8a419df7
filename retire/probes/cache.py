"""The probes' HTTP cache: one JSON file per (URL, Accept), written atomically.

What is stored is what the :class:`~retire.probes.http.Fetcher` hands it: bodies with the
secrets already redacted, URLs with their credentials masked. ``Cache-Control: max-age`` makes an
entry fresh (no request at all); ``ETag`` / ``Last-Modified`` make the next request conditional.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from retire.core.atomic import atomic_write
from retire.probes.redaction import mask_url

__all__ = ["DEFAULT_CACHE_DIR", "CacheEntry", "HttpCache", "freshness"]

#: Relative to the project root.
DEFAULT_CACHE_DIR = Path(".patchlane") / "cache" / "http"


@dataclass(frozen=True)
class CacheEntry:
    url: str
    body: bytes
    etag: str | None
    last_modified: str | None
    # wall-clock seconds
    stored_at: float
    max_age: float | None
    content_type: str | None


class HttpCache:
    """One JSON file per (URL, Accept) under ``folder``; written atomically, safe across threads."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _path(self, url: str, accept: str) -> Path:
        key = hashlib.sha256(f"{url}\n{accept}".encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def get(self, url: str, accept: str) -> CacheEntry | None:
        try:
            data = json.loads(self._path(url, accept).read_text(encoding="utf-8"))
            return CacheEntry(
                url=data["url"],
                body=base64.b64decode(data["body"]),
                etag=data.get("etag"),
                last_modified=data.get("last_modified"),
                stored_at=float(data["stored_at"]),
                max_age=data.get("max_age"),
                content_type=data.get("content_type"),
            )
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            # missing or corrupt: fetch again
            return None

    def drop(self, url: str, accept: str) -> None:
        """Forget a body its reader refused: the next run must ask again, not revalidate it."""
        with contextlib.suppress(OSError):
            self._path(url, accept).unlink()

    def put(self, entry: CacheEntry, accept: str) -> None:
        data = {
            "url": mask_url(entry.url),
            "body": base64.b64encode(entry.body).decode(),
            "etag": entry.etag,
            "last_modified": entry.last_modified,
            "stored_at": entry.stored_at,
            "max_age": entry.max_age,
            "content_type": entry.content_type,
        }
        # a cache that cannot be written only costs speed
        with contextlib.suppress(OSError):
            atomic_write(self._path(entry.url, accept), json.dumps(data), within=self.folder)


def freshness(headers: Mapping[str, str]) -> tuple[bool, float | None]:
    """(storable, max-age seconds) from Cache-Control."""
    control = (headers.get("cache-control") or "").lower()
    if "no-store" in control:
        return False, None
    if "no-cache" in control:
        return True, 0.0
    found = re.search(r"max-age=(\d+)", control)
    return True, (float(found.group(1)) if found else None)
