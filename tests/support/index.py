"""A PEP 503 / PEP 691 package index served on loopback from files on disk.

uv, pip and patchlane's own probes talk to it exactly as they would to a real index:
JSON when asked for ``application/vnd.pypi.simple.v1+json`` (with PEP 700 upload times,
which ``exclude-newer`` needs, unless a file is added with none, as some nightly indexes serve
them), HTML otherwise. The index's ``api`` and ``upload_times`` make it
behave like the other indexes in the wild:

- ``api="html"``: PEP 503 only — HTML whatever the request asks for (the PyTorch nightly index,
  pypiserver, many Artifactory / Nexus set-ups);
- ``upload_times=False``: no PEP 700 ``upload-time`` in JSON, no ``data-upload-time`` in HTML.

:func:`write_static_tree` writes the same index as a static ``simple/`` folder (HTML pages and the
files beside them) and :class:`StaticIndexServer` serves it with the standard library's file
server, as a web server in front of a folder would.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import shutil
import threading
import time
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass
class IndexFile:
    path: Path
    # None: the index does not say (no PEP 700 upload-time)
    upload_time: datetime | None
    yanked: bool | str = False
    requires_python: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    @property
    def core_metadata(self) -> bytes | None:
        """The wheel's METADATA, served beside it as PEP 658 / 714 metadata."""
        if not self.path.name.endswith(".whl"):
            return None
        with zipfile.ZipFile(self.path) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            return archive.read(name)


def _project_of(filename: str) -> tuple[str, str]:
    if filename.endswith(".whl"):
        name, version, _, _ = parse_wheel_filename(filename)
    else:
        name, version = parse_sdist_filename(filename)
    return canonicalize_name(name), str(version)


@dataclass
class PackageIndex:
    """Files by project; ``add`` more at any time, the server reads them per request."""

    files: dict[str, list[IndexFile]] = field(default_factory=dict)
    latency: float = 0.0
    requests: list[str] = field(default_factory=list)
    # both | html (PEP 503 only: HTML whatever the Accept header says)
    api: str = "both"
    # PEP 700 upload-time / data-upload-time
    upload_times: bool = True
    # (username, password): every request without this HTTP basic auth gets 401, as a private
    # index answers
    credentials: tuple[str, str] | None = None

    def add(
        self,
        path: Path,
        upload_time: datetime | str | None,
        *,
        yanked: bool | str = False,
        requires_python: str | None = None,
    ) -> IndexFile:
        if isinstance(upload_time, str):
            upload_time = datetime.fromisoformat(upload_time)
        if upload_time is not None and upload_time.tzinfo is None:
            upload_time = upload_time.replace(tzinfo=UTC)
        project, _ = _project_of(path.name)
        entry = IndexFile(path, upload_time, yanked, requires_python)
        self.files.setdefault(project, []).append(entry)
        return entry

    def find(self, filename: str) -> IndexFile | None:
        for entries in self.files.values():
            for entry in entries:
                if entry.path.name == filename:
                    return entry
        return None


def _upload_time(entry: IndexFile) -> str:
    return entry.upload_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _file_json(base: str, entry: IndexFile, upload_times: bool = True) -> dict:
    data = {
        "filename": entry.path.name,
        "url": f"{base}/files/{entry.path.name}",
        "hashes": {"sha256": entry.sha256},
        "size": entry.path.stat().st_size,
        "yanked": entry.yanked,
    }
    if upload_times and entry.upload_time is not None:
        data["upload-time"] = _upload_time(entry)
    if entry.requires_python:
        data["requires-python"] = entry.requires_python
    metadata = entry.core_metadata
    if metadata is not None:
        data["core-metadata"] = {"sha256": hashlib.sha256(metadata).hexdigest()}
    return data


def project_page(index: PackageIndex, entries: list[IndexFile], files_url: str) -> str:
    """The PEP 503 page of one project: an anchor per file, its hash in the fragment, the
    ``data-*`` attributes of PEP 592 / 503 / 714 (and ``data-upload-time`` when the index has
    them)."""
    rows = []
    for e in entries:
        attrs = ""
        if e.yanked:
            reason = e.yanked if isinstance(e.yanked, str) else ""
            attrs += f' data-yanked="{html.escape(reason)}"'
        if e.requires_python:
            attrs += f' data-requires-python="{html.escape(e.requires_python)}"'
        if e.core_metadata is not None:
            digest = hashlib.sha256(e.core_metadata).hexdigest()
            attrs += (
                f' data-core-metadata="sha256={digest}" data-dist-info-metadata="sha256={digest}"'
            )
        if index.upload_times and e.upload_time is not None:
            attrs += f' data-upload-time="{_upload_time(e)}"'
        rows.append(
            f'<a href="{files_url}{e.path.name}#sha256={e.sha256}"{attrs}>{e.path.name}</a>'
        )
    return (
        '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" '
        'content="1.0"></head><body>\n' + "\n".join(rows) + "\n</body></html>\n"
    )


