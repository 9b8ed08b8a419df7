"""Lanes → PEP 751 locks through uv, one ``locks/<lane>/pylock.toml`` per lane.

A lane is locked by running ``uv pip compile`` on a throwaway project that carries the lane's
indexes, sources and static metadata (``[tool.uv]``), for the lane's Python and platform.
uv's own output goes to a temporary file; only a lock that ``packaging.pylock`` accepts replaces
the committed one, atomically, so a failed lane keeps its previous lock.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path

import tomlkit
from packaging.pylock import Pylock, PylockValidationError
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from retire.core import interrupts, uv
from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.core.project import contained
from retire.core.secrets import scrub
from retire.lanes import revisions
from retire.lanes.model import LANE_NAME, Lane
from retire.locks import environments, integrity
from retire.locks.cutoffs import Cutoffs, resolve_cutoffs
from retire.locks.failures import explain_failure
from retire.locks.integrity import CONTENT_KEY
from retire.locks.integrity import PROVENANCE_HEADER as _PROVENANCE_HEADER
from retire.locks.pins import RevisionPin, revision_pins, unpinned
from retire.locks.uvinputs import (
    LOCK_NAME,
    IndexWithoutURL,
    compile_args,
    index_table,
    project_toml,
    resolve_index_urls,
    uv_toml,
)
from shims import times


class LockStatus(StrEnum):
    """How locking one lane ended."""

    LOCKED = "locked"
    UP_TO_DATE = "up-to-date"
    FAILED = "failed"
    #: the lane's index could not be reached from this host: its lock is kept as it was
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class LockResult:
    lane: str
    status: LockStatus
    message: str = ""
    # uv's full explanation, for failures
    detail: str = ""
    seconds: float = 0.0
    packages: int = 0
    # the exclude-newer the lock was made with (UTC), when the lane freezes
    cutoff: str | None = None
    # why the lock it replaced was not patchlane's for this lane (a foreign lock)
    replaced: str = ""
    # [lane.exclude-newer-package] as locked: a package's own cutoff (UTC), or false (exempt)
    exclude_newer_package: dict[str, str | bool] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", LockStatus(self.status))

    @property
    def ok(self) -> bool:
        return self.status in (LockStatus.LOCKED, LockStatus.UP_TO_DATE)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def lock_path(locks_dir: Path, lane_name: str) -> Path:
    """``locks/<lane>/pylock.toml``: never a committed link (followed out of the project), never
    a folder."""
    # names become paths: never let one climb out
    if not LANE_NAME.fullmatch(lane_name):
        raise ValueError(f"invalid lane name {lane_name!r}")
    path = contained(locks_dir.parent, locks_dir / lane_name / LOCK_NAME)
    if path.exists() and not path.is_file():
        raise InputError(
            f"{locks_dir.name}/{lane_name}/{LOCK_NAME}",
            None,
            "not a regular file (a folder?)",
            f"delete it; `patchlane lock {lane_name}` writes the lock",
        )
    return path


def read_lock(path: Path) -> dict | None:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    # unreadable, not TOML (or UTF-8), nested too deeply
    except (OSError, ValueError, RecursionError):
        return None


def provenance(lock: dict | None) -> dict:
    return ((lock or {}).get("tool") or {}).get("patchlane") or {}


def read_provenance(path: Path, *, with_text: bool = False):
    """The ``[tool.patchlane]`` table of a lock, or None when there is no readable lock
    (``with_text``: the pair (table, text), or None).

    patchlane writes that table last, so only the tail is parsed: deciding that a dozen GPU-stack
    locks are current must not cost a dozen full TOML parses.
    """
    try:
        text = path.read_text(encoding="utf-8")
        at = text.rfind(_PROVENANCE_HEADER)
        found = provenance(tomllib.loads(text[at:] if at >= 0 else text))
    # unreadable, not TOML (or UTF-8), nested too deeply
    except (OSError, ValueError, RecursionError):
        return None
    return (found, text) if with_text else found


class Freshness(StrEnum):
    """How a lane's lock relates to the lane as defined now."""

    # made by patchlane from exactly this lane definition
    CURRENT = "current"
    # made for this lane, from an earlier definition
    STALE = "stale"
    # no lock file
    MISSING = "missing"
    # a file patchlane cannot vouch for: unreadable, not ours, another lane's
    FOREIGN = "foreign"
    # its content is not what patchlane wrote, or holds a version the lane forbids
    TAMPERED = "tampered"


