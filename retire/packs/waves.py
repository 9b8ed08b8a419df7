"""Filing history and waves: the human gate's record and the seed's cadence, as pure values.

``packs/state.json`` (committed) holds, per pack, who approved it and when (with a digest of
what they approved) and where it was filed. Waves are derived from filings: the last wave to a
repository is the day of its latest filing. The planner proposes the next wave (seed 002,
"The cadence"): two to four ready packs, batched by target repository, no repository sooner than
two days after its last wave, in the seed's priority order. No I/O here.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from retire.core.errors import InputError
from retire.packs.model import PRIORITIES
from shims import times, tomlreader

__all__ = [
    "Approval",
    "Candidate",
    "Filing",
    "FilingState",
    "PackRecord",
    "WavePlan",
    "dumps_state",
    "last_waves",
    "parse_state",
    "plan_wave",
]

STATE_VERSION = 1


@dataclass(frozen=True)
class Approval:
    by: str
    # UTC ISO 8601
    at: str
    # sha256 of the body and the reproducer that were approved
    digest: str


@dataclass(frozen=True)
class Filing:
    url: str
    # UTC ISO 8601
    at: str
    # where it went, kept so history survives a later pack.toml edit
    repository: str


@dataclass(frozen=True)
class PackRecord:
    approval: Approval | None = None
    filings: tuple[Filing, ...] = ()


@dataclass(frozen=True)
class FilingState:
    packs: Mapping[str, PackRecord] = field(default_factory=dict)

    def record(self, pack_id: str) -> PackRecord:
        return self.packs.get(pack_id, PackRecord())

    def with_record(self, pack_id: str, record: PackRecord) -> FilingState:
        packs = dict(self.packs)
        packs[pack_id] = record
        return FilingState(dict(sorted(packs.items())))

    def approve(self, pack_id: str, approval: Approval) -> FilingState:
        return self.with_record(pack_id, replace(self.record(pack_id), approval=approval))

    def file(self, pack_id: str, filing: Filing) -> FilingState:
        record = self.record(pack_id)
        return self.with_record(pack_id, replace(record, filings=(*record.filings, filing)))


def parse_state(text: str, path: str | Path) -> FilingState:
    """Read ``packs/state.json``; a damaged file is a one-line InputError, never a guess."""
    data = tomlreader.loads_json(text, str(path), fix=_RESTORE).raw
    if (
        not isinstance(data, dict)
        or data.get("version") != STATE_VERSION
        or not isinstance(data.get("packs"), dict)
    ):
        raise InputError(
            path, "version", f"expected version {STATE_VERSION} with a packs object", _RESTORE
        )
    packs = {}
    for pack_id, raw in data["packs"].items():
        key = f"packs.{pack_id}"
        if not isinstance(raw, dict):
            raise InputError(path, key, "expected an object", _RESTORE)
        approval, filings = raw.get("approval"), raw.get("filings", [])
        if not isinstance(filings, list):
            raise InputError(path, f"{key}.filings", _SHAPE, _RESTORE)
        packs[pack_id] = PackRecord(
            approval=Approval(*_fields(path, f"{key}.approval", approval, ("by", "at", "digest")))
            if approval
            else None,
            filings=tuple(
                Filing(*_fields(path, f"{key}.filings[{i}]", f, ("url", "at", "repository")))
                for i, f in enumerate(filings)
            ),
        )
    return FilingState(dict(sorted(packs.items())))


_RESTORE = "restore it from git"
_SHAPE = "approval needs by/at/digest, filings need url/at/repository"


def _fields(path: str | Path, key: str, raw: object, names: tuple[str, ...]) -> list[str]:
    """The string fields ``names`` of one record; ``at`` must be an ISO time (the waves read it
    back)."""
    if not isinstance(raw, dict) or not all(isinstance(raw.get(name), str) for name in names):
        raise InputError(path, key, _SHAPE, _RESTORE)
    tomlreader.Value(raw["at"], f"{key}.at", str(path)).moment(fix=_RESTORE)
    return [raw[name] for name in names]


def dumps_state(state: FilingState) -> str:
    """Stable JSON (sorted, indented) so every approval and filing is a readable diff."""
    packs = {}
    for pack_id, record in sorted(state.packs.items()):
        entry: dict[str, object] = {}
        if record.approval is not None:
            entry["approval"] = {
                "by": record.approval.by,
                "at": record.approval.at,
                "digest": record.approval.digest,
            }
        if record.filings:
            entry["filings"] = [
                {"url": f.url, "at": f.at, "repository": f.repository} for f in record.filings
            ]
        packs[pack_id] = entry
    return json.dumps({"version": STATE_VERSION, "packs": packs}, indent=2, sort_keys=True) + "\n"


def last_waves(state: FilingState) -> dict[str, _dt.date]:
    """Day of the latest filing per repository (lowercase ``owner/repo``)."""
    waves: dict[str, _dt.date] = {}
    for record in state.packs.values():
        for filing in record.filings:
            # read as parse_state accepts it: naive is UTC
            day = times.parse(filing.at, assume_utc=True).date()
            repo = filing.repository.lower()
            waves[repo] = max(waves.get(repo, day), day)
    return waves


@dataclass(frozen=True)
class Candidate:
    """A pack that could go into the next wave."""

    id: str
    repository: str
    # one of PRIORITIES
    priority: str
    approved: bool = False


@dataclass(frozen=True)
class WavePlan:
    day: _dt.date
    #: The proposed wave, grouped by repository (best priority first), priority order inside.
    packs: tuple[Candidate, ...]
    #: ``(repository, reason)`` for repositories with ready packs left out, and why.
    held: tuple[tuple[str, str], ...]
    #: Why no wave is proposed (empty when ``packs`` is a wave).
    reason: str = ""

    def by_repository(self) -> list[tuple[str, tuple[Candidate, ...]]]:
        groups: dict[str, list[Candidate]] = {}
        for pack in self.packs:
            groups.setdefault(pack.repository, []).append(pack)
        return [(repo, tuple(packs)) for repo, packs in groups.items()]

    def to_json(self) -> dict[str, object]:
        return {
            "day": self.day.isoformat(),
            "wave": [
                {
                    "id": c.id,
                    "repository": c.repository,
                    "priority": c.priority,
                    "approved": c.approved,
                }
                for c in self.packs
            ],
            "held": [{"repository": repo, "reason": why} for repo, why in self.held],
            "reason": self.reason,
        }


def _rank(candidate: Candidate) -> tuple[int, str, str]:
    return (PRIORITIES.index(candidate.priority), candidate.repository.lower(), candidate.id)


def plan_wave(
    candidates: Sequence[Candidate],
    waves: Mapping[str, _dt.date],
    day: _dt.date,
    *,
    min_size: int = 2,
    max_size: int = 4,
    spacing_days: int = 2,
    per_repository: int = 2,
) -> WavePlan:
    """Propose the wave to file on ``day``; deterministic for the same inputs.

    A repository is eligible ``spacing_days`` after its last wave. Packs are taken in priority
    order (then repository, then id), at most ``per_repository`` per repository ("if two land,
    both are more likely to get triaged"), at most ``max_size`` in all. Fewer than ``min_size``
    eligible packs: no wave; a ready pack can wait, dumping packs on maintainers cannot be undone.
    """
    if not 1 <= min_size <= max_size:
        raise ValueError("need 1 <= min_size <= max_size")
    held: dict[str, str] = {}
    eligible = []
    for candidate in sorted(candidates, key=_rank):
        last = waves.get(candidate.repository.lower())
        if last is not None and (day - last).days < spacing_days:
            next_day = last + _dt.timedelta(days=spacing_days)
            held[candidate.repository] = (
                f"last wave {last.isoformat()}; next on or after {next_day.isoformat()}"
            )
            continue
        eligible.append(candidate)
    chosen: list[Candidate] = []
    per_repo: dict[str, int] = {}
    for candidate in eligible:
        repo = candidate.repository.lower()
        if len(chosen) == max_size:
            held.setdefault(
                candidate.repository, f"wave full ({max_size} packs); waits for the next one"
            )
            continue
        if per_repo.get(repo, 0) == per_repository:
            held.setdefault(
                candidate.repository,
                f"{per_repository} packs to this repository already in the wave",
            )
            continue
        per_repo[repo] = per_repo.get(repo, 0) + 1
        chosen.append(candidate)
    if len(chosen) < min_size:
        reason = (
            f"{len(chosen)} eligible ready pack(s); a wave needs at least {min_size} — hold, a "
            f"ready pack can wait"
            if candidates
            else "no ready packs"
        )
        for candidate in chosen:
            held.setdefault(candidate.repository, "waits for a wave of at least " + str(min_size))
        return WavePlan(day, (), tuple(sorted(held.items())), reason)
    order = {candidate.repository.lower(): i for i, candidate in reversed(list(enumerate(chosen)))}
    grouped = sorted(chosen, key=lambda c: (order[c.repository.lower()], _rank(c)))
    return WavePlan(day, tuple(grouped), tuple(sorted(held.items())))