def write_static_tree(index: PackageIndex, root: Path) -> Path:
    """The index as static files: ``root/simple/<project>/index.html`` with relative links to
    ``root/files/<file>``; returns ``root``."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    names = sorted(index.files)
    (root / "simple").mkdir(parents=True, exist_ok=True)
    links = "".join(f'<a href="{n}/">{n}</a>\n' for n in names)
    (root / "simple" / "index.html").write_text(
        f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"
    )
    for name in names:
        entries = index.files[name]
        for entry in entries:
            shutil.copyfile(entry.path, root / "files" / entry.path.name)
        (root / "simple" / name).mkdir(exist_ok=True)
        (root / "simple" / name / "index.html").write_text(
            project_page(index, entries, "../../files/")
        )
    return root


class StaticIndexServer:
    """A folder served by the standard library's file server (``python -m http.server``): a
    static ``simple/`` tree answers HTML whatever is asked, and redirects ``/simple/x`` to
    ``/simple/x/`` like any web server in front of a folder."""

    def __init__(self, root: Path) -> None:
        handler = functools.partial(_QuietFiles, directory=str(root))
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/simple"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _make_handler(index: PackageIndex):
    class Handler(BaseHTTPRequestHandler):
        # keep test output clean
        def log_message(self, *args):
            pass

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self):
            self.do_GET()

        def _authorized(self) -> bool:
            if index.credentials is None:
                return True
            user, password = index.credentials
            expected = base64.b64encode(f"{user}:{password}".encode()).decode()
            if self.headers.get("Authorization") == f"Basic {expected}":
                return True
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="index"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False

        def do_GET(self):
            index.requests.append(self.path)
            if not self._authorized():
                return None
            if index.latency:
                time.sleep(index.latency)
            parts = [unquote(p) for p in urlsplit(self.path).path.split("/") if p]
            base = f"http://{self.headers['Host']}"
            wants_json = JSON_TYPE in (self.headers.get("Accept") or "") and index.api != "html"
            if parts == ["simple"]:
                names = sorted(index.files)
                if wants_json:
                    body = {
                        "meta": {"api-version": "1.1"},
                        "projects": [{"name": n} for n in names],
                    }
                    return self._send(200, json.dumps(body).encode(), JSON_TYPE)
                links = "".join(f'<a href="/simple/{n}/">{n}</a>\n' for n in names)
                return self._send(200, f"<html><body>{links}</body></html>".encode(), "text/html")
            if len(parts) == 2 and parts[0] == "simple":
                project = canonicalize_name(parts[1])
                if project != parts[1]:
                    self.send_response(301)
                    self.send_header("Location", f"/simple/{project}/")
                    self.end_headers()
                    return None
                entries = index.files.get(project)
                if not entries:
                    return self._send(404, b"not found", "text/plain")
                if wants_json:
                    versions = sorted({_project_of(e.path.name)[1] for e in entries})
                    body = {
                        "meta": {"api-version": "1.1"},
                        "name": project,
                        "versions": versions,
                        "files": [_file_json(base, e, index.upload_times) for e in entries],
                    }
                    return self._send(200, json.dumps(body).encode(), JSON_TYPE)
                return self._send(
                    200, project_page(index, entries, f"{base}/files/").encode(), "text/html"
                )
            if len(parts) == 2 and parts[0] == "files" and parts[1].endswith(".metadata"):
                entry = index.find(parts[1].removesuffix(".metadata"))
                metadata = entry.core_metadata if entry else None
                if metadata is None:
                    return self._send(404, b"not found", "text/plain")
                return self._send(200, metadata, "text/plain")
            if len(parts) == 2 and parts[0] == "files":
                entry = index.find(parts[1])
                if entry is None:
                    return self._send(404, b"not found", "text/plain")
                return self._send(200, entry.path.read_bytes(), "application/octet-stream")
            return self._send(404, b"not found", "text/plain")

    return Handler


class _Server(ThreadingHTTPServer):
    # http.server listens with a backlog of 5; uv opens dozens of connections at once and the
    # kernel would drop the rest, each costing the client a one-second retry.
    request_queue_size = 1024
    daemon_threads = True


class IndexServer:
    """Serve a :class:`PackageIndex` on 127.0.0.1 in a daemon thread; use as a context manager."""

    def __init__(self, index: PackageIndex | None = None) -> None:
        self.index = index or PackageIndex()
        self._server = _Server(("127.0.0.1", 0), _make_handler(self.index))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/simple"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
