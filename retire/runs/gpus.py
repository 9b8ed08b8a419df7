"""The GPUs of this host, as lanes are given them: discovered, or declared by ``PATCHLANE_GPUS``.

``PATCHLANE_GPUS`` overrides discovery (tests, a host whose driver tools are elsewhere, a
shop that keeps some GPUs for other work):

- ``none`` or ``0``: no GPU;
- a count, ``4``: four GPUs of unknown kind, CUDA ids 0-3;
- a list, ``h100:9.0:80,h100:9.0:80``: one ``NAME[:CAPABILITY[:MEMORY_GIB]]`` per GPU, ids 0, 1, …;
  ``3=h100:9.0:80`` gives an entry its own CUDA id.

Otherwise ``nvidia-smi --query-gpu`` lists them. Where the engine itself runs with
``CUDA_VISIBLE_DEVICES`` set (a Slurm job's allocation, a shop's reservation) only those GPUs are
this host's, under their own ids; there ``PATCHLANE_GPUS`` is a ceiling and a filter of that set
(a count takes the first N visible GPUs, a list the visible ones it names, ``none`` none), never a
GPU more.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from retire.core import childenv
from retire.core.errors import InputError
from retire.lanes.model import Lane
from shims.gpuneeds import MAX_GPUS, GpuNeeds
from shims.model import ShimManifest

__all__ = ["GPUS_ENV", "Gpu", "HostGpus", "discover", "lane_needs", "parse_declared"]

GPUS_ENV = "PATCHLANE_GPUS"
_ENTRY = re.compile(
    r"(?:(?P<id>[0-9]+)=)?(?P<name>[A-Za-z0-9][A-Za-z0-9 ._-]*)"
    r"(?::(?P<cc>[0-9]+\.[0-9]+)?)?(?::(?P<mem>[0-9]+(?:\.[0-9]+)?))?"
)
_SMI_FIELDS = "index,uuid,name,compute_cap,memory.total"


@dataclass(frozen=True)
class Gpu:
    """One GPU a lane may be given: its CUDA id (what ``CUDA_VISIBLE_DEVICES`` names) and kind."""

    id: str
    name: str = "GPU"
    compute_capability: str | None = None
    memory_gib: float | None = None
    # GPU-…, where nvidia-smi said (CUDA_VISIBLE_DEVICES may name a GPU by it)
    uuid: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.id}: {self.name}"

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "compute_capability": self.compute_capability,
            "memory_gib": self.memory_gib,
        }


@dataclass(frozen=True)
class HostGpus:
    """The GPUs found, and where from (for messages)."""

    gpus: tuple[Gpu, ...]
    source: str


def parse_declared(text: str) -> tuple[Gpu, ...]:
    """``PATCHLANE_GPUS``'s value as GPUs; a one-line InputError naming the fix otherwise."""
    text = text.strip()
    if text.lower() in ("", "none", "0"):
        return ()
    if text.isdigit():
        if int(text) > MAX_GPUS:
            raise _declared_error(text, f"more than {MAX_GPUS} GPUs")
        return tuple(Gpu(str(i)) for i in range(int(text)))
    gpus: list[Gpu] = []
    for position, entry in enumerate(part.strip() for part in text.split(",")):
        found = _ENTRY.fullmatch(entry)
        if found is None:
            raise _declared_error(entry, "not NAME[:CAPABILITY[:MEMORY_GIB]]")
        gpus.append(
            Gpu(
                found["id"] or str(position),
                found["name"].strip(),
                found["cc"],
                float(found["mem"]) if found["mem"] else None,
            )
        )
    ids = [gpu.id for gpu in gpus]
    if len(set(ids)) != len(ids):
        raise _declared_error(text, "one CUDA id twice")
    return tuple(gpus)


def _declared_error(text: str, problem: str) -> InputError:
    return InputError(
        None,
        GPUS_ENV,
        f"{problem}: {text[:60]!r}",
        "write a count such as 4, none, or one NAME[:CAPABILITY[:MEMORY_GIB]] per GPU such as "
        "h100:9.0:80,h100:9.0:80 (docs/commands.md, GPUs)",
    )


