"""A retirement plan: which shim goes, why, the floors that replace it, and the lanes it leaves.

A plan made from a verdict (:func:`retire.branches.retirement.plans`) lists its lanes: ``lanes``
are the lanes the shim leaves on the branch (each a drop or a raise), ``keeping`` the lanes that
keep it, each with why (hold and its until, blocked and its blocker, unknown and its action). A
plan without lanes (``lanes`` None: a ``--plan`` file that names none, a bisection's plan) edits
every lane file as auto-drop always did, and the branch is abandoned when one lane cannot be
re-locked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.core.errors import InputError
from retire.lanes.model import SHIM_ID, LanePolicy
from retire.verdicts.model import LaneStep, LaneVerdict

__all__ = ["BRANCH_PREFIX", "DropPlan", "floor_versions", "lane_verdict_from_dict"]

BRANCH_PREFIX = "patchlane/retire-"


@dataclass(frozen=True)
class DropPlan:
    """One retire decision: which shim goes, why, and the floors that replace it.

    ``floors`` maps a distribution to the first fixed version (``{"megatron-core": "0.18.0"}``),
    or lists floors as requirements (``("megatron-core>=0.18.0",)``, a Verdict's ``floors``);
    ``upstream_links`` holds URLs, or ``(role, url)`` pairs.
    """

    shim_id: str
    why: str
    floors: Mapping[str, str] | Sequence[str] = field(default_factory=dict)
    evidence_markdown: str = ""
    upstream_links: tuple[str | tuple[str, str], ...] = ()
    # the lanes the shim leaves (drop or raise); None: every lane file, as auto-drop always did
    lanes: tuple[LaneVerdict, ...] | None = None
    # the lanes that keep the shim, with why (hold, blocked, keep, unknown)
    keeping: tuple[LaneVerdict, ...] = ()

    def __post_init__(self) -> None:
        if not SHIM_ID.fullmatch(self.shim_id):
            raise InputError(
                None, "shim", f"invalid shim id {self.shim_id!r}", "ids match [a-z][a-z0-9_]*"
            )
        object.__setattr__(self, "floors", floor_versions(self.floors))
        object.__setattr__(self, "upstream_links", _link_pairs(self.upstream_links))
        if self.lanes is not None:
            # a lane that does not leave is one that keeps the shim, whoever built the plan
            given = tuple(self.lanes)
            object.__setattr__(self, "lanes", tuple(lane for lane in given if lane.leaves))
            kept = tuple(lane for lane in given if not lane.leaves)
            object.__setattr__(self, "keeping", (*kept, *self.keeping))

    @property
    def per_lane(self) -> bool:
        """The plan names its lanes (a verdict's), rather than editing every lane file."""
        return self.lanes is not None

    @property
    def floor_versions(self) -> dict[str, str]:
        """``floors`` as {canonical distribution: version}, sorted."""
        return floor_versions(self.floors)

    @property
    def links(self) -> tuple[tuple[str, str], ...]:
        """``upstream_links`` as (role, URL) pairs."""
        return _link_pairs(self.upstream_links)

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.shim_id

    @property
    def floor_specs(self) -> list[str]:
        return [f"{dist}>={version}" for dist, version in self.floor_versions.items()]

    def identity(self, base_commit: str) -> str:
        """What decides the branch's tree: the shim, the floors, the base commit (and, for a plan
        that names its lanes, each leaving lane's step and floors)."""
        parts: list[object] = [self.shim_id, self.floor_versions, base_commit]
        if self.lanes is not None:
            parts.append(
                sorted([lane.lane, str(lane.step), list(lane.floors)] for lane in self.lanes)
            )
        blob = json.dumps(parts, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, object]:
        """The plan's JSON form (what ``--plan`` reads)."""
        return {
            "shim_id": self.shim_id,
            "why": self.why,
            "floors": self.floor_specs,
            "evidence_markdown": self.evidence_markdown,
            "upstream_links": [list(link) for link in self.links],
            **(
                {"lanes": [lane.to_json() for lane in self.lanes]} if self.lanes is not None else {}
            ),
            "keeping": [lane.to_json() for lane in self.keeping],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> DropPlan:
        """A plan from its JSON form (KeyError / TypeError say what is missing or wrong)."""
        floors = data.get("floors", {})
        if not isinstance(floors, Mapping | list | tuple):
            raise TypeError(f"floors: not an object or a list: {floors!r}")
        links = [
            tuple(link) if isinstance(link, list) else link
            for link in _sequence(data.get("upstream_links", ()))
        ]
        lanes = data.get("lanes")
        return cls(
            _text(data["shim_id"]),
            _text(data.get("why", "")),
            floors,
            _text(data.get("evidence_markdown", "")),
            _link_pairs(links),
            None if lanes is None else tuple(map(lane_verdict_from_dict, _sequence(lanes))),
            tuple(map(lane_verdict_from_dict, _sequence(data.get("keeping", ())))),
        )


def _optional_text(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else _text(value)


def lane_verdict_from_dict(data: object) -> LaneVerdict:
    """A :class:`LaneVerdict` from its JSON form (KeyError / TypeError / ValueError say what is
    wrong)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"a lane is not an object: {data!r}")
    return LaneVerdict(
        lane=_text(data["lane"]),
        step=LaneStep(_text(data["step"])),
        why=_text(data.get("why", "")),
        policy=LanePolicy(_text(data.get("policy", "follow"))),
        file=_text(data.get("file", "")),
        locked=_optional_text(data, "locked"),
        floors=tuple(_text(f) for f in _sequence(data.get("floors", ()))),
        blocker=_optional_text(data, "blocker"),
        until=_optional_text(data, "until"),
        action=_optional_text(data, "action"),
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    return value


def _sequence(value: object) -> Sequence[object]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"not a list: {value!r}")
    return value


def floor_versions(floors: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    """{canonical distribution: version}, sorted, from a mapping or ``dist>=version`` specs."""
    pairs = floors.items() if isinstance(floors, Mapping) else map(_floor_pair, floors)
    found: dict[str, str] = {}
    for dist, version in pairs:
        try:
            found[str(canonicalize_name(dist))] = str(Version(str(version)))
        except InvalidVersion:
            raise InputError(
                None,
                f"floors.{dist}",
                f"not a version: {version!r}",
                'use a release like "0.18.0"',
            ) from None
    return dict(sorted(found.items()))


def _link_pairs(links: Iterable[object]) -> tuple[tuple[str, str], ...]:
    """(role, URL) pairs; a bare URL has the role ``link``."""
    pairs: list[tuple[str, str]] = []
    for link in links:
        if isinstance(link, str):
            pairs.append(("link", link))
        elif isinstance(link, list | tuple):
            pairs.append((str(link[0]), str(link[1])))
        else:
            raise TypeError(f"not a link: {link!r}")
    return tuple(pairs)


def _floor_pair(spec: str) -> tuple[str, str]:
    try:
        req = Requirement(spec)
        [clause] = list(req.specifier)
    except (InvalidRequirement, ValueError):
        raise InputError(
            None, "floors", f"not a floor: {spec!r}", 'write it as "<dist>>=<version>"'
        ) from None
    if clause.operator != ">=":
        raise InputError(
            None, "floors", f"not a floor: {spec!r}", 'write it as "<dist>>=<version>"'
        )
    return req.name, clause.version