@dataclass(frozen=True)
class LockState:
    lane: str
    freshness: Freshness
    # one line; empty when current
    why: str = ""

    @property
    def current(self) -> bool:
        return self.freshness is Freshness.CURRENT

    @property
    def summary(self) -> str:
        """``no lock`` or ``the lock is stale (why)``: what a refusal to use it says."""
        return (
            self.why
            if self.freshness is Freshness.MISSING
            else f"the lock is {self.freshness} ({self.why})"
        )


def lock_state(lane: Lane, locks_dir: Path) -> LockState:
    """The one answer to "is this lane's lock current?": parses only the provenance table, and
    checks the content digest and locked versions on the text (:mod:`retire.locks.integrity`)."""
    path = lock_path(locks_dir, lane.name)
    found, text = read_provenance(path, with_text=True) or (None, "")
    if found is None:
        if path.exists():
            return LockState(lane.name, Freshness.FOREIGN, f"{LOCK_NAME} is not readable TOML")
        return LockState(lane.name, Freshness.MISSING, "no lock")
    if not found:
        return LockState(
            lane.name, Freshness.FOREIGN, "not made by patchlane: no [tool.patchlane] table"
        )
    if found.get("lane", lane.name) != lane.name:
        return LockState(lane.name, Freshness.FOREIGN, f"made for lane {found.get('lane')!r}")
    if found.get("digest") != lane.digest:
        return LockState(lane.name, Freshness.STALE, "lane changed since it was locked")
    if problem := integrity.content_problem(text, found):
        return LockState(
            lane.name, Freshness.TAMPERED if CONTENT_KEY in found else Freshness.STALE, problem
        )
    if outside := integrity.versions_outside(lane, text):
        return LockState(lane.name, Freshness.TAMPERED, "; ".join(outside))
    return LockState(lane.name, Freshness.CURRENT)


def is_current(lane: Lane, locks_dir: Path) -> bool:
    return lock_state(lane, locks_dir).current


def stamp(
    lock_text: str,
    lane: Lane,
    origin: str,
    cutoffs: Cutoffs | None = None,
    revisions: dict[str, dict[str, str]] | None = None,
) -> str:
    """The lock with a patchlane header and the ``[tool.patchlane]`` provenance table.

    Text, not a parse-and-dump: uv writes no ``[tool]`` table of its own, and a lock of a GPU
    stack has hundreds of entries that a TOML round trip would spend most of our time on.
    """
    table = {
        "lane": lane.name,
        "source": origin,
        "digest": lane.digest,
        "uv-version": uv.version(),
        "python": lane.python,
        "platform": lane.platform,
        **(cutoffs or resolve_cutoffs(lane, None, now=times.now(), roll=True)).provenance(lane),
        **({"revisions": revisions} if revisions else {}),
        "locked-at": times.format_utc(times.now()),
    }
    # where it applies, in the standard's key: pip and uv refuse it elsewhere, by name
    lock_text = environments.inserted(lock_text, lane)
    # as atomic_write will write it
    body = scrub(_header(lane, origin, uv.version()) + lock_text.rstrip("\n") + "\n")
    # the provenance covers the content
    table[CONTENT_KEY] = integrity.content_digest(body)
    return body + "\n" + tomlkit.dumps({"tool": {"patchlane": table}})


def _header(lane: Lane, origin: str, uv_version: str) -> str:
    return (
        f"# Lock of lane {lane.name!r}, generated by patchlane with uv {uv_version} — "
        "do not edit.\n"
        f"# Re-make it with `nox -s lock -- {lane.name}` after changing {origin}.\n"
        f"# For {environments.describe(lane)} only: pip and uv refuse it elsewhere.\n"
    )