def _from_smi(output: str) -> tuple[Gpu, ...]:
    """``nvidia-smi --query-gpu=index,uuid,name,compute_cap,memory.total --format=csv,noheader,
    nounits`` lines as GPUs (memory in MiB there; an older driver's lines lack compute_cap)."""
    gpus = []
    for line in output.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4:
            fields.insert(3, "")
        if len(fields) != 5 or not fields[0].isdigit():
            continue
        capability = fields[3] if re.fullmatch(r"[0-9]+\.[0-9]+", fields[3]) else None
        try:
            memory = round(float(fields[4]) / 1024, 1)
        except ValueError:
            memory = None
        gpus.append(Gpu(fields[0], fields[2], capability, memory, fields[1]))
    return tuple(gpus)


def _wanted(environ: Mapping[str, str]) -> list[str] | None:
    """The entries of the engine's own ``CUDA_VISIBLE_DEVICES`` (None when unset)."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    return None if visible is None else [v.strip() for v in visible.split(",") if v.strip()]


def _visible(
    gpus: tuple[Gpu, ...], environ: Mapping[str, str], *, declared: bool = False
) -> tuple[Gpu, ...]:
    """The GPUs the engine's own ``CUDA_VISIBLE_DEVICES`` names (all when unset), under the ids it
    gives them: each matched by index or UUID, else by position where the lists are as long (a
    cgroup that shows only the allocation), else a GPU of unknown kind — unless ``gpus`` were
    ``declared`` (``PATCHLANE_GPUS``): a ceiling, so a visible GPU it does not name is left out
    and never more GPUs than it names are given."""
    wanted = _wanted(environ)
    if wanted is None:
        return gpus
    found = []
    for position, entry in enumerate(wanted):
        match = next((gpu for gpu in gpus if entry in (gpu.id, gpu.uuid)), None)
        if match is None and len(gpus) == len(wanted):
            match = gpus[position]
        if match is None and declared:
            continue
        found.append(replace(match, id=entry) if match else Gpu(entry))
    return tuple(found[: len(gpus)] if declared else found)


def _smi(smi: str, fields: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            # a host tool: no secret-named variable
            env=childenv.for_tool(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def discover(environ: Mapping[str, str] | None = None) -> HostGpus:
    """This host's GPUs: ``PATCHLANE_GPUS`` when set, else nvidia-smi's list (none without it)."""
    environ = os.environ if environ is None else environ
    declared = environ.get(GPUS_ENV)
    if declared is not None:
        gpus, wanted = parse_declared(declared), _wanted(environ)
        if declared.strip().isdigit() and wanted is not None:
            # a count of the GPUs this process may see: the first N of them
            gpus = tuple(Gpu(entry) for entry in wanted)[: len(gpus)]
        return HostGpus(_visible(gpus, environ, declared=True), f"{GPUS_ENV}={declared}")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return HostGpus((), "no nvidia-smi on PATH")
    proc = _smi(smi, _SMI_FIELDS)
    if proc is not None and proc.returncode != 0:
        # a driver too old to know compute_cap
        proc = _smi(smi, _SMI_FIELDS.replace(",compute_cap", ""))
    if proc is None or proc.returncode != 0:
        return HostGpus((), "nvidia-smi failed")
    gpus = _visible(_from_smi(proc.stdout), environ)
    return HostGpus(gpus, "nvidia-smi" if gpus else "nvidia-smi lists no GPU")


def lane_needs(lane: Lane, manifests: Mapping[str, ShimManifest]) -> GpuNeeds:
    """What a lane is given of a host's GPUs: its own ``gpus``; else, for a needs-cuda lane, as
    many as its most demanding reproducer asks for (at least one); else none."""
    if lane.gpus is not None:
        return lane.gpus
    if not lane.needs_cuda:
        return GpuNeeds()
    counts = [manifests[s].reproducer.gpu_needs.count for s in lane.shims if s in manifests]
    return GpuNeeds(count=max([1, *counts]))
