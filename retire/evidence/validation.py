"""The validation manifest: one JSON object per reproducer run, in JSON Lines.

``validation/manifest.jsonl`` is committed; lane runs on several hosts each write their own and
:func:`merge` joins them. A record's ``record_id`` hashes the fields that identify a run, so the
same run seen twice (an artifact uploaded twice, a manifest merged again) is kept once.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from retire.core.atomic import atomic_write, locked
from retire.core.errors import InputError
from retire.evidence import jsonlines
from retire.evidence.jsonlines import Damaged
from shims import times
from shims.filereading import read_bytes
from shims.reproducer import Mode

__all__ = [
    "FAILING",
    "FAULTED",
    "FIXED",
    "MODES",
    "OUTCOMES",
    "PROVING",
    "QUARANTINE_SUFFIX",
    "Damaged",
    "Mode",
    "RunOutcome",
    "ShimOutcome",
    "ValidationRecord",
    "append",
    "compute_record_id",
    "dumps",
    "load",
    "load_checked",
    "merge",
    "quarantine_path",
    "write",
]


class RunOutcome(StrEnum):
    """What one reproducer run showed; ``crashed`` also covers protocol violations."""

    BUG_REPRODUCED = "bug-reproduced"
    FIX_VALIDATED = "fix-validated"
    MEMORY_SAVE_VERIFIED = "memory-save-verified"
    SKIPPED = "skipped"
    CRASHED = "crashed"
    TIMEOUT = "timeout"


class ShimOutcome(StrEnum):
    """What a lane makes of a shim's two runs (``runs.judge``), in legend order; ``not-run`` is a
    matrix cell the lane lists but nothing recorded."""

    # the bug reproduces, the shim fixes it
    NEEDED = "needed"
    # the bug is gone without the shim: a retirement candidate
    UPSTREAM_FIXED = "upstream-fixed"
    # the bug reproduces with the shim applied
    SHIM_BROKEN = "shim-broken"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    NOT_RUN = "not-run"


MODES = tuple(Mode)
OUTCOMES = tuple(RunOutcome)
#: The outcomes that say the bug is absent (upstream, or thanks to the shim).
FIXED = frozenset({RunOutcome.FIX_VALIDATED, RunOutcome.MEMORY_SAVE_VERIFIED})
#: The outcomes that prove something either way: the bug, or its absence.
PROVING = FIXED | {RunOutcome.BUG_REPRODUCED}
#: The outcomes of a run that faulted: it crashed, broke the protocol or was killed.
FAULTED = frozenset({RunOutcome.CRASHED, RunOutcome.TIMEOUT})
#: Judged outcomes that fail a lane run.
FAILING = frozenset({ShimOutcome.SHIM_BROKEN, ShimOutcome.CRASHED, ShimOutcome.TIMEOUT})

#: Host stamp fields that are text (or null) wherever a record is shown or compared.
_HOST_TEXT = (
    "hostname",
    "gpu",
    "python",
    "platform",
    "driver",
    "compute_capability",
    "cuda",
    "visible_devices",
)
_FIELDS = (
    "shim",
    "mode",
    "lane",
    "host",
    "versions",
    "sentinel",
    "outcome",
    "exit_code",
    "duration_s",
    "started_at",
    "output_tail",
    "detail",
    "run",
    "environment",
    "record_id",
)


def compute_record_id(
    *,
    shim: str,
    mode: str,
    lane: str,
    host: Mapping[str, object],
    started_at: str,
    sentinel: str | None,
) -> str:
    """sha256 over what identifies one run: shim, mode, lane, host (name + GPU), start, sentinel."""
    identity = [shim, mode, lane, host.get("hostname"), host.get("gpu"), started_at, sentinel]
    # sort_keys: a host stamp's odd values (objects) hash the same after a round trip.
    return hashlib.sha256(
        json.dumps(identity, separators=(",", ":"), sort_keys=True).encode()
    ).hexdigest()


_SURROGATE = re.compile("[\ud800-\udfff]")


def _paired(value: object) -> object:
    """``value`` with surrogates as a JSON reader will read them back: an adjacent high and low
    surrogate become the one character they encode, a lone one becomes U+FFFD. (A manifest line
    escapes each surrogate on its own, and every JSON reader joins an escaped pair.)"""
    if isinstance(value, str):
        return (
            value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
            if _SURROGATE.search(value)
            else value
        )
    if isinstance(value, Mapping):
        return {_paired(k): _paired(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_paired(v) for v in value]
    return value


def _text(value: object) -> str | None:
    return (
        value
        if value is None or isinstance(value, str)
        else json.dumps(value, sort_keys=True, default=str)
    )


def _text_values(mapping: object) -> dict[str, str | None]:
    return {str(k): _text(v) for k, v in mapping.items()} if isinstance(mapping, Mapping) else {}


def _normal_host(host: Mapping[str, object]) -> dict[str, object]:
    """The host stamp with its known fields as text or null and ``packages`` as names to
    versions."""
    normal = dict(host)
    for name in _HOST_TEXT:
        if name in normal:
            normal[name] = _text(normal[name])
    if "packages" in normal:
        normal["packages"] = _text_values(normal["packages"])
    return normal


@dataclass(frozen=True)
class ValidationRecord:
    """One reproducer run. ``host`` is the parsed ``PATCHLANE-HOST`` stamp (``{}`` if none came)."""

    shim: str
    # a Mode
    mode: str
    lane: str
    host: Mapping[str, object]
    # {distribution: version} of the packages it concerns
    versions: Mapping[str, str | None]
    # a shims.reproducer.Sentinel, or None
    sentinel: str | None
    # a RunOutcome
    outcome: str
    # None only when the process could not be started
    exit_code: int | None
    duration_s: float
    # UTC ISO 8601 with microseconds
    started_at: str
    output_tail: str = ""
    #: Why: the skip reason, or what made the run count as crashed / timed out.
    detail: str = ""
    #: The lane run (one `nox -s lane` / `patchlane run`) this record belongs to, if any.
    run: str = ""
    #: How the lane env was built: kind (full/overlay), lock digest, installed and base versions
    #: of the packages the shim concerns.
    environment: Mapping[str, object] = field(default_factory=dict)
    record_id: str = field(default="")

    def __post_init__(self) -> None:
        # Text where text is shown and compared, whatever a reproducer printed in its host stamp:
        # the writer and the reader normalise alike, so no record is written that reads back
        # differently.
        for name in (
            "shim",
            "lane",
            "started_at",
            "output_tail",
            "detail",
            "run",
            "sentinel",
            "host",
            "versions",
            "environment",
        ):
            value = getattr(self, name)
            if not isinstance(value, str) or _SURROGATE.search(value):
                object.__setattr__(self, name, _paired(value))
        object.__setattr__(self, "host", _normal_host(self.host))
        object.__setattr__(self, "versions", _text_values(self.versions))
        if not self.record_id:
            object.__setattr__(self, "record_id", self.computed_id())

    @property
    def revisions(self) -> dict[str, str]:
        """{distribution: commit} of packages this run's interpreter had from a VCS checkout: the
        host stamp's ``revisions``, ``"<repository URL>@<commit>"`` each
        (``shims.reproducer.vcs_revision``)."""
        stamped = self.host.get("revisions")
        if not isinstance(stamped, Mapping):
            return {}
        return {
            str(name): str(text).rpartition("@")[2]
            for name, text in stamped.items()
            if "@" in str(text)
        }

    @property
    def started(self) -> _dt.datetime | None:
        """``started_at`` as a UTC moment (recorded as UTC), or None when it is not a readable
        time."""
        try:
            return times.parse(self.started_at, assume_utc=True)
        except times.TimeError:
            return None

    def computed_id(self) -> str:
        return compute_record_id(
            shim=self.shim,
            mode=self.mode,
            lane=self.lane,
            host=self.host,
            started_at=self.started_at,
            sentinel=self.sentinel,
        )

    def to_json(self) -> dict[str, object]:
        data = {name: getattr(self, name) for name in _FIELDS}
        data["host"], data["versions"] = dict(self.host), dict(self.versions)
        data["environment"] = dict(self.environment)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ValidationRecord:
        """Build a record from a decoded JSON object; raises ``ValueError`` naming the bad field."""
        unknown = sorted(set(data) - set(_FIELDS))
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r}")
        shim, mode, lane, outcome, started_at = (
            _string(data, name) for name in ("shim", "mode", "lane", "outcome", "started_at")
        )
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        host, versions, environment = (
            _object(data, name) for name in ("host", "versions", "environment")
        )
        exit_code = _exit_code(data.get("exit_code"))
        duration = _duration(data.get("duration_s", 0.0))
        sentinel = data.get("sentinel")
        if sentinel is not None and not isinstance(sentinel, str):
            raise ValueError("field 'sentinel' must be a string or null")
        record = cls(
            shim=shim,
            mode=Mode(mode),
            lane=lane,
            host=host,
            versions=_text_values(_paired(versions)),
            sentinel=sentinel,
            outcome=RunOutcome(outcome),
            exit_code=exit_code,
            duration_s=duration,
            started_at=started_at,
            output_tail=str(data.get("output_tail", "")),
            detail=str(data.get("detail", "")),
            run=str(data.get("run", "")),
            environment=environment,
        )
        stored = data.get("record_id")
        if stored is not None and stored != record.record_id:
            raise ValueError("record_id does not match the record's fields (edited by hand?)")
        return record


def _string(data: Mapping[str, object], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise ValueError(f"field {name!r} must be a string")
    return value


def _object(data: Mapping[str, object], name: str) -> dict[str, object]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"field {name!r} must be an object")
    return dict(value)


def _exit_code(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("field 'exit_code' must be an integer or null")


def _duration(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and -1e300 < value < 1e300:
        return float(value)
    raise ValueError("field 'duration_s' must be a finite number")


#: Characters JSON may leave unescaped that some readers (``str.splitlines``, editors) take as a
#: line
#: break, and lone surrogates that cannot be written as UTF-8: always written as ``\\uXXXX``.
_ESCAPE = re.compile("[\x85\u2028\u2029\ud800-\udfff]")
#: Where damaged lines of ``manifest.jsonl`` are moved: ``manifest.jsonl.quarantine`` beside it.
QUARANTINE_SUFFIX = ".quarantine"
#: The largest manifest read (years of runs on many hosts are a few MiB).
MAX_MANIFEST_BYTES = 1 << 30


def dumps(record: ValidationRecord) -> str:
    """One JSON Lines line (no newline), keys sorted so files diff cleanly.

    The line holds no character any reader takes as a line break (U+2028, U+2029, U+0085 are
    escaped like the control characters) and no lone surrogate: it always reads back as one line.
    """
    text = json.dumps(record.to_json(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return _ESCAPE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def quarantine_path(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    return path.with_name(path.name + QUARANTINE_SUFFIX)


def _read(path: Path) -> tuple[list[ValidationRecord], list[bytes], list[Damaged], bytes]:
    """``(records, their lines, damaged lines, the whole file)``; lines split on ``\n`` only, as
    written (the one evidence reader, :mod:`retire.evidence.jsonlines`). A folder or a FIFO is
    one error, never a block; a missing file is an empty manifest."""
    found = jsonlines.read(path, _record, max_bytes=MAX_MANIFEST_BYTES)
    return found.items, found.lines, found.damaged, found.data


def _record(data: dict[str, object]) -> ValidationRecord:
    """One object as a record; ``ValueError`` (one short line) for anything else."""
    try:
        return ValidationRecord.from_json(data)
    except RecursionError:
        raise ValueError("a field is nested too deeply") from None
    except ValueError as exc:
        raise ValueError(str(exc)[:200]) from None


def _quarantine(path: Path, damaged: list[Damaged]) -> str | None:
    """Copy ``damaged`` lines to the quarantine file (once each); None when they are there, else
    why not (they stay in the manifest then: skipped, never lost)."""
    target = quarantine_path(path)
    try:
        old = read_bytes(target, str(target), missing_ok=True, max_bytes=MAX_MANIFEST_BYTES) or b""
        kept = set(old.split(b"\n"))
        new = [d.line for d in damaged if d.line not in kept]
        if new:
            atomic_write(
                target,
                (old if not old or old.endswith(b"\n") else old + b"\n") + b"\n".join(new) + b"\n",
                within=path.parent,
            )
    except (OSError, InputError) as exc:
        return f"could not copy it to {target.name}: {getattr(exc, 'strerror', None) or exc}"
    return None


def _where(path: Path, problem: str | None, verb: str) -> str:
    """Where damaged lines went, for the warning: ``verb`` (copied, moved) to the quarantine
    file."""
    return f"{verb} to {quarantine_path(path)}" if problem is None else f"kept in place ({problem})"


def _warn(path: Path, damaged: list[Damaged], where: str) -> None:
    """One warning line per damaged line, on stderr: the store keeps working without it."""
    jsonlines.warn(
        path,
        damaged,
        f"skipped, {where}; fix it there and `patchlane validation merge` it back, or delete it",
    )


def load(path: str | os.PathLike[str]) -> list[ValidationRecord]:
    """Read a JSON Lines manifest; a missing file is empty.

    A damaged line (not JSON, not a record, a hand-edited record) never blocks the store: it is
    skipped with a one-line warning naming the file and the line, and copied to
    ``<manifest>.quarantine`` beside it; the next :func:`append` or :func:`write` moves it there.
    """
    return load_checked(path)[0]


def load_checked(path: str | os.PathLike[str]) -> tuple[list[ValidationRecord], list[Damaged]]:
    """:func:`load`, also saying which lines were damaged (a report notes that runs were left
    out)."""
    path = Path(path)
    records, _, damaged, _ = _read(path)
    if damaged:
        with locked(path, within=path.parent):
            problem = _quarantine(path, damaged)
        _warn(path, damaged, _where(path, problem, "copied"))
    return records, damaged


def append(path: str | os.PathLike[str], records: Iterable[ValidationRecord]) -> int:
    """Add ``records`` that are not already in ``path``; returns how many were added.

    Read-modify-write under a lock file, then an atomic replace: concurrent lanes never lose
    each other's records and a reader never sees half a line. Damaged lines are moved to the
    quarantine file (never lost, never in the way).
    """
    path = Path(path)
    with locked(path, within=path.parent):
        existing, lines, damaged, data = _read(path)
        problem = _quarantine(path, damaged) if damaged else None
        moved = bool(damaged) and problem is None
        seen = {record.record_id for record in existing}
        added = []
        for record in records:
            if record.record_id not in seen:
                seen.add(record.record_id)
                added.append(record)
        if added or moved:
            # Damaged lines leave the manifest only once the quarantine holds them.
            kept = (
                b"".join(line + b"\n" for line in lines)
                if not damaged or moved
                else (data if not data or data.endswith(b"\n") else data + b"\n")
            )
            atomic_write(
                path,
                kept + "".join(dumps(record) + "\n" for record in added).encode("utf-8"),
                within=path.parent,
            )
    if damaged:
        _warn(path, damaged, _where(path, problem, "moved"))
    return len(added)


def merge(paths: Iterable[str | os.PathLike[str]]) -> list[ValidationRecord]:
    """All records of ``paths``, each once (by record_id), stably sorted by ``started_at``."""
    by_id: dict[str, ValidationRecord] = {}
    for path in paths:
        # a host's records must never vanish because a path was mistyped
        if not Path(path).exists():
            raise InputError(
                path, None, "file not found", "check the path of the manifest to merge"
            )
        for record in load(path):
            by_id.setdefault(record.record_id, record)
    return sorted(by_id.values(), key=lambda record: record.started_at)


def write(path: str | os.PathLike[str], records: Iterable[ValidationRecord]) -> None:
    """Replace ``path`` with exactly ``records`` (e.g. the result of :func:`merge`); damaged lines
    of the old file are moved to the quarantine file first."""
    path = Path(path)
    with locked(path, within=path.parent):
        damaged = _read(path)[2]
        if damaged:
            problem = _quarantine(path, damaged)
            if problem is not None:
                raise InputError(
                    path,
                    f"line {damaged[0].number}",
                    f"damaged, and {problem}",
                    "make room for the quarantine file beside it; nothing was written",
                )
            _warn(path, damaged, _where(path, None, "moved"))
        atomic_write(path, "".join(dumps(record) + "\n" for record in records), within=path.parent)