def declare_environments(lane: Lane, target: Path) -> bool:
    """Give a current lock made before locks declared where they apply its ``environments`` (and
    header), re-stamped in place: no resolution, no network, the same packages. True when it
    wrote."""
    found = read_provenance(target, with_text=True)
    if found is None:
        return False
    table, text = found
    text = text.replace("\r\n", "\n")
    at = text.rfind(_PROVENANCE_HEADER)
    if at < 0 or re.search(r"^environments\s*=", text[:at], re.MULTILINE):
        return False
    lines = text[:at].splitlines(keepends=True)
    # the header this patchlane writes replaces the one the lock has (its leading comments)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    body = _header(lane, lane.origin, str(table.get("uv-version", "?"))) + (
        environments.inserted("".join(lines), lane).rstrip("\n") + "\n"
    )
    table = {**table, CONTENT_KEY: integrity.content_digest(body)}
    # locks/<lane>/pylock.toml: it stays in the locks folder
    atomic_write(
        target,
        body + "\n" + tomlkit.dumps({"tool": {"patchlane": table}}),
        within=target.parent.parent,
    )
    return True


def validate(text: str) -> Pylock:
    return Pylock.from_dict(tomllib.loads(text))


def lock_lane(
    lane: Lane,
    locks_dir: Path,
    *,
    upgrade: bool = False,
    upgrade_packages: tuple[str, ...] = (),
    force: bool = False,
    host: uv.HostIndexes | None = None,
    now: datetime | None = None,
    mirrors: revisions.MirrorLookup | None = None,
) -> LockResult:
    """Lock one lane. Never raises for uv's failures: they come back as a failed result.

    ``now`` is when cooldowns are measured from when they move (default: this moment).
    ``mirrors`` (a :class:`~retire.mirrors.config.MirrorSet`) resolves the lane's revisions.
    """
    started = time.monotonic()
    target = lock_path(locks_dir, lane.name)
    state = lock_state(lane, locks_dir)
    if not (force or upgrade or upgrade_packages) and state.current:
        return _up_to_date(lane, target)
    previous = read_lock(target)
    cutoffs = resolve_cutoffs(
        lane, provenance(previous), now=now or times.now(), roll=upgrade or bool(upgrade_packages)
    )
    host = host or uv.host_indexes()
    urls = resolve_index_urls(lane, host.named)
    if isinstance(urls, IndexWithoutURL):
        return LockResult(
            lane.name, LockStatus.UNREACHABLE, urls.message, seconds=time.monotonic() - started
        )
    try:
        pinned = revision_pins(lane, mirrors)
    # no mirror, or the rev is not in it: one line, the previous lock kept
    except InputError as exc:
        return LockResult(lane.name, LockStatus.FAILED, str(exc), seconds=time.monotonic() - started)
    # uv prefers the versions already in its output file: unchanged packages stay put
    keep = previous is not None and not upgrade and state.freshness is not Freshness.TAMPERED
    try:
        with tempfile.TemporaryDirectory(prefix=f"patchlane-lock-{lane.name}-") as scratch:
            work = Path(scratch)
            _write_inputs(work, lane, index_table(lane, urls, host.default), pinned)
            if keep:
                _seed_previous(work, target, pinned)
            args = compile_args(
                lane, upgrade=upgrade, upgrade_packages=upgrade_packages, cutoffs=cutoffs
            )
            made = _compile(work, lane, args, pinned, started)
    # the file system refused uv's scratch project (a full TMPDIR): said of the lock
    except OSError as exc:
        why = f"{exc.filename}: {exc.strerror or exc}" if exc.filename else str(exc.strerror or exc)
        made = LockResult(lane.name, LockStatus.FAILED, why)
    if isinstance(made, LockResult):
        return _of_the_lock(made, target, within=locks_dir.parent, had=previous is not None)
    text = stamp(made, lane, lane.origin, cutoffs, _pinned_provenance(pinned))
    seconds = time.monotonic() - started
    try:
        lock = validate(text)
    except (PylockValidationError, tomllib.TOMLDecodeError) as exc:
        return LockResult(
            lane.name,
            LockStatus.FAILED,
            f"uv wrote a lock that packaging.pylock rejects: {exc}",
            seconds=seconds,
        )
    unwritten = _write_lock(target, text, within=locks_dir.parent, had=previous is not None)
    if unwritten:
        return LockResult(lane.name, LockStatus.FAILED, unwritten, seconds=seconds)
    return LockResult(
        lane.name,
        LockStatus.LOCKED,
        seconds=time.monotonic() - started,
        packages=len(lock.packages),
        cutoff=times.format_utc(cutoffs.exclude_newer) if cutoffs.exclude_newer else None,
        replaced=state.why if state.freshness is Freshness.FOREIGN else "",
        exclude_newer_package={
            name: times.format_utc(at) if at else False for name, at in cutoffs.packages
        },
    )


