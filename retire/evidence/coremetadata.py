"""Where a distribution says its code lives: the URLs of its core metadata (``METADATA``).

A wheel's metadata names its repository in ``Project-URL: <label>, <url>`` entries (``Source``,
``Repository``, ``Homepage``…), in ``Home-page`` and in ``Download-URL``. They are read from the
text of a ``METADATA`` file — an installed copy's (:func:`installed_metadata`), or the one an
index serves beside a wheel (PEP 658 / 714, :mod:`retire.probes.coremeta`) — into
:class:`MetadataUrl` values, the ones most likely to name the code first: a source-like
``Project-URL`` label, then any other, then ``Home-page``, then ``Download-URL``.
"""

from __future__ import annotations

import email.parser
import os
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.core.errors import InputError
from shims.filereading import read_text

__all__ = [
    "MetadataUrl",
    "installed_metadata",
    "label_key",
    "metadata_urls",
]

#: PEP 753 normalised ``Project-URL`` labels that name the code, most specific first.
_SOURCE_LABELS = ("source", "sourcecode", "repository", "code", "github", "gitlab", "homepage")
_DROPPED = str.maketrans("", "", string.punctuation + string.whitespace)
#: A METADATA file is a few kilobytes; a long description can make it a few hundred.
_MAX_BYTES = 4 << 20


def label_key(label: str) -> str:
    """PEP 753's label normalisation: punctuation and whitespace removed, lower case."""
    return label.translate(_DROPPED).lower()


@dataclass(frozen=True)
class MetadataUrl:
    """One URL a distribution's metadata names, and where it was read."""

    # Project-URL | Home-page | Download-URL
    field: str
    url: str
    # the Project-URL's label ("" for the other fields)
    label: str = ""
    # whose metadata: "the wheel", "the installed liger-kernel 0.8.1"
    origin: str = "the wheel"

    @property
    def named(self) -> str:
        """``the wheel's Project-URL Source``, ``the wheel's Home-page``."""
        what = f"{self.field} {self.label}" if self.label else self.field
        return f"{self.origin}'s {what}"


def _rank(item: MetadataUrl) -> tuple[int, int]:
    if item.field == "Project-URL":
        key = label_key(item.label)
        return (0, _SOURCE_LABELS.index(key)) if key in _SOURCE_LABELS else (1, 0)
    return (2, 0) if item.field == "Home-page" else (3, 0)


def metadata_urls(text: str, origin: str = "the wheel") -> tuple[MetadataUrl, ...]:
    """The URLs a core-metadata text names, the likeliest to name the code first; entries
    without a URL are passed over."""
    message = email.parser.HeaderParser().parsestr(text, headersonly=True)
    found: list[MetadataUrl] = []
    for entry in message.get_all("Project-URL") or []:
        label, comma, url = str(entry).partition(",")
        if comma and url.strip():
            found.append(MetadataUrl("Project-URL", url.strip(), label.strip(), origin))
    for field in ("Home-page", "Download-URL"):
        for value in message.get_all(field) or []:
            url = str(value).strip()
            if url and url.upper() != "UNKNOWN":
                found.append(MetadataUrl(field, url, "", origin))
    # stable: the file's own order within a rank
    return tuple(sorted(found, key=_rank))


def installed_metadata(
    site_dirs: Iterable[str | os.PathLike[str]], distribution: str
) -> tuple[MetadataUrl, ...]:
    """The URLs of ``distribution``'s ``METADATA`` where it is installed in one of ``site_dirs``
    (the first that has it); none when it is not, or its file cannot be read."""
    target = canonicalize_name(distribution)
    for site in site_dirs:
        try:
            infos = sorted(Path(site).glob("*.dist-info"))
        except OSError:
            continue
        for info in infos:
            name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
            if canonicalize_name(name) != target:
                continue
            try:
                text = read_text(info / "METADATA", max_bytes=_MAX_BYTES, missing_ok=True)
            except InputError:
                return ()
            origin = f"the installed {target} {version}"
            return metadata_urls(text, origin) if text is not None else ()
    return ()
