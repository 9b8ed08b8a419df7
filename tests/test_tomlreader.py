"""The one input-error type and the one reader every user file goes through (shims.tomlreader)."""

from __future__ import annotations

import datetime as _dt
import os
import pickle
import threading

import pytest

from retire.core.errors import InputError
from shims import tomlreader
from shims.errors import InputError
from shims.tomlreader import (
    CLOSE_MATCH_CUTOFF,
    Value,
    close_match,
    describe,
    loads,
    read,
    read_text,
)


def test_one_error_type_with_one_line_shape():
    assert InputError is InputError and InputError is InputError
    error = InputError("lanes/a.toml", "lane.python", "expected a string,\n got 3", "quote it")
    assert str(error) == "lanes/a.toml: lane.python: expected a string, got 3 — quote it"
    assert str(InputError(None, None, "unknown lane 'x'")) == "unknown lane 'x'"
    assert (
        str(InputError(None, "--week", "bad week", "e.g. 2026-W47"))
        == "--week: bad week — e.g. 2026-W47"
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InputError and str(copy) == str(error) and copy.key == "lane.python"


# ---------------------------------------------------------------------------------------------
# Reading files


def test_files_that_cannot_be_read_are_one_error(tmp_path):
    with pytest.raises(InputError, match=r"^x.toml: file not found — create it or fix the path$"):
        read(tmp_path / "x.toml", "x.toml")
    assert read_text(tmp_path / "x.toml", missing_ok=True) is None
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(
        InputError, match=r"^f: not a regular file \(a directory\) — point it at a file$"
    ):
        read(tmp_path / "folder.toml", "f")
    (tmp_path / "big.toml").write_bytes(b"#" * (tomlreader.MAX_BYTES + 1))
    with pytest.raises(InputError, match=r"^big.toml: larger than 1024 KiB"):
        read(tmp_path / "big.toml", "big.toml")
    assert read(tmp_path / "big.toml", "big.toml", max_bytes=2 * tomlreader.MAX_BYTES).data == {}
    (tmp_path / "latin.toml").write_bytes(b'a = "x"\nb = "caf\xe9"\n')
    with pytest.raises(InputError) as caught:
        read(tmp_path / "latin.toml", "latin.toml")
    assert (
        str(caught.value)
        == "latin.toml: not UTF-8 text at line 2 (byte 0xe9) — save the file as UTF-8"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_never_blocks(tmp_path):
    os.mkfifo(tmp_path / "pipe.toml")
    outcome: list[BaseException] = []

    def reader() -> None:
        try:
            read(tmp_path / "pipe.toml", "pipe.toml")
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], InputError) and "not a regular file (a FIFO)" in str(outcome[0])


def test_toml_errors_name_the_line():
    with pytest.raises(InputError) as caught:
        loads("a = 1\nb = [1,\nc = 2\n", "x.toml")
    assert str(caught.value).startswith("x.toml: invalid TOML at line 3, column ")
    assert str(caught.value).endswith(" — fix the syntax")
    with pytest.raises(InputError, match=r"^x.toml: invalid TOML at the end of the file: "):
        loads("[a", "x.toml")
    with pytest.raises(
        InputError, match=r"^x.toml: invalid TOML: arrays or inline tables nested too deeply"
    ):
        loads("a = " + "[" * 5000 + "]" * 5000, "x.toml")
    with pytest.raises(InputError, match=r"^x.toml: invalid TOML at line 2: integer too long"):
        loads("a = 1\nb = " + "7" * 5000, "x.toml")
    # ordinary nesting reads fine
    assert loads("a = " + "[" * 50 + "]" * 50, "x.toml").data["a"]


def test_json_state_errors():
    assert tomlreader.loads_json('{"a": 1}', "s.json").raw == {"a": 1}
    with pytest.raises(
        InputError, match=r"^s.json: not valid JSON: nested too deeply — restore it"
    ):
        tomlreader.loads_json("[" * 100_000, "s.json", fix="restore it")
    with pytest.raises(InputError, match=r"^s.json: not valid JSON: Expecting"):
        tomlreader.loads_json("{", "s.json")


# ---------------------------------------------------------------------------------------------
# Typed getters


def value(raw: object, key: str = "t.k") -> Value:
    return Value(raw, key, "f.toml")


def test_numbers_reject_nan_infinities_and_out_of_range():
    assert value(3).number() == 3 and value(2.5).number(positive=True) == 2.5
    for bad in (float("nan"), float("inf"), float("-inf"), True, "3", 10**400):
        with pytest.raises(InputError, match=r"^f.toml: t.k: expected a number, got "):
            value(bad).number()
    with pytest.raises(
        InputError, match=r"expected a positive number, got an integer 0 — write k = …"
    ):
        value(0).number(positive=True)
    with pytest.raises(InputError, match=r"expected an integer >= 0, got an integer -1"):
        value(-1).number(integer=True, minimum=0)
    with pytest.raises(InputError, match=r"expected an integer, got a number 1.5"):
        value(1.5).number(integer=True)
    with pytest.raises(InputError, match=r"expected a number <= 10, got an integer 11"):
        value(11).number(maximum=10)
    with pytest.raises(
        InputError,
        match=r"^f.toml: t.timeout: expected seconds, got a number nan — write timeout = 60$",
    ):
        value(float("nan"), "t.timeout").number(
            positive=True, what="seconds", fix="write timeout = 60"
        )


