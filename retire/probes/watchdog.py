"""The watchdog that makes a probe's deadline total: at a body's deadline it shuts the connection.

Per-read timeouts alone let a server that trickles one byte a second run on forever; the
watchdog ends it at the deadline whatever the pace. One daemon thread serves every body being read
(a timer thread per request would cost more than a warm request itself).
"""

from __future__ import annotations

import contextlib
import heapq
import socket
import threading
import time

import httpx

__all__ = ["WATCHDOG", "Watchdog"]


def _shut(response: httpx.Response) -> None:
    """Shut the connection under ``response`` (from the watchdog thread): a blocked read returns."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class Watchdog:
    """Shuts the connection of each armed response at its deadline, unless disarmed first."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, httpx.Response]] = []
        self._live: set[int] = set()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._count = 0

    def arm(self, at: float, response: httpx.Response) -> int:
        with self._wake:
            self._count += 1
            heapq.heappush(self._due, (at, self._count, response))
            self._live.add(self._count)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="probe-deadlines", daemon=True
                )
                self._thread.start()
            if self._due[0][1] == self._count:
                self._wake.notify()
            return self._count

    def disarm(self, ticket: int) -> None:
        with self._wake:
            self._live.discard(ticket)

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._due and self._due[0][1] not in self._live:
                    heapq.heappop(self._due)
                if not self._due:
                    self._wake.wait()
                    continue
                at, ticket, response = self._due[0]
                left = at - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                heapq.heappop(self._due)
                self._live.discard(ticket)
            _shut(response)


WATCHDOG = Watchdog()
