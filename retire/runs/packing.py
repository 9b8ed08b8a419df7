"""Which lane gets which GPUs: pure choices over a declared device list, and the pool that holds
them while lanes run side by side (``patchlane run -j N``).

A lane that needs ``n`` GPUs gets ``n`` of the host's GPUs of its kind that nobody holds; a lane
that says ``share = true`` may take GPUs other sharing lanes hold (the least loaded first), never
one an exclusive lane holds. A lane waits until its set is free; a need the host can never meet is
refused up front (:func:`unmet`), so nothing waits forever. Holds are host-wide file locks, so
separate patchlane processes (``nox -s lane -j N``) share out the GPUs too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from retire.core.errors import PatchlaneError
from retire.runs.gpus import Gpu
from shims.gpuneeds import GpuNeeds

__all__ = [
    "LOCKS_ENV",
    "GpuPool",
    "LeaseError",
    "choose",
    "held_gpus",
    "lease_file",
    "lock_folder",
    "on_gpus",
    "unmet",
]

_T = TypeVar("_T")
#: Where a host's GPU leases live (default: a folder per user in the temp folder).
LOCKS_ENV = "PATCHLANE_GPU_LOCKS"
# how often a lane waiting for GPUs held by another process looks again
_RETRY_S = 0.25


def _fitting(needs: GpuNeeds, gpus: Sequence[Gpu]) -> list[Gpu]:
    return [gpu for gpu in gpus if needs.unfit(gpu) is None]


def unmet(needs: GpuNeeds, gpus: Sequence[Gpu]) -> str | None:
    """Why ``gpus`` (all of a host's, or the set a lane was given) can never meet ``needs``, or
    None when they can."""
    if not needs.count:
        return None
    fitting = _fitting(needs, gpus)
    if len(fitting) >= needs.count:
        return None
    have = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    if not gpus:
        return f"needs {needs}, has no GPU"
    if needs.kind and len(fitting) < len(gpus):
        misfit = next(why for gpu in gpus if (why := needs.unfit(gpu)) is not None)
        return f"needs {needs}, has {have}, {len(fitting)} of that kind ({misfit})"
    return f"needs {needs}, has {have}"


def choose(
    needs: GpuNeeds,
    gpus: Sequence[Gpu],
    held: Mapping[str, int],
    exclusive: frozenset[str] = frozenset(),
) -> tuple[Gpu, ...] | None:
    """The GPUs to give a lane that needs ``needs`` now, or None when it must wait.

    ``held``: how many lanes hold each GPU id; ``exclusive``: the ids held by a lane that does not
    share. An exclusive need takes only GPUs nobody holds; a sharing one also those other sharing
    lanes hold, least loaded first. Ties go to the host's order. Pure.
    """
    if not needs.count:
        return ()
    fitting = _fitting(needs, gpus)
    if needs.share:
        free = [gpu for gpu in fitting if gpu.id not in exclusive]
        free.sort(key=lambda gpu: held.get(gpu.id, 0))
    else:
        free = [gpu for gpu in fitting if not held.get(gpu.id, 0)]
    if len(free) < needs.count:
        return None
    chosen = {gpu.id for gpu in free[: needs.count]}
    return tuple(gpu for gpu in gpus if gpu.id in chosen)


def lock_folder(environ: Mapping[str, str] | None = None) -> Path:
    """Where this host's GPU leases live: ``PATCHLANE_GPU_LOCKS``, else one folder per user in the
    temp folder (every patchlane process of the user on this host sees the same)."""
    environ = os.environ if environ is None else environ
    given = environ.get(LOCKS_ENV)
    if given:
        return Path(given)
    return Path(tempfile.gettempdir()) / f"patchlane-gpus-{os.getuid()}"


class GpuPool:
    """A host's GPUs, handed to lanes; :meth:`hold` waits for a set.

    A lane's hold on a GPU is a lock on ``<lock folder>/gpu-<id>.lock`` (``flock``: exclusive for a
    lane that does not share, shared for one that does), so lanes on threads of one run and lanes
    of separate runs on the host (``nox -s lane -j N`` starts one process per lane) never get the
    same GPU; a lock dies with its process.
    """

    def __init__(self, gpus: Sequence[Gpu], folder: Path | None = None) -> None:
        self.gpus = tuple(gpus)
        self.folder = folder or lock_folder()
        self._held: dict[str, int] = {}
        self._exclusive: set[str] = set()
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(
        self,
        needs: GpuNeeds,
        check: Callable[[], None] = lambda: None,
        waiting: Callable[[], None] = lambda: None,
    ) -> Iterator[tuple[Gpu, ...]]:
        """The GPUs of a lane while the block runs (waits until they are free, calling ``waiting``
        once first; ``check`` raises to stop waiting, e.g. a run being stopped). A need that
        :func:`unmet` refuses is a ValueError: check it before."""
        if (why := unmet(needs, self.gpus)) is not None:
            raise ValueError(why)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._changed:
            waited = False
            while (taken := self._take(needs)) is None:
                check()
                if not waited:
                    waiting()
                    waited = True
                # another process's release wakes nobody here: look again soon
                self._changed.wait(_RETRY_S)
            chosen, descriptors = taken
            for gpu in chosen:
                self._held[gpu.id] = self._held.get(gpu.id, 0) + 1
                if not needs.share:
                    self._exclusive.add(gpu.id)
        try:
            yield chosen
        finally:
            with self._changed:
                for descriptor in descriptors:
                    os.close(descriptor)
                for gpu in chosen:
                    self._held[gpu.id] -= 1
                    if not needs.share:
                        self._exclusive.discard(gpu.id)
                self._changed.notify_all()

    def _take(self, needs: GpuNeeds) -> tuple[tuple[Gpu, ...], list[int]] | None:
        """A set :func:`choose` picks and whose locks this process got, or None: wait. A GPU
        another process holds counts as held (exclusively, when even a shared lock failed)."""
        elsewhere: set[str] = set()
        while True:
            held = {**self._held, **dict.fromkeys(elsewhere, 1)}
            chosen = choose(needs, self.gpus, held, frozenset(self._exclusive | elsewhere))
            if chosen is None:
                return None
            descriptors: list[int] = []
            for gpu in chosen:
                descriptor = self._lock(gpu, shared=needs.share)
                if descriptor is None:
                    elsewhere.add(gpu.id)
                    break
                descriptors.append(descriptor)
            else:
                return chosen, descriptors
            for descriptor in descriptors:
                os.close(descriptor)

    def _lock(self, gpu: Gpu, *, shared: bool) -> int | None:
        """A descriptor holding ``gpu``'s lock (None when another holder refuses it)."""
        import fcntl

        descriptor = lease_file(self.folder / f"gpu-{gpu.id}.lock")
        try:
            fcntl.flock(descriptor, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError:
            os.close(descriptor)
            return None
        return descriptor


class LeaseError(PatchlaneError):
    """A GPU lease file that is not this user's own regular file (a planted link, another user's
    file): refused in one line naming it, never opened through."""


def lease_file(path: Path) -> int:
    """A read-write descriptor of the lease file ``path``, never through a link: opened with
    ``O_NOFOLLOW``, made with ``O_CREAT | O_EXCL`` (mode 0600) when missing, so a link planted in
    a folder others may write is refused and its target never created; the file must be a
    regular file of this user that nobody else may write (:class:`LeaseError` otherwise)."""
    flags = os.O_RDWR | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    while True:
        try:
            descriptor = os.open(path, flags)
        except FileNotFoundError:
            try:
                descriptor = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
            # made by another process meanwhile: open that one
            except FileExistsError:
                continue
            except OSError as exc:
                raise _refused(path, exc) from None
        except OSError as exc:
            raise _refused(path, exc) from None
        found = os.fstat(descriptor)
        problem = (
            "is not a regular file"
            if not stat.S_ISREG(found.st_mode)
            else f"belongs to user {found.st_uid}, not this one ({os.geteuid()})"
            if found.st_uid != os.geteuid()
            else f"may be written by others (mode {stat.S_IMODE(found.st_mode):o})"
            if found.st_mode & 0o022
            else None
        )
        if problem is None:
            return descriptor
        os.close(descriptor)
        raise LeaseError(f"{path}: {problem}: {_LEASE_FIX}")


#: What to do about a lease file that is refused.
_LEASE_FIX = (
    f"a GPU lease is only this user's own file — remove it, or point {LOCKS_ENV} at a folder "
    "only you can write"
)


def _refused(path: Path, exc: OSError) -> LeaseError:
    """The lease file could not be opened: a link (``O_NOFOLLOW``'s ELOOP) or another reason."""
    if exc.errno == errno.ELOOP or path.is_symlink():
        return LeaseError(f"{path}: is a symbolic link: not followed — {_LEASE_FIX}")
    return LeaseError(f"{path}: cannot be opened as a GPU lease: {exc.strerror or exc}")


@contextlib.contextmanager
def held_gpus(needs: GpuNeeds, say: Callable[[str], None]) -> Iterator[tuple[Gpu, ...]]:
    """This host's GPUs for work outside a lane run (a bisection's candidates): ``needs`` taken
    from the host-wide leases and every child started on this thread inside the block sees only
    them. Nothing is held where the host's GPUs are unknown, or cannot meet ``needs`` (the
    reproducer then says what it lacks)."""
    from retire.core import childenv
    from retire.runs.gpus import discover

    gpus = discover().gpus
    if not needs.count or not gpus or unmet(needs, gpus) is not None:
        yield ()
        return
    with GpuPool(gpus).hold(needs) as given:
        say(f"GPUs {', '.join(str(gpu) for gpu in given)}")
        with childenv.visible_devices(",".join(gpu.id for gpu in given)):
            yield given


def on_gpus(
    needs: GpuNeeds, function: Callable[..., _T], *, say: Callable[[str], None]
) -> Callable[..., _T]:
    """``function``, called inside :func:`held_gpus` for ``needs``."""

    def called(*args: object, **kwargs: object) -> _T:
        with held_gpus(needs, say):
            return function(*args, **kwargs)

    return called
