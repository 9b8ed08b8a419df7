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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from retire.core.errors import InputError
from retire.evidence.floor import Floor, floor_map
from retire.history.edge import Place
from retire.lanes.model import SHIM_ID, LanePolicy
from retire.verdicts.model import LaneStep, LaneVerdict

__all__ = ["BRANCH_PREFIX", "DropPlan", "lane_verdict_from_dict"]

BRANCH_PREFIX = "patchlane/retire-"


@dataclass(frozen=True)
class DropPlan:
    """One retire decision: which shim goes, why, and the floors that replace it.

    ``floors`` are typed floors (a Verdict's, or a bisection's first fixed release);
    ``upstream_links`` are ``(role, url)`` pairs. Text is read into them once, by
    :meth:`from_dict` (a ``--plan`` file).
    """

    shim_id: str
    why: str
    floors: tuple[Floor, ...] = ()
    evidence_markdown: str = ""
    upstream_links: tuple[tuple[str, str], ...] = ()
    # the lanes the shim leaves (drop or raise); None: every lane file, as auto-drop always did
    lanes: tuple[LaneVerdict, ...] | None = None
    # the lanes that keep the shim, with why (hold, blocked, keep, unknown)
    keeping: tuple[LaneVerdict, ...] = ()
    # where the bug was fixed upstream, when the bug's window says (retire.history): the
    # first clean release, and the commit with its pull request where a mirror ordered them
    first_released: str | None = None
    fix_commit: str | None = None
    fix_pull: int | None = None
    # how the mirror that named the fix commit was found ("mirror of toylib: declared in …")
    fix_mirror: str | None = None

    def __post_init__(self) -> None:
        if not SHIM_ID.fullmatch(self.shim_id):
            raise InputError(
                None, "shim", f"invalid shim id {self.shim_id!r}", "ids match [a-z][a-z0-9_]*"
            )
        # one floor per distribution, the highest, in name order: the branch's identity rests on it
        highest = floor_map(self.floors)
        object.__setattr__(self, "floors", tuple(Floor(d, v) for d, v in highest.items()))
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
        """``floors`` as {canonical distribution: version}, what a lane file's edit takes."""
        return {floor.distribution: str(floor.version) for floor in self.floors}

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.shim_id

    @property
    def floor_specs(self) -> list[str]:
        return [str(floor) for floor in self.floors]

    def identity(self, base_commit: str) -> str:
        """What decides the branch's tree: the shim, the floors, the base commit (and, for a plan
        that names its lanes, each leaving lane's step and floors)."""
        parts: list[object] = [self.shim_id, self.floor_versions, base_commit]
        if self.lanes is not None:
            parts.append(
                sorted(
                    [lane.lane, str(lane.step), [str(floor) for floor in lane.floors]]
                    for lane in self.lanes
                )
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
            "upstream_links": [list(link) for link in self.upstream_links],
            **(
                {"lanes": [lane.to_json() for lane in self.lanes]} if self.lanes is not None else {}
            ),
            "keeping": [lane.to_json() for lane in self.keeping],
            **{
                key: value
                for key, value in (
                    ("first_released", self.first_released),
                    ("fix_commit", self.fix_commit),
                    ("fix_pull", self.fix_pull),
                    ("fix_mirror", self.fix_mirror),
                )
                if value is not None
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> DropPlan:
        """A plan from its JSON form (KeyError / TypeError say what is missing or wrong; a floor
        that is not ``dist>=version`` is an input error)."""
        floors = data.get("floors", ())
        if isinstance(floors, Mapping):
            # {dist: version}: the form plans were first written in
            read = tuple(Floor.parse(f"{d}>={v}", key=f"floors.{d}") for d, v in floors.items())
        else:
            read = tuple(Floor.parse(_text(f)) for f in _sequence(floors))
        lanes = data.get("lanes")
        return cls(
            _text(data["shim_id"]),
            _text(data.get("why", "")),
            read,
            _text(data.get("evidence_markdown", "")),
            tuple(map(_link_pair, _sequence(data.get("upstream_links", ())))),
            None if lanes is None else tuple(map(lane_verdict_from_dict, _sequence(lanes))),
            tuple(map(lane_verdict_from_dict, _sequence(data.get("keeping", ())))),
            _optional_text(data, "first_released"),
            _optional_text(data, "fix_commit"),
            _optional_int(data, "fix_pull"),
            _optional_text(data, "fix_mirror"),
        )


def _optional_text(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else _text(value)


def _optional_int(data: Mapping[str, object], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"not a number: {value!r}")
    return value


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
        floors=tuple(Floor.parse(_text(f)) for f in _sequence(data.get("floors", ()))),
        blocker=_optional_text(data, "blocker"),
        until=_optional_text(data, "until"),
        action=_optional_text(data, "action"),
        window=Place(_text(data.get("window", "unknown"))),
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not a string: {value!r}")
    return value


def _sequence(value: object) -> Sequence[object]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"not a list: {value!r}")
    return value


def _link_pair(link: object) -> tuple[str, str]:
    """A link as written in a plan: a bare URL (the role ``link``) or ``[role, url]``."""
    if isinstance(link, str):
        return ("link", link)
    if isinstance(link, list | tuple) and len(link) == 2:
        return (_text(link[0]), _text(link[1]))
    raise TypeError(f"not a link: {link!r}")
