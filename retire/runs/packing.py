"""Which lane gets which GPUs: pure choices over a declared device list, and the pool that holds
them while lanes run side by side (``patchlane run -j N``).

A lane that needs ``n`` GPUs gets ``n`` of the host's GPUs of its kind that nobody holds; a lane
that says ``share = true`` may take GPUs other sharing lanes hold (the least loaded first), never
one an exclusive lane holds. A lane waits until its set is free; a need the host can never meet is
refused up front (:func:`unmet`), so nothing waits forever.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence

from retire.runs.gpus import Gpu
from shims.gpuneeds import GpuNeeds

__all__ = ["GpuPool", "choose", "unmet"]


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


class GpuPool:
    """A host's GPUs, handed to lanes running on several threads; :meth:`hold` waits for a set."""

    def __init__(self, gpus: Sequence[Gpu]) -> None:
        self.gpus = tuple(gpus)
        self._held: dict[str, int] = {}
        self._exclusive: set[str] = set()
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, needs: GpuNeeds) -> Iterator[tuple[Gpu, ...]]:
        """The GPUs of a lane while the block runs (waits until they are free). A need that
        :func:`unmet` refuses is a ValueError: check it before."""
        if (why := unmet(needs, self.gpus)) is not None:
            raise ValueError(why)
        with self._changed:
            while (chosen := self._choose(needs)) is None:
                self._changed.wait()
            for gpu in chosen:
                self._held[gpu.id] = self._held.get(gpu.id, 0) + 1
                if not needs.share:
                    self._exclusive.add(gpu.id)
        try:
            yield chosen
        finally:
            with self._changed:
                for gpu in chosen:
                    self._held[gpu.id] -= 1
                    if not needs.share:
                        self._exclusive.discard(gpu.id)
                self._changed.notify_all()

    def _choose(self, needs: GpuNeeds) -> tuple[Gpu, ...] | None:
        return choose(needs, self.gpus, self._held, frozenset(self._exclusive))
