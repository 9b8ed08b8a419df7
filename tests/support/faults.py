"""Injectable faults for loopback servers, and the PEP 691 index with faults, ETags and latency.

A :class:`FaultPlan` maps URL path prefixes to :class:`Fault` values; a server asks it for the
fault of each request. ``FaultyIndexServer`` wraps ``tests.support.index``'s handler (subclass,
no edits there): faults first, then the normal answer, with an ``ETag`` and 304 on a matching
``If-None-Match`` so a warm probe run is cheap.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

from tests.support.index import IndexServer, PackageIndex, _make_handler


@dataclass
class Fault:
    """What to do to a request instead of (or on top of) answering it normally."""

    # seconds to sleep before anything else (beyond a client timeout: a timeout)
    latency: float = 0.0
    # answer with this status and ``body`` instead of the real answer
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"message": "injected fault"}'
    content_type: str = "application/json"
    # the real body cut in half, Content-Length matching: broken JSON
    truncate: bool = False
    # Content-Length of the whole body, half sent, connection closed
    short: bool = False
    # close the connection without any response
    drop: bool = False
    # with ``status``: the body one byte every ``drip`` seconds (a total deadline must end it)
    drip: float = 0.0
    # with ``status``: the body chunked, no Content-Length (only counting can cap it)
    chunked: bool = False
    # requests it applies to (None: all)
    times: int | None = None


def redirect(location: str, status: int = 302) -> Fault:
    """Answer with a redirect to ``location`` (on this host or another)."""
    return Fault(status=status, headers={"Location": location}, body=b"", content_type="text/plain")


def slow_drip(body: bytes, every: float, *, content_type: str = "application/json") -> Fault:
    """A 200 whose (valid) body arrives one byte every ``every`` seconds."""
    return Fault(status=200, body=body, content_type=content_type, drip=every)


def oversized(size: int, *, chunked: bool = False, content_type: str = "application/json") -> Fault:
    """A 200 with a body of ``size`` bytes (a JSON string, valid whatever its length)."""
    return Fault(
        status=200,
        body=b'"' + b"x" * max(0, size - 2) + b'"',
        content_type=content_type,
        chunked=chunked,
    )


class FaultPlan:
    """Faults by path prefix, thread-safe; records which faults fired."""

    def __init__(self) -> None:
        self._faults: list[tuple[str, Fault]] = []
        self._lock = threading.Lock()
        self.fired: list[tuple[str, Fault]] = []

    def add(self, prefix: str, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append((prefix, fault))
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, path: str) -> Fault | None:
        with self._lock:
            for prefix, fault in self._faults:
                if path.startswith(prefix) and (fault.times is None or fault.times > 0):
                    if fault.times is not None:
                        fault.times -= 1
                    self.fired.append((path, fault))
                    return fault
        return None


class LoopbackServer(ThreadingHTTPServer):
    """A threading server with a deep accept queue (100 probes connect at once) and quiet errors."""

    daemon_threads = True
    request_queue_size = 512

    # a client that gave up is normal here
    def handle_error(self, request, client_address) -> None:
        pass


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def drop_connection(handler) -> None:
    handler.close_connection = True
    # the client may have gone already
    with contextlib.suppress(OSError):
        handler.connection.shutdown(socket.SHUT_RDWR)


def send_fault_or_none(handler, fault: Fault | None) -> bool:
    """Apply the parts of ``fault`` that replace the answer; True when the request is done."""
    if fault is None:
        return False
    if fault.latency:
        time.sleep(fault.latency)
    if fault.drop:
        drop_connection(handler)
        return True
    if fault.status is not None:
        handler.send_response(fault.status)
        for name, value in fault.headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Type", fault.content_type)
        if fault.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(len(fault.body)))
        handler.end_headers()
        try:
            _write_fault_body(handler, fault)
        except OSError:
            # the client gave up (a deadline, a cap): that is the point
            drop_connection(handler)
        return True
    return False


def _write_fault_body(handler, fault: Fault) -> None:
    if fault.drip:
        for byte in range(len(fault.body)):
            handler.wfile.write(fault.body[byte : byte + 1])
            handler.wfile.flush()
            time.sleep(fault.drip)
    elif fault.chunked:
        for start in range(0, len(fault.body), 65536):
            piece = fault.body[start : start + 65536]
            handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        handler.wfile.write(b"0\r\n\r\n")
    else:
        handler.wfile.write(fault.body)


def send_body(
    handler,
    status: int,
    body: bytes,
    content_type: str,
    fault: Fault | None,
    extra_headers: dict[str, str] | None = None,
    etag: str | bool | None = None,
) -> None:
    """Send a body, honouring ``If-None-Match`` (304) and the body-mangling faults; ``etag=False``
    sends none (a POST answer)."""
    tag = (etag or etag_of(body)) if status == 200 and etag is not False else None
    if (
        tag
        and handler.headers.get("If-None-Match") == tag
        and not (fault and (fault.truncate or fault.short))
    ):
        handler.send_response(304)
        handler.send_header("ETag", tag)
        for name, value in (extra_headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        return
    sent, length = body, len(body)
    if fault and fault.truncate:
        sent = length_cut = body[: len(body) // 2]
        length = len(length_cut)
    elif fault and fault.short:
        sent = body[: len(body) // 2]
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(length))
    if tag:
        handler.send_header("ETag", tag)
    for name, value in (extra_headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(sent)
    if fault and fault.short:
        handler.wfile.flush()
        drop_connection(handler)


def project_state_tag(index: PackageIndex, path: str, accept: str) -> str | None:
    """An ETag for a project page from the index's state (file names, sizes, mtimes, yanks,
    upload times) — what a real index derives from its database, without rendering the page."""
    parts = [p for p in path.split("/") if p]
    if len(parts) != 2 or parts[0] != "simple":
        return None
    entries = index.files.get(parts[1])
    if not entries:
        return None
    state = [
        (
            e.path.name,
            e.path.stat().st_size,
            e.path.stat().st_mtime_ns,
            str(e.yanked),
            e.upload_time.isoformat(),
            e.requires_python,
        )
        for e in entries
    ]
    return '"' + hashlib.sha256(repr((accept, state)).encode()).hexdigest()[:32] + '"'


class FaultyIndexServer(IndexServer):
    """``IndexServer`` plus faults per path, ETag / 304, and a deep accept queue."""

    def __init__(self, index: PackageIndex | None = None, faults: FaultPlan | None = None) -> None:
        super().__init__(index)
        # replaced below by one that knows about faults
        self._server.server_close()
        self.faults = faults or FaultPlan()
        #: Cache-Control max-age to send (like a real index's 600 s); None sends none.
        self.max_age: int | None = None
        base = _make_handler(self.index)
        plan, index, server = self.faults, self.index, self

        class Handler(base):  # type: ignore[misc, valid-type]
            _fault: Fault | None = None
            _tag: str | None = None
            _sized = False
            disable_nagle_algorithm = True
            # keep-alive: a warm run's 304s skip the TCP handshakes
            protocol_version = "HTTP/1.1"

            def send_header(self, keyword, value):
                if keyword.lower() == "content-length":
                    self._sized = True
                super().send_header(keyword, value)

            def end_headers(self):
                # The base handler's redirect has no body and no length; on a keep-alive
                # connection the client would wait for one, so say it is empty.
                if not self._sized:
                    super().send_header("Content-Length", "0")
                self._sized = False
                super().end_headers()

            def do_GET(self):  # noqa: N802
                path = urlsplit(self.path).path
                self._fault = plan.take(path)
                if send_fault_or_none(self, self._fault):
                    return None
                self._tag = project_state_tag(index, path, self.headers.get("Accept") or "")
                mangled = self._fault is not None and (self._fault.truncate or self._fault.short)
                if self._tag and self.headers.get("If-None-Match") == self._tag and not mangled:
                    # what the base handler records, then its latency
                    index.requests.append(self.path)
                    if index.latency:
                        time.sleep(index.latency)
                    self.send_response(304)
                    self.send_header("ETag", self._tag)
                    if server.max_age is not None:
                        self.send_header("Cache-Control", f"max-age={server.max_age}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                return super().do_GET()

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                extra = (
                    {"Cache-Control": f"max-age={server.max_age}"}
                    if server.max_age is not None
                    else None
                )
                send_body(self, status, body, content_type, self._fault, extra, etag=self._tag)

        self._server = LoopbackServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )


def unused_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
