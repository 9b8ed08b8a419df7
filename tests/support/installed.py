"""Wheels of distributions this interpreter has installed, repacked from their RECORD.

A loopback index (tests/support/index.py) over these serves the engine's real dependencies — the
exact versions and files the tests run with, uv's binary included — so an install test resolves
``patchlane[engine]`` with pip or uv and no network, no download, no warm cache to rely on.
"""

from __future__ import annotations

import base64
import hashlib
import stat
import sysconfig
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

__all__ = ["closure", "repack"]

# Files an installer writes into .dist-info: they describe one installation, not the wheel.
_INSTALL_RECORDS = frozenset({"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"})


def closure(requirements: Iterable[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions ``requirements`` need, extras and markers followed, by name."""
    environment = {str(key): str(value) for key, value in default_environment().items()}
    found: dict[str, metadata.Distribution] = {}
    extras_seen: dict[str, set[str]] = {}
    todo = [Requirement(text) for text in requirements]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        wanted = set(requirement.extras)
        if name in found and wanted <= extras_seen[name]:
            continue
        distribution = found.get(name) or metadata.distribution(name)
        found[name] = distribution
        extras_seen.setdefault(name, set()).update(wanted)
        for text in distribution.requires or []:
            dependency = Requirement(text)
            marker = dependency.marker
            if marker is None or any(
                marker.evaluate({**environment, "extra": extra})
                for extra in ("", *extras_seen[name])
            ):
                todo.append(dependency)
    return found


def _hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _tag(wheel_text: str) -> str:
    """The compressed tag set of a WHEEL file's ``Tag:`` lines (``py3-none-manylinux_…``)."""
    tags = [
        line.split(":", 1)[1].strip() for line in wheel_text.splitlines() if line.startswith("Tag:")
    ]
    parts = [sorted({tag.split("-")[i] for tag in tags}) for i in range(3)]
    return "-".join(".".join(part) for part in parts)


def repack(distribution: metadata.Distribution, dest: Path) -> Path:
    """Write the wheel ``distribution`` was installed from (its files, WHEEL tags) in ``dest``."""
    files = distribution.files or []
    info = next(
        f.parent for f in files if f.name == "METADATA" and f.parent.name.endswith(".dist-info")
    )
    data = info.name.removesuffix(".dist-info") + ".data"
    generated = {
        entry.name
        for entry in distribution.entry_points
        if entry.group in ("console_scripts", "gui_scripts")
    }
    scripts = Path(sysconfig.get_path("scripts")).resolve()
    prefix = Path(sysconfig.get_path("data")).resolve()
    entries: dict[str, tuple[bytes, int]] = {}
    for file in files:
        if "__pycache__" in file.parts or file.suffix == ".pyc":
            continue
        if file.parent == info and file.name in _INSTALL_RECORDS:
            continue
        source = Path(str(distribution.locate_file(file))).resolve()
        if not file.as_posix().startswith("../"):
            name = file.as_posix()
        elif source.parent == scripts:
            # Console scripts are made again by the installer from entry_points.txt; a binary
            # (uv's) is the wheel's own data.
            if source.name in generated:
                continue
            name = f"{data}/scripts/{source.name}"
        else:
            name = f"{data}/data/{source.relative_to(prefix).as_posix()}"
        entries[name] = (source.read_bytes(), source.stat().st_mode & 0o777)
    record = [f"{name},{_hash(body)},{len(body)}" for name, (body, _) in entries.items()]
    record.append(f"{info.name}/RECORD,,")
    entries[f"{info.name}/RECORD"] = ("\n".join(record).encode() + b"\n", 0o644)
    stem = canonicalize_name(distribution.metadata["Name"]).replace("-", "_")
    wheel_text = distribution.read_text("WHEEL") or ""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{stem}-{distribution.version}-{_tag(wheel_text)}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, (body, mode) in entries.items():
            entry = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            # a regular file's type bits too: pip makes a file executable only when they say so
            entry.external_attr = (stat.S_IFREG | (mode or 0o644)) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, body)
    return path
