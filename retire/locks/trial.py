"""A trial re-lock: would a lane resolve with its pins raised to a retirement floor?

A follow lane below a shim's proven floor can take the fix only if its requirements still
resolve with the target raised. :func:`try_raise` locks the lane, raised, into a scratch folder
(never the lane's own lock) and says so; when the resolver refuses, its own explanation is the
lane's *blocker* ("mamba-ssm 2.3.2.post1 requires tilelang==0.1.8").

The raise is the one a retirement branch makes (:func:`raised`): every requirement, constraint
and override naming the target gets :func:`retire.lanes.lanedit.raise_floor`; a target the lane
holds only as a dependency gets a constraint ``dist>=F``; a target the lane takes from a mirror
revision (``[lane.revisions]``) is not rewritten but moved: re-locked with that package upgraded,
so a followed branch's newest commit is taken. The trial lock starts from the lane's own lock, as
the branch's re-lock does, so the answer is the one the branch will meet.

An answer is cached (``cache_dir``) by everything that decides it — the lane's digest, the
floors, the lock it starts from, the index URLs, the revisions' commits and uv's version — but
only while the lane is frozen by fixed dates: a cooldown lane, or a package exempt from the
freeze, can see new uploads at any time, so it is asked again every time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.core import uv
from retire.core.atomic import atomic_write, make_folder
from retire.core.errors import InputError
from retire.evidence.floor import Floor
from retire.lanes.lanedit import FloorConflictError, raise_floor
from retire.lanes.model import Cooldown, Lane
from retire.lanes.revisions import MirrorLookup
from retire.locks import locking
from retire.locks.pins import revision_pins
from retire.locks.uvinputs import IndexWithoutURL, resolve_index_urls

__all__ = ["RaiseTrial", "Served", "parse_blocker", "raised", "try_raise"]

#: uv's name for the throwaway project a lane is locked as (its own requirements).
_PROJECT = "patchlane-lane"
_SPEC = r"(?:[<>=!~]=?=?[^\s,]+(?:,\s?[<>=!~]=?=?[^\s,]+)*)"
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
#: "mamba-ssm>=2.3.2.post1 depends on tilelang==0.1.8", "all versions of mid depend on …"
_DEPENDS = re.compile(
    rf"(?P<lhs>all versions of {_NAME}|{_NAME}{_SPEC}?) depends? on "
    rf"(?P<rhs>{_NAME}(?:\[[^\]]*\])?{_SPEC}?)"
)
#: "only toylib<=2.0 is available", "there is no version of toylib>=3.0"
_NOTHING = re.compile(
    rf"(?:only (?P<only>{_NAME}){_SPEC}? is available|there is no version of "
    rf"(?P<none>{_NAME}))"
)


@dataclass(frozen=True)
class RaiseTrial:
    """What one trial re-lock of one lane with raised floors gave."""

    lane: str
    # the floors tried (tilelang>=0.1.15)
    floors: tuple[Floor, ...]
    # the raised lane resolved
    resolved: bool
    # resolved: {canonical name: version} of the targets in the trial lock
    versions: Mapping[str, str] = field(default_factory=dict)
    # not resolved: the resolver's explanation, one line
    blocker: str | None = None
    # the resolver could not answer (an index unreachable, uv failed otherwise): neither raise
    # nor blocked
    failure: str | None = None
    # the answer came from the cache (the lane frozen by fixed dates, nothing it rests on moved)
    cached: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "lane": self.lane,
            "floors": [str(floor) for floor in self.floors],
            "resolved": self.resolved,
            "versions": dict(self.versions),
            "blocker": self.blocker,
            "failure": self.failure,
        }


def _canonical_floors(floors: Mapping[str, str]) -> dict[str, str]:
    return dict(sorted((str(canonicalize_name(d)), str(v)) for d, v in floors.items()))


def _names(texts: tuple[str, ...]) -> set[str]:
    names = set()
    for text in texts:
        try:
            names.add(str(canonicalize_name(Requirement(text).name)))
        except InvalidRequirement:
            continue
    return names


def _raise_all(texts: tuple[str, ...], floors: Mapping[str, str]) -> tuple[str, ...]:
    out = []
    for text in texts:
        try:
            name = str(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            out.append(text)
            continue
        out.append(raise_floor(text, floors[name]) if name in floors else text)
    return tuple(out)


def raised(lane: Lane, floors: Mapping[str, str]) -> tuple[Lane, tuple[str, ...]]:
    """(the lane with ``floors`` raised, the packages to upgrade when it is locked).

    FloorConflictError when a requirement of the lane cannot hold a floor (``<0.17`` against
    0.18, a direct URL): that lane needs a human.
    """
    canonical = _canonical_floors(floors)
    moved = {r.distribution for r in lane.revisions} & set(canonical)
    rewritten = {d: v for d, v in canonical.items() if d not in moved}
    named = _names((*lane.requirements, *lane.constraints, *lane.overrides))
    extra = tuple(f"{d}>={v}" for d, v in rewritten.items() if d not in named)
    lane = dataclasses.replace(
        lane,
        requirements=_raise_all(lane.requirements, rewritten),
        constraints=_raise_all(lane.constraints, rewritten) + extra,
        overrides=_raise_all(lane.overrides, rewritten),
    )
    return lane, tuple(canonical)


def _frozen(lane: Lane) -> bool:
    """Nothing new can become visible to the lane until the lane itself changes."""
    return (
        lane.exclude_newer is not None
        and lane.cooldown is None
        and all(
            p.freeze is not None and not isinstance(p.freeze, Cooldown)
            for p in lane.exclude_newer_package
        )
    )


def _cache_key(
    lane: Lane,
    floors: Mapping[str, str],
    locks_dir: Path,
    host: uv.HostIndexes,
    mirrors: MirrorLookup | None,
) -> str | None:
    """What decides the answer, hashed; None when the answer may change while the lane does not."""
    if not _frozen(lane):
        return None
    urls = resolve_index_urls(lane, host.named)
    if isinstance(urls, IndexWithoutURL):
        return None
    try:
        commits = {p.revision.distribution: p.commit for p in revision_pins(lane, mirrors)}
    except InputError:
        return None
    lock = locking.lock_path(locks_dir, lane.name)
    seed = hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else None
    blob = json.dumps(
        [lane.digest, floors, seed, urls, host.default, commits, uv.version()], sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


#: A digest of what the lane's indexes serve for the named distributions (their files, upload
#: times, yanks), or None when that cannot be told. A frozen lane's answer rests on it: an
#: upload backfilled before the freeze date (a mirror catching up, a wheel added to an old
#: release) can lift a blocker while the lane and its lock stay as they were.
Served = Callable[[Lane, Sequence[str]], str | None]


def _served_names(lane: Lane, floors: Mapping[str, str]) -> list[str]:
    """The distributions an answer rests on: the floored targets and the lane's own requirements,
    constraints and overrides (what holds a target down is, as a rule, one of them)."""
    return sorted(set(floors) | _names((*lane.requirements, *lane.constraints, *lane.overrides)))


def _still_served(data: Mapping, lane: Lane, served: Served | None) -> bool:
    """Whether the indexes still serve what the cached answer saw (without ``served``: assumed)."""
    if served is None:
        return True
    seen = data.get("served")
    if not isinstance(seen, dict) or not isinstance(seen.get("names"), list):
        return False
    digest = served(lane, [str(n) for n in seen["names"]])
    return digest is not None and digest == seen.get("digest")


def _cached(
    cache_dir: Path | None, key: str | None, lane: Lane, served: Served | None
) -> RaiseTrial | None:
    if cache_dir is None or key is None:
        return None
    try:
        data = json.loads((cache_dir / f"{key}.json").read_text(encoding="utf-8"))
        if not _still_served(data, lane, served):
            return None
        return RaiseTrial(
            str(data["lane"]),
            tuple(Floor.parse(str(f)) for f in data["floors"]),
            bool(data["resolved"]),
            {str(k): str(v) for k, v in data["versions"].items()},
            data["blocker"],
            None,
            cached=True,
        )
    # no entry, or a damaged one: ask uv again
    except (OSError, ValueError, KeyError, TypeError, AttributeError, InputError):
        return None


def _remember(
    cache_dir: Path | None,
    key: str | None,
    trial: RaiseTrial,
    seen: tuple[list[str], str | None] | None,
) -> None:
    """Keep the answer with what the indexes served (``seen``: names and digest, taken before
    the trial asked); an answer whose footing cannot be told is not kept."""
    if cache_dir is None or key is None or trial.failure is not None:
        return
    entry: dict[str, object] = trial.to_json()
    if seen is not None:
        names, digest = seen
        if digest is None:
            return
        entry["served"] = {"names": names, "digest": digest}
    atomic_write(cache_dir / f"{key}.json", json.dumps(entry, sort_keys=True), within=cache_dir)


def try_raise(
    lane: Lane,
    floors: Mapping[str, str],
    *,
    locks_dir: Path,
    scratch_dir: Path,
    mirrors: MirrorLookup | None = None,
    host: uv.HostIndexes | None = None,
    cache_dir: Path | None = None,
    served: Served | None = None,
) -> RaiseTrial:
    """Lock ``lane`` with ``floors`` ({distribution: version}) raised, in ``scratch_dir``.

    ``locks_dir`` holds the lane's own lock (read, never written: the trial starts from it);
    ``mirrors`` resolves its revisions and ``host`` names its indexes (default: this host's uv
    configuration), as every lock patchlane makes; ``cache_dir`` keeps answers of frozen lanes,
    each with what ``served`` said the indexes held, and a cached answer counts only while they
    still hold it.
    """
    canonical = _canonical_floors(floors)
    specs = tuple(Floor(d, Version(v)) for d, v in canonical.items())
    try:
        trial_lane, upgrade = raised(lane, canonical)
    except FloorConflictError as exc:
        return RaiseTrial(lane.name, specs, False, blocker=f"{lane.origin or lane.name}: {exc}")
    host = host or uv.host_indexes()
    key = _cache_key(trial_lane, canonical, locks_dir, host, mirrors)
    found = _cached(cache_dir, key, lane, served)
    if found is not None and found.lane == lane.name:
        return found
    seen = _seen(trial_lane, canonical, key, cache_dir, served)
    own = locking.lock_path(locks_dir, lane.name)
    seed_lock = locking.read_lock(own) if own.is_file() else None
    scratch_dir = make_folder(scratch_dir, within=scratch_dir.parent)
    with tempfile.TemporaryDirectory(prefix=f"trial-{lane.name}-", dir=scratch_dir) as folder:
        scratch = Path(folder) / "locks"
        if own.is_file():
            seed = locking.lock_path(scratch, lane.name)
            seed.parent.mkdir(parents=True)
            shutil.copyfile(own, seed)
        result = locking.lock_lane(
            trial_lane, scratch, force=True, upgrade_packages=upgrade, host=host, mirrors=mirrors
        )
        lock = locking.read_lock(locking.lock_path(scratch, lane.name)) if result.ok else None
    trial = _judge(lane, specs, canonical, result, lock, seed_lock)
    _remember(cache_dir, key, trial, seen)
    return trial


def _seen(
    lane: Lane,
    floors: Mapping[str, str],
    key: str | None,
    cache_dir: Path | None,
    served: Served | None,
) -> tuple[list[str], str | None] | None:
    """What the indexes serve before the trial asks them (None: nothing will be cached, or no
    ``served`` to ask)."""
    if served is None or cache_dir is None or key is None:
        return None
    names = _served_names(lane, floors)
    return names, served(lane, names)


def _judge(
    lane: Lane,
    specs: tuple[Floor, ...],
    floors: Mapping[str, str],
    result: locking.LockResult,
    lock: dict | None,
    seed_lock: dict | None,
) -> RaiseTrial:
    """The trial's answer from the lock uv made, or from why it made none."""
    if not result.ok:
        if result.status == locking.LockStatus.FAILED and "No solution found" in result.detail:
            installed = {**_locked(lane, None), **_locked(lane, seed_lock)}
            blocker = parse_blocker(result.detail, floors, installed)
            return RaiseTrial(lane.name, specs, False, blocker=blocker)
        return RaiseTrial(lane.name, specs, False, failure=f"{result.status}: {result.message}")
    versions = {name: version for name, version in _locked(lane, lock).items() if name in floors}
    for name, version in versions.items():
        try:
            below = Version(version.split(" @ ")[0]) < Version(floors[name])
        except InvalidVersion:
            below = False
        if below and name not in {r.distribution for r in lane.revisions}:
            why = f"the raised lane still locks {name} {version}, below the floor {floors[name]}"
            return RaiseTrial(lane.name, specs, False, blocker=why)
    return RaiseTrial(lane.name, specs, True, versions)


