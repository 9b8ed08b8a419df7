"""Build real, installable wheels and sdists for tests (no setuptools, no network)."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _metadata(
    name: str,
    version: str,
    requires: list[str],
    requires_python: str | None,
    project_urls: dict[str, str] | None = None,
) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {req}" for req in requires]
    lines += [f"Project-URL: {label}, {url}" for label, url in (project_urls or {}).items()]
    return "\n".join(lines) + "\n"


def build_wheel(
    dest: Path,
    name: str,
    version: str,
    *,
    requires: list[str] | None = None,
    files: dict[str, str] | None = None,
    requires_python: str | None = None,
    tag: str = "py3-none-any",
    project_urls: dict[str, str] | None = None,
) -> Path:
    """Write ``name-version-tag.whl`` into ``dest``; ``files`` maps archive paths to source text."""
    dest.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(name).replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    if files is None:
        files = {f"{dist}/__init__.py": f'__version__ = "{version}"\n'}
    contents = dict(files)
    contents[f"{info}/METADATA"] = _metadata(
        name, version, requires or [], requires_python, project_urls
    )
    contents[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: patchlane-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    )
    record = [
        f"{path},{_record_hash(text.encode())},{len(text.encode())}"
        for path, text in contents.items()
    ]
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = dest / f"{dist}-{version}-{tag}.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for arcname, text in contents.items():
            info_entry = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info_entry.external_attr = 0o644 << 16
            archive.writestr(info_entry, text)
    path.write_bytes(buffer.getvalue())
    return path


def build_sdist(dest: Path, name: str, version: str, *, requires: list[str] | None = None) -> Path:
    """An sdist whose build always fails, like a CUDA extension on a host without nvcc."""
    dest.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(name).replace("-", "_")
    root = f"{dist}-{version}"
    members = {
        f"{root}/PKG-INFO": _metadata(name, version, requires or [], None),
        f"{root}/pyproject.toml": (
            "[build-system]\nrequires = []\nbuild-backend = 'backend'\nbackend-path = ['.']\n"
        ),
        f"{root}/backend.py": "raise SystemExit('this sdist needs nvcc and a GPU to build')\n",
    }
    path = dest / f"{root}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for arcname, text in members.items():
            data = text.encode()
            member = tarfile.TarInfo(arcname)
            member.size = len(data)
            member.mtime = 1577836800
            archive.addfile(member, io.BytesIO(data))
    return path
