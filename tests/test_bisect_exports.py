"""The lazy export map of retire.bisect (its names load on first use, so `patchlane --help` does
not pay for them) cannot go stale: every entry resolves to a name its module defines, and
``__all__`` lists exactly the map's names (issue 34: `retire.bisect.RecordedFix` once raised
ModuleNotFoundError after its module moved)."""

from __future__ import annotations

import importlib

import pytest

import retire.bisect as bisect_package

HOMES = bisect_package._HOMES  # the map under test
NAMES = [(module, name) for module, names in HOMES.items() for name in names]


@pytest.mark.parametrize(("module", "name"), NAMES, ids=[f"{m}.{n}" for m, n in NAMES])
def test_every_entry_resolves_to_its_modules_name(module, name):
    home = importlib.import_module(f"retire.bisect.{module}")
    assert hasattr(home, name), f"retire.bisect.{module} defines no {name}"
    assert getattr(bisect_package, name) is getattr(home, name)


def test_all_lists_exactly_the_maps_names():
    assert sorted(bisect_package.__all__) == sorted(name for _, name in NAMES)
    assert len({name for _, name in NAMES}) == len(NAMES)


def test_a_name_outside_the_map_is_an_attribute_error():
    with pytest.raises(AttributeError):
        bisect_package.RecordedFix  # noqa: B018