def _locked(lane: Lane, lock: dict | None) -> dict[str, str]:
    """{canonical name: version} of a lock; without one, the lane's exact pins."""
    if lock is None:
        pins: dict[str, str] = {}
        for text in lane.requirements:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if len(exact) == 1 and not exact[0].endswith(".*"):
                pins[str(canonicalize_name(req.name))] = exact[0]
        return pins
    found = {}
    for package in lock.get("packages", []):
        name, version = str(canonicalize_name(package.get("name", ""))), package.get("version")
        vcs = package.get("vcs")
        commit = vcs.get("commit-id") if isinstance(vcs, Mapping) else None
        if version is None and commit:
            found[name] = f"@ {str(commit)[:10]}"
        elif version is not None:
            found[name] = str(version)
    return found


def _subject(lhs: str, locked: Mapping[str, str]) -> str:
    """``mamba-ssm 2.3.2.post1`` for uv's ``mamba-ssm>=2.3.2.post1`` when the lane installs that
    version (or uv names exactly one); uv's words otherwise."""
    every = lhs.startswith("all versions of ")
    name = lhs.removeprefix("all versions of ")
    match = re.match(_NAME, name)
    bare = match.group(0) if match else name
    spec_text = "" if every else name[len(bare) :]
    try:
        spec = SpecifierSet(spec_text.replace(" ", ""))
    except InvalidSpecifier:
        return lhs
    version = locked.get(str(canonicalize_name(bare)))
    if version is not None and spec.contains(version, prereleases=True):
        return f"{bare} {version}"
    [*clauses] = spec
    if len(clauses) == 1 and clauses[0].operator == "==":
        return f"{bare} {clauses[0].version}"
    return f"every release of {bare}" if every else lhs