def _write_lock(target: Path, text: str, *, within: Path, had: bool) -> str:
    """Write the lock; what stopped it (a full disk), naming the lock and what it still holds,
    else ``""``. The write is atomic: a lock that was there is kept whole."""
    try:
        atomic_write(target, text, within=within)
    except OSError as exc:
        return _kept(target, str(exc.strerror or exc), within=within, had=had)
    return ""


def _kept(target: Path, why: str, *, within: Path, had: bool) -> str:
    """``locks/<lane>/pylock.toml: <why> — the previous lock is kept as it was``."""
    kept = "the previous lock is kept as it was" if had else "no lock was written"
    shown = target.relative_to(within) if target.is_relative_to(within) else target
    return f"{shown.as_posix()}: {why} — {kept}"


#: What uv or the scratch project say when the file system refuses a write.
_FILE_SYSTEM = ("No space left on device", "File too large", "Disk quota exceeded", "Read-only file")


def _of_the_lock(result: LockResult, target: Path, *, within: Path, had: bool) -> LockResult:
    """A lock that could not be made for want of room (a full disk under uv's cache or the scratch
    project) says so of the lock, and what it still holds; any other failure as it is."""
    if result.status is not LockStatus.FAILED or not any(
        mark in result.message for mark in _FILE_SYSTEM
    ):
        return result
    message = _kept(target, f"not re-locked: {result.message}", within=within, had=had)
    return dataclasses.replace(result, message=message)


def _up_to_date(lane: Lane, target: Path) -> LockResult:
    """A lane whose lock is current: counted, not parsed (an older stamp gets its environments)."""
    declared = declare_environments(lane, target)
    return LockResult(
        lane.name,
        LockStatus.UP_TO_DATE,
        "re-stamped: it now declares the environments it is for" if declared else "",
        packages=target.read_text(encoding="utf-8").count("\n[[packages]]"),
    )


def _write_inputs(
    work: Path, lane: Lane, indexes: list[dict], pinned: tuple[RevisionPin, ...]
) -> None:
    """The throwaway project uv resolves: pyproject.toml, uv.toml, constraints and overrides."""
    requirements = tuple(p.requirement for p in pinned)
    (work / "pyproject.toml").write_text(
        project_toml(lane, indexes, requirements), encoding="utf-8"
    )
    (work / "uv.toml").write_text(uv_toml(lane, indexes), encoding="utf-8")
    if lane.constraints:
        (work / "constraints.txt").write_text("\n".join(lane.constraints) + "\n", encoding="utf-8")
    if lane.overrides:
        (work / "overrides.txt").write_text("\n".join(lane.overrides) + "\n", encoding="utf-8")


