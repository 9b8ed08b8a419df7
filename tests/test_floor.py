"""Floor: one value for ``dist>=version``, parsed once where text is read, written by ``str()``."""

from __future__ import annotations

import pytest
from packaging.version import Version

from retire.branches.dropplan import DropPlan
from retire.core.errors import InputError
from retire.evidence.floor import Floor, floor_map
from retire.evidence.values import to_json
from retire.verdicts.model import ConditionResult, LaneStep, LaneVerdict


def test_a_floor_is_canonical_and_written_as_the_requirement_it_stands_for():
    floor = Floor.parse("Megatron_Core>=0.18.0")
    assert floor == Floor("megatron-core", Version("0.18.0"))
    assert str(floor) == "megatron-core>=0.18.0" and Floor.parse(str(floor)) == floor
    # the one serialiser writes it as text, inside any value
    result = ConditionResult("version-floor", "holds", "released", floor)
    assert to_json(result)["floor"] == "megatron-core>=0.18.0"


@pytest.mark.parametrize(
    "text", ["toylib", "toylib==1.6", "toylib>=1.6,<2", "toylib>=nope", "toylib[x]>=1", ">=1.6"]
)
def test_anything_but_dist_ge_version_is_an_input_error_naming_the_key(text):
    with pytest.raises(InputError) as caught:
        Floor.parse(text, path="plan.json", key="floors")
    assert str(caught.value).startswith("plan.json: floors: ")


def test_floor_map_keeps_the_highest_floor_per_distribution():
    floors = [Floor.parse("b>=1.0"), Floor.parse("a>=2"), Floor.parse("b>=1.5")]
    assert floor_map(floors) == {"a": Version("2"), "b": Version("1.5")}


def test_a_plan_reads_floors_once_and_round_trips():
    lane = LaneVerdict("cpu", LaneStep.RAISE, "raise", floors=(Floor.parse("toylib>=1.6"),))
    plan = DropPlan("toylib_add", "x", (Floor.parse("toylib>=1.6"),), lanes=(lane,))
    again = DropPlan.from_dict(plan.to_dict())
    assert again == plan and again.identity("abc") == plan.identity("abc")
    assert plan.to_dict()["floors"] == ["toylib>=1.6"]
    # the first form plans were written in, {dist: version}, is read into the same floors
    old = DropPlan.from_dict({"shim_id": "toylib_add", "why": "x", "floors": {"TOYLIB": "1.6"}})
    assert old.floors == (Floor.parse("toylib>=1.6"),)
    with pytest.raises(InputError, match="not a floor"):
        DropPlan.from_dict({"shim_id": "toylib_add", "floors": ["toylib==1.6"]})
