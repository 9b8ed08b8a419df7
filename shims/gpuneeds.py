"""What GPUs a lane or a reproducer needs: how many, and optionally what kind.

Written the same way in a lane file (``[lane] gpus``) and a shim manifest (``[reproducer] gpus``):
a count (``gpus = 2``) or a table::

    gpus = { count = 2, min-compute-capability = "9.0", min-memory-gib = 80, name = "h200" }

``name`` is matched, case-insensitively, as a word of the device's name (``h200`` matches
"NVIDIA H200"); ``share = true`` lets the lane's GPUs be given to other lanes that may share too
(a GPU is never shared with a lane that did not say so). Standard library only: the runtime's
manifest reader uses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from shims.tomlreader import Value

__all__ = ["MAX_GPUS", "Device", "GpuNeeds", "read_gpu_needs"]

#: The most GPUs one lane or reproducer may ask for (a host of 8, a few hosts of a job).
MAX_GPUS = 64
_CAPABILITY = re.compile(r"[0-9]+\.[0-9]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")
_KEYS = ("count", "min-compute-capability", "min-memory-gib", "name", "share")
_EXAMPLE = 'gpus = 2, or gpus = { count = 2, min-compute-capability = "9.0", name = "h100" }'


class Device(Protocol):
    """What a need is checked against: one GPU as discovered or declared (retire.runs.gpus)."""

    @property
    def name(self) -> str: ...

    @property
    def compute_capability(self) -> str | None: ...

    @property
    def memory_gib(self) -> float | None: ...


def _capability(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class GpuNeeds:
    """``count`` GPUs, each of at least ``min_compute_capability`` and ``min_memory_gib``, named
    like ``name``; ``share``: may be given to other sharing lanes at the same time."""

    count: int = 0
    min_compute_capability: str | None = None
    min_memory_gib: float | None = None
    name: str | None = None
    share: bool = False

    @property
    def kind(self) -> str:
        """The kind asked for, in words ("" when any GPU will do)."""
        parts = []
        if self.name:
            parts.append(self.name)
        if self.min_compute_capability:
            parts.append(f"compute capability ≥ {self.min_compute_capability}")
        if self.min_memory_gib:
            parts.append(f"≥ {self.min_memory_gib:g} GiB")
        return ", ".join(parts)

    def __str__(self) -> str:
        if not self.count:
            return "no GPU"
        text = f"{self.count} GPU{'s' if self.count > 1 else ''}"
        text += f" ({self.kind})" if self.kind else ""
        return text + (", shared" if self.share else "")

    def unfit(self, device: Device) -> str | None:
        """Why ``device`` is not of the kind asked for, or None when it is."""
        if self.name and not re.search(
            rf"(?<![A-Za-z0-9]){re.escape(self.name)}(?![A-Za-z0-9])", device.name, re.IGNORECASE
        ):
            return f"{device.name} is not {self.name}"
        if self.min_compute_capability:
            have = device.compute_capability
            if have is None or _capability(have) < _capability(self.min_compute_capability):
                return (
                    f"{device.name} has compute capability {have or 'unknown'}, "
                    f"< {self.min_compute_capability}"
                )
        if self.min_memory_gib:
            memory = device.memory_gib
            if memory is None or memory < self.min_memory_gib:
                shown = "unknown" if memory is None else f"{memory:g} GiB"
                return f"{device.name} has {shown} of memory, < {self.min_memory_gib:g} GiB"
        return None

    def to_json(self) -> dict[str, object]:
        return {
            "count": self.count,
            "min_compute_capability": self.min_compute_capability,
            "min_memory_gib": self.min_memory_gib,
            "name": self.name,
            "share": self.share,
        }


def read_gpu_needs(value: Value) -> GpuNeeds:
    """A ``gpus`` key: a count or a table of count and kind; one-line InputError otherwise."""
    if not isinstance(value.raw, dict):
        count = value.number(
            integer=True,
            minimum=0,
            maximum=MAX_GPUS,
            what=f"a number of GPUs, 0 to {MAX_GPUS}, or a table",
            fix=f"write {_EXAMPLE}",
        )
        return GpuNeeds(count=int(count))
    table = value.table().check_keys(_KEYS, fix=f"write {_EXAMPLE}")
    count = table.get("count", 1).number(
        integer=True, minimum=0, maximum=MAX_GPUS, fix="write count = 2"
    )
    capability = table.string("min-compute-capability", None)
    if capability is not None and not _CAPABILITY.fullmatch(capability):
        raise table.error(
            "min-compute-capability",
            f"expected major.minor, got {capability[:40]!r}",
            'write it like "9.0"',
        )
    memory = table.get("min-memory-gib")
    name = table.string("name", None)
    if name is not None and not _NAME.fullmatch(name):
        raise table.error(
            "name", f"not a GPU name: {name[:40]!r}", 'write a word of the device name, like "h200"'
        )
    needs = GpuNeeds(
        count=int(count),
        min_compute_capability=capability,
        min_memory_gib=(
            float(memory.number(positive=True, maximum=1e6, fix="write min-memory-gib = 80"))
            if memory is not None
            else None
        ),
        name=name,
        share=table.get("share", False).boolean(fix="write share = true"),
    )
    if not needs.count and (needs.kind or needs.share):
        raise table.error(
            "count", "0 GPUs of a kind", "drop the kind, or ask for at least one GPU: count = 1"
        )
    return needs