def _seed_previous(work: Path, target: Path, pinned: tuple[RevisionPin, ...]) -> None:
    """The committed lock as uv's output file; it names upstream, so revisions point back at
    this host's mirrors, which uv reads."""
    if pinned:
        local = revisions.replace_urls(
            target.read_text(encoding="utf-8"),
            {pin.revision.upstream_url: pin.local_url for pin in pinned},
        )
        (work / LOCK_NAME).write_text(local, encoding="utf-8")
    else:
        shutil.copyfile(target, work / LOCK_NAME)


def _compile(
    work: Path, lane: Lane, args: list[str], pinned: tuple[RevisionPin, ...], started: float
) -> str | LockResult:
    """uv's lock text, with revisions named by their upstream repository; or the failed result."""
    proc = uv.run(args, cwd=work, without_indexes=True)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        status, message = explain_failure(proc.stderr, origin=lane.origin)
        return LockResult(lane.name, LockStatus(status), message, proc.stderr.strip(), seconds)
    made = (work / LOCK_NAME).read_text(encoding="utf-8")
    if not pinned:
        return made
    missed = unpinned(tomllib.loads(made), pinned)
    if missed is not None:
        return LockResult(lane.name, LockStatus.FAILED, missed.message, seconds=seconds)
    return revisions.replace_urls(
        made, {pin.local_url: pin.revision.upstream_url for pin in pinned}
    )


def _pinned_provenance(pinned: tuple[RevisionPin, ...]) -> dict[str, dict[str, str]]:
    """What the provenance table records of each revision: the rev as written, its commit."""
    return {p.revision.distribution: {"rev": p.revision.rev, "commit": p.commit} for p in pinned}


def lanes_with_package(lanes: list[Lane], locks_dir: Path, packages: tuple[str, ...]) -> list[Lane]:
    """The lanes whose lock (or requirements) contain any of ``packages``."""
    wanted = {canonicalize_name(p) for p in packages}
    chosen = []
    for lane in lanes:
        lock = read_lock(lock_path(locks_dir, lane.name)) or {}
        names = {canonicalize_name(p.get("name", "")) for p in lock.get("packages", [])}
        names |= {canonicalize_name(Requirement(r).name) for r in lane.requirements}
        if names & wanted:
            chosen.append(lane)
    return chosen


def lock_lanes(
    lanes: list[Lane],
    locks_dir: Path,
    *,
    jobs: int | None = None,
    on_done: Callable[[LockResult], None] | None = None,
    host: uv.HostIndexes | None = None,
    lane_upgrades: Mapping[str, tuple[str, ...]] | None = None,
    **options,
) -> list[LockResult]:
    """Lock lanes in parallel (uv is I/O-bound); results come back in lane order.

    ``host`` names the indexes (default: this host's uv configuration, read once);
    ``lane_upgrades`` gives single lanes their own ``upgrade_packages`` (a retirement branch
    moves one lane's revision without upgrading that package in the others).
    """
    if not lanes:
        return []
    lane_upgrades = lane_upgrades or {}
    if not (
        options.get("force")
        or options.get("upgrade")
        or options.get("upgrade_packages")
        or any(lane_upgrades.get(lane.name) for lane in lanes)
    ):
        current = [lane for lane in lanes if is_current(lane, locks_dir)]
        # nothing to do: no uv, no network, no threads
        if len(current) == len(lanes):
            results = [_up_to_date(lane, lock_path(locks_dir, lane.name)) for lane in lanes]
            for result in results:
                if on_done:
                    on_done(result)
            return results
    host = host or uv.host_indexes()
    # resolve once before the threads start
    uv.version()
    # uv is multi-threaded itself: about two locks per core keeps the CPUs busy without thrashing.
    workers = jobs or min(len(lanes), 2 * (os.cpu_count() or 2))

    def one(lane: Lane) -> LockResult:
        upgrades = lane_upgrades.get(lane.name)
        extra = {"upgrade_packages": upgrades} if upgrades else {}
        result = lock_lane(lane, locks_dir, host=host, **{**options, **extra})
        # interrupted: the failure is the killed uv's, not the lane's
        if on_done and not interrupts.stopping():
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, lanes))