def _target_needs_what_the_lane_pins(text: str, targets: set[str]) -> str | None:
    """ "tilelang 0.1.15 requires apache-tvm-ffi>=0.1.11,<0.1.13, and the lane requires
    apache-tvm-ffi==0.1.9": a floored target's own dependency against the lane's requirement."""
    facts = [(f.group("lhs"), f.group("rhs").rstrip(".,")) for f in _DEPENDS.finditer(text)]
    lane_needs = {
        str(canonicalize_name(name.group(0))): rhs
        for lhs, rhs in facts
        if lhs == _PROJECT and (name := re.match(_NAME, rhs))
    }
    for lhs, rhs in facts:
        lhs_name, rhs_name = re.match(_NAME, lhs), re.match(_NAME, rhs)
        if lhs == _PROJECT or not lhs_name or not rhs_name:
            continue
        needed = str(canonicalize_name(rhs_name.group(0)))
        if str(canonicalize_name(lhs_name.group(0))) in targets and needed in lane_needs:
            return f"{lhs} requires {rhs}, and the lane requires {lane_needs[needed]}"
    return None


def parse_blocker(
    stderr: str, floors: Mapping[str, str], locked: Mapping[str, str] | None = None
) -> str:
    """One line from uv's "No solution found" explanation: which package holds a floored target
    down ("mamba-ssm 2.3.2.post1 requires tilelang==0.1.8"), else what uv said, with its name for
    the lane's own requirements (``patchlane-lane``) read as "the lane".

    ``locked`` ({canonical name: version}: the lane's lock or pins) turns uv's version ranges into
    the release the lane installs.
    """
    text = " ".join(line.strip() for line in stderr.splitlines())
    targets = {str(canonicalize_name(d)) for d in floors}
    for found in _DEPENDS.finditer(text):
        lhs, rhs = found.group("lhs"), found.group("rhs").rstrip(".,")
        rhs_name = re.match(_NAME, rhs)
        if lhs != _PROJECT and rhs_name and str(canonicalize_name(rhs_name.group(0))) in targets:
            return f"{_subject(lhs, locked or {})} requires {rhs}"
    # the raised target itself needs something the lane holds elsewhere
    clash = _target_needs_what_the_lane_pins(text, targets)
    if clash is not None:
        return clash
    for found in _NOTHING.finditer(text):
        name = str(canonicalize_name(found.group("only") or found.group("none")))
        if name in targets:
            return (
                f"no release of {name}>={floors[name]} is visible to the lane "
                "(its index, its exclude-newer)"
            )
    cause = re.search(r"(?:cause|Caused by): (.*?)(?:, we can conclude|$)", text)
    said = cause.group(1) if cause else (uv.failure_lines(stderr) or ["uv found no solution"])[0]
    said = said.removeprefix("Because ").replace(_PROJECT, "the lane")
    return said[:300]
