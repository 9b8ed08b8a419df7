"""retire.report.jsontext writes what ``json.dumps(value, indent=1)`` writes, byte for byte, and
leaves what it does not know to the standard library (its errors included)."""

from __future__ import annotations

import enum
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retire.report import jsontext

_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=30,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_the_text_is_the_standard_librarys(value):
    assert jsontext.dumps(value) == json.dumps(value, indent=1)


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_enums_are_written_as_their_values():
    value = {Colour.RED: [Colour.RED, Level.HIGH], "é\n\u2028": ["\x00", 1e300, -0.0]}
    assert jsontext.dumps(value) == json.dumps(value, indent=1)


@pytest.mark.parametrize("value", [{1: "a"}, {None: 1, True: 2, 2.5: 3}])
def test_keys_that_are_not_text_are_left_to_the_standard_library(value):
    assert jsontext.dumps(value) == json.dumps(value, indent=1)


def test_what_json_cannot_write_fails_as_json_fails():
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsontext.dumps({"a": [object()]})
    with pytest.raises(TypeError, match="keys must be"):
        jsontext.dumps([{(1, 2): 3}])
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        jsontext.dumps({"a": loop})
