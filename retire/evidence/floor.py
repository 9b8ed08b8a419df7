"""A requirement floor, ``dist>=version``: the first release of a distribution a lane may take.

Verdicts propose floors, lanes raise their pins to them, branches and bisections write them. One
value carries them all the way; text is parsed once, where it is read (a ``--plan`` file, a
lane's requirement), by :meth:`Floor.parse`, and written once, by ``str()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.core.errors import InputError

__all__ = ["Floor", "floor_map"]


@dataclass(frozen=True, order=True)
class Floor:
    """``distribution>=version``: the distribution's canonical name and the first version taken."""

    distribution: str
    version: Version

    def __post_init__(self) -> None:
        object.__setattr__(self, "distribution", str(canonicalize_name(self.distribution)))
        if not isinstance(self.version, Version):
            object.__setattr__(self, "version", _version(self.distribution, self.version))

    def __str__(self) -> str:
        return f"{self.distribution}>={self.version}"

    @classmethod
    def parse(cls, text: str, *, path: str | None = None, key: str = "floors") -> Floor:
        """``"megatron-core>=0.18.0"`` → a Floor; anything else is an input error naming
        ``path`` and ``key``."""
        try:
            requirement = Requirement(text)
            [clause] = list(requirement.specifier)
        except (InvalidRequirement, ValueError):
            raise _not_a_floor(text, path, key) from None
        if clause.operator != ">=" or requirement.extras or requirement.marker or requirement.url:
            raise _not_a_floor(text, path, key)
        return cls(requirement.name, _version(requirement.name, clause.version, path, key))


def floor_map(floors: Iterable[Floor]) -> Mapping[str, Version]:
    """{canonical distribution: version}, highest per distribution, sorted by name."""
    found: dict[str, Version] = {}
    for floor in floors:
        found[floor.distribution] = max(found.get(floor.distribution, floor.version), floor.version)
    return dict(sorted(found.items()))


def _version(
    distribution: str, text: object, path: str | None = None, key: str | None = None
) -> Version:
    try:
        return Version(str(text))
    except InvalidVersion:
        raise InputError(
            path,
            key or f"floors.{distribution}",
            f"not a version: {text!r}",
            'use a release like "0.18.0"',
        ) from None


def _not_a_floor(text: str, path: str | None, key: str) -> InputError:
    return InputError(path, key, f"not a floor: {text!r}", 'write it as "<dist>>=<version>"')