def test_strings_choices_and_booleans():
    assert value("x").string() == "x" and value("").string(empty_ok=True) == ""
    with pytest.raises(
        InputError, match=r"^f.toml: t.k: is empty — write something useful or remove the key$"
    ):
        value("  ").string()
    with pytest.raises(
        InputError, match=r"^f.toml: t.k: expected a string, got a table — quote it$"
    ):
        value({}).string()
    with pytest.raises(
        InputError, match=r"^f.toml: t.fix-class: unknown fix class 'x' — use one of a, b$"
    ):
        value("x", "t.fix-class").choice(("a", "b"))
    with pytest.raises(
        InputError,
        match=r"^f.toml: t.needs-cuda: expected true or false, got a string 'yes' — "
        r"write needs-cuda = true$",
    ):
        value("yes", "t.needs-cuda").boolean()
    with pytest.raises(InputError, match=r"expected an array, got a string 'x'"):
        value("x").strings()
    with pytest.raises(InputError, match=r"^f.toml: t.k\[1\]: expected a string, got an integer 2"):
        value(["a", 2]).strings()


def test_unknown_keys_get_one_did_you_mean():
    table = loads('ownr = "x"\n', "f.toml")
    with pytest.raises(
        InputError, match=r"^f.toml: ownr: unknown key 'ownr' — did you mean 'owner'\?$"
    ):
        table.check_keys(("owner", "id"))
    with pytest.raises(
        InputError, match=r"^f.toml: ownr: unknown key 'ownr' — allowed keys: id, title$"
    ):
        table.check_keys(("id", "title"))
    with pytest.raises(InputError, match=r"— the file holds \[\[deny\]\] entries only$"):
        table.check_keys(("deny",), fix="the file holds [[deny]] entries only")
    # One cutoff for every "did you mean": a ratio just above it suggests, just below does not.
    assert CLOSE_MATCH_CUTOFF == 0.75
    assert close_match("categroy", ["category"]) == "category"
    # ratio 0.5
    assert close_match("abcd", ["abxy"]) is None


def test_dates_and_moments():
    assert value(_dt.date(2026, 4, 14)).date() == _dt.date(2026, 4, 14)
    with pytest.raises(InputError, match=r"expected a date, got a date-time 2026-04-14T00:00:00"):
        value(_dt.datetime(2026, 4, 14)).date()
    utc = _dt.UTC
    assert value("2026-11-01T12:00:00Z").moment() == _dt.datetime(2026, 11, 1, 12, tzinfo=utc)
    assert value(_dt.date(2026, 11, 1)).moment() == _dt.datetime(2026, 11, 1, tzinfo=utc)
    with pytest.raises(InputError, match=r"^f.toml: t.k: malformed date '2026-13-45'"):
        value("2026-13-45").moment()
    far = _dt.datetime(9999, 12, 31, 23, 59, tzinfo=_dt.timezone(-_dt.timedelta(hours=23)))
    with pytest.raises(InputError, match=r"date out of range"):
        value(far).moment()
    with pytest.raises(InputError, match=r"date out of range"):
        value("0001-01-01T00:00:00+01:00").moment()


def test_urls_requirements_specifiers_versions():
    assert value("https://github.com/o/r").url() == "https://github.com/o/r"
    for bad in ("https://[", "toylib#1", "ftp://x/y", "http://", "https://a b"):
        with pytest.raises(InputError, match=r"not an http\(s\) URL"):
            value(bad).url()
    assert (
        value("file:///srv/simple").url(schemes=("http", "https", "file"), what="a URL")
        == "file:///srv/simple"
    )
    assert value("torch==2.9.1").requirement() == "torch==2.9.1"
    with pytest.raises(InputError, match=r"invalid requirement 'torch=2.9' \("):
        value("torch=2.9").requirement()
    with pytest.raises(InputError, match=r"invalid requirement .* too long"):
        value("torch==" + "1" * 5000).requirement()
    assert str(value(">=1.1,<2").specifier()) == "<2,>=1.1"
    for bad in ("=>1.1", ">=" + "9" * 5000):
        with pytest.raises(InputError, match=r"bad version specifier"):
            value(bad).specifier()
    assert value("2.2.4").version() == "2.2.4"
    with pytest.raises(InputError, match=r"invalid version"):
        value("1" * 5000).version()


def test_describe_never_prints_a_whole_value():
    assert describe(3.12) == "a number 3.12" and describe(True) == "a boolean true"
    assert describe({"a": [1] * 1000}) == "a table" and describe([[[]]]) == "an array"
    assert describe("x" * 100) == "a string '" + "x" * 36 + "..."
    assert describe(10**5000) == "an integer (too long to show)"
