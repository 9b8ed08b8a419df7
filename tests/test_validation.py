"""The validation manifest: records, JSON Lines I/O, atomic appends, and merges across hosts."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from retire.core import atomic
from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.evidence.validation import (
    ValidationRecord,
    append,
    compute_record_id,
    dumps,
    load,
    merge,
    write,
)


def record(
    shim: str = "toy_add",
    *,
    host: str = "h100-a",
    started: str = "2026-04-14T10:00:00.000000+00:00",
    mode: str = "without",
    sentinel: str = "BUG_REPRODUCED",
    **changes: object,
) -> ValidationRecord:
    fields: dict[str, object] = {
        "shim": shim,
        "mode": mode,
        "lane": "stable",
        "host": {"hostname": host, "gpu": "NVIDIA H100 80GB HBM3", "python": "3.12.1"},
        "versions": {"toylib": "1.0"},
        "sentinel": sentinel,
        "outcome": "bug-reproduced" if sentinel == "BUG_REPRODUCED" else "fix-validated",
        "exit_code": 10 if sentinel == "BUG_REPRODUCED" else 0,
        "duration_s": 1.25,
        "started_at": started,
    }
    fields.update(changes)
    return ValidationRecord(**fields)  # type: ignore[arg-type]


def test_record_id_hashes_the_identifying_fields():
    base = record()
    assert base.record_id == compute_record_id(
        shim="toy_add",
        mode="without",
        lane="stable",
        host=base.host,
        started_at=base.started_at,
        sentinel="BUG_REPRODUCED",
    )
    assert len(base.record_id) == 64
    # not identifying
    assert record(duration_s=9.0, output_tail="other").record_id == base.record_id
    for changed in (
        record(host="h200-b"),
        record(mode="with"),
        record(sentinel="FIX_VALIDATED"),
        record(started="2026-04-14T10:00:00.000001+00:00"),
        record(shim="other"),
        record(lane="nightly"),
    ):
        assert changed.record_id != base.record_id


def test_round_trip_through_json_lines(tmp_path: Path):
    path = tmp_path / "validation" / "manifest.jsonl"
    records = [record(), record(mode="with", sentinel="FIX_VALIDATED")]
    assert append(path, records) == 2
    assert load(path) == records
    line = path.read_text().splitlines()[0]
    assert json.loads(line)["record_id"] == records[0].record_id
    assert dumps(records[0]) == line


def test_append_skips_records_already_present(tmp_path: Path):
    path = tmp_path / "manifest.jsonl"
    first = record()
    assert append(path, [first, first]) == 1
    assert append(path, [first, record(host="h200-b")]) == 1
    assert [r.host["hostname"] for r in load(path)] == ["h100-a", "h200-b"]


LINE_BREAKERS = "\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\r"


def test_output_with_unicode_line_separators_round_trips_through_append_load_and_merge(
    tmp_path: Path, capsys
):
    """A reproducer's output holding U+2028/U+2029/U+0085 (str.splitlines breaks on them) stays
    one line."""
    path = tmp_path / "validation" / "manifest.jsonl"
    odd = record(
        output_tail=f"loss{LINE_BREAKERS}nan\ud800 tail", detail="a\u2028b", host="h\u2029\x85"
    )
    assert append(path, [odd]) == 1
    raw = path.read_bytes()
    # escaped, never raw
    assert raw.count(b"\n") == 1 and len(raw.decode("utf-8").splitlines()) == 1
    assert load(path) == [odd]
    later = record(host="h200-b")
    # the store keeps taking records
    assert append(path, [later]) == 1
    other = tmp_path / "other.jsonl"
    write(other, merge([path]))
    assert merge([other, path]) == [odd, later]
    # nothing was damaged
    assert capsys.readouterr().err == ""


def test_a_damaged_line_is_quarantined_never_blocks_appends_merges_or_loads(tmp_path: Path, capsys):
    path = tmp_path / "manifest.jsonl"
    first, second = record(), record(host="h200-b")
    damaged = '{"shim": "x", "mode": '
    path.write_text(dumps(first) + "\n" + damaged + "\n" + dumps(second) + "\n")
    # the rest still loads
    assert load(path) == [first, second]
    err = capsys.readouterr().err.strip()
    quarantine = tmp_path / "manifest.jsonl.quarantine"
    assert err == (
        f"patchlane: warning: {path}: line 2: not valid JSON (Expecting value at column 23) — "
        f"skipped, copied to {quarantine}; fix it there and `patchlane validation merge` it back, "
        "or delete it"
    )
    assert quarantine.read_text() == damaged + "\n"
    assert merge([path]) == [first, second]
    capsys.readouterr()
    third = record(host="h300-c")
    # appending moves the damaged line out of the manifest
    assert append(path, [third]) == 1
    assert "line 2" in capsys.readouterr().err
    assert path.read_text() == "".join(dumps(r) + "\n" for r in (first, second, third))
    # once, not twice
    assert quarantine.read_text() == damaged + "\n"
    assert load(path) == [first, second, third] and capsys.readouterr().err == ""


def test_a_line_split_by_an_old_writer_is_quarantined_and_the_store_recovers(
    tmp_path: Path, capsys
):
    """The failure seen: a record cut at a raw U+2028 by a splitlines reader. Both halves go; the
    rest stays."""
    path = tmp_path / "manifest.jsonl"
    good = record(host="h200-b")
    # a raw newline inside a string
    bad = dumps(record(output_tail="x")).replace('"x"', '"a\nb"')
    path.write_text(bad + "\n" + dumps(good) + "\n")
    assert load(path) == [good]
    # one warning per damaged line
    assert len(capsys.readouterr().err.strip().splitlines()) == 2
    out = tmp_path / "merged.jsonl"
    write(out, merge([path]))
    assert load(out) == [good]


def test_a_damaged_line_that_cannot_be_quarantined_is_kept_never_lost(tmp_path: Path, capsys):
    path = tmp_path / "manifest.jsonl"
    first, damaged = record(), '{"shim": "x", "mode": '
    path.write_text(dumps(first) + "\n" + damaged + "\n")
    # no room for the quarantine file
    (tmp_path / "manifest.jsonl.quarantine").mkdir()
    second = record(host="h200-b")
    # the store still takes records …
    assert append(path, [second]) == 1
    # … and loses nothing
    assert path.read_text() == dumps(first) + "\n" + damaged + "\n" + dumps(second) + "\n"
    assert "line 2" in capsys.readouterr().err and load(path) == [first, second]
    with pytest.raises(InputError, match="line 2: damaged, and could not copy it"):
        # a full rewrite would drop it: refused, nothing written
        write(path, [first])
    assert damaged in path.read_text()


def test_merging_a_manifest_that_does_not_exist_is_an_error(tmp_path: Path):
    present = tmp_path / "a.jsonl"
    append(present, [record()])
    with pytest.raises(InputError, match=r"missing.jsonl: file not found — check the path"):
        merge([present, tmp_path / "missing.jsonl"])
    with pytest.raises(InputError, match="not a regular file"):
        merge([tmp_path])


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda data: data.update(outcome="passed"), "outcome 'passed' is not one of"),
        (lambda data: data.update(mode="both"), "mode 'both' is not one of"),
        (lambda data: data.update(lane="edited"), "record_id does not match"),
        (lambda data: data.update(extra=1), "unknown field 'extra'"),
        (lambda data: data.pop("shim"), "field 'shim' must be a string"),
        (lambda data: data.update(exit_code="10"), "field 'exit_code' must be an integer"),
        (
            lambda data: data.update(duration_s=10**400),
            "field 'duration_s' must be a finite number",
        ),
        (lambda data: data.update(sentinel={"a": 1}), "field 'sentinel' must be a string or null"),
    ],
)
def test_invalid_records_name_the_field(tmp_path: Path, capsys, edit, problem):
    data = json.loads(dumps(record()))
    edit(data)
    path = tmp_path / "manifest.jsonl"
    path.write_text(json.dumps(data) + "\n")
    assert load(path) == []
    assert f"line 1: {problem}" in capsys.readouterr().err


def test_merge_from_two_hosts_loses_nothing_and_duplicates_nothing(tmp_path: Path):
    shared = record("toy_add", host="h100-a", started="2026-04-14T10:00:05.000000+00:00")
    host_a = [
        record("toy_add", host="h100-a", started="2026-04-14T10:00:01.000000+00:00"),
        shared,
        record("toy_env", host="h100-a", started="2026-04-14T10:00:09.000000+00:00"),
    ]
    host_b = [
        # same time, other host
        record("toy_add", host="h200-b", started="2026-04-14T10:00:01.000000+00:00"),
        # an artifact that reached both manifests
        shared,
        record(
            "toy_add",
            host="h200-b",
            started="2026-04-14T10:00:03.000000+00:00",
            mode="with",
            sentinel="FIX_VALIDATED",
        ),
    ]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append(a, host_a)
    append(b, host_b)
    merged = merge([a, b])
    assert len(merged) == 5
    assert len({r.record_id for r in merged}) == 5
    assert {r.record_id for r in merged} == {r.record_id for r in host_a + host_b}
    assert [r.started_at for r in merged] == sorted(r.started_at for r in merged)
    # Stable: equal start times keep file order (host a's record first).
    assert [r.host["hostname"] for r in merged[:2]] == ["h100-a", "h200-b"]

    out = tmp_path / "merged.jsonl"
    write(out, merged)
    # merging again changes nothing
    assert merge([out, a, b]) == merged


def _append_many(path: str, worker: int) -> None:
    for index in range(20):
        append(
            path,
            [record(host=f"worker-{worker}", started=f"2026-04-14T10:00:{index:02d}.000000+00:00")],
        )


@pytest.mark.slow
def test_concurrent_appends_keep_every_record(tmp_path: Path):
    path = tmp_path / "manifest.jsonl"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(str(path), n)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert len(load(path)) == 80
    # no temp or lock files left
    assert sorted(os.listdir(tmp_path)) == ["manifest.jsonl"]


def test_atomic_write_keeps_the_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = tmp_path / "lock.toml"
    atomic_write(path, "old\n", within=tmp_path)
    os.chmod(path, 0o640)
    atomic_write(path, "new\n", within=tmp_path)
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, "half\n", within=tmp_path)
    assert path.read_text() == "new\n"
    assert sorted(os.listdir(tmp_path)) == ["lock.toml"]


def test_atomic_write_creates_folders_and_takes_bytes(tmp_path: Path):
    path = tmp_path / "deep" / "er" / "file.bin"
    atomic_write(path, b"\x00\x01", within=tmp_path)
    assert path.read_bytes() == b"\x00\x01"
