"""Locks through real uv against loopback indexes: contents, provenance, skipping, failures."""

from __future__ import annotations

import tomllib

import pytest
from packaging.pylock import Pylock, is_valid_pylock_path

from retire.lanes import lanefile
from retire.locks import locking
from tests.conftest import run_cli

LANE = """
[lane]
python = "3.12"
platform = "x86_64-manylinux_2_28"
requirements = [{reqs}]
{extra}
[lane.indexes.main]
url = "@MAIN@"
default = true
"""


def lane_text(reqs: str, extra: str = "") -> str:
    return LANE.format(reqs=reqs, extra=extra)


def packages(path) -> dict[str, str]:
    lock = Pylock.from_dict(tomllib.loads(path.read_text()))
    return {str(p.name): str(p.version) for p in lock.packages}


@pytest.mark.slow
def test_lock_is_pep751_with_hashes_and_provenance(project, capsys):
    project.write("base", lane_text('"torchlike>=2"', "exclude-newer = 2026-07-01"))
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0, out
    path = project.lock_file("base")
    assert is_valid_pylock_path(path)
    data = tomllib.loads(path.read_text())
    # packaging's validator accepts it
    lock = Pylock.from_dict(data)
    versions = {str(p.name): str(p.version) for p in lock.packages}
    # exclude-newer froze the universe at 2026-07-01: helper 2.0 (October) is not visible.
    assert versions == {"torchlike": "2.2.0", "helper": "1.5"}
    assert all(w.hashes.get("sha256") for p in lock.packages for w in p.wheels or [])
    tool = data["tool"]["patchlane"]
    [lane] = lanefile.load_lanes(project.root / "lanes")
    assert tool["digest"] == lane.digest
    assert (
        tool["lane"] == "base"
        and tool["uv-version"]
        and tool["exclude-newer"] == "2026-07-01T00:00:00Z"
    )
    assert "locked" in out and "base" in out


@pytest.mark.slow
def test_yanked_release_is_never_chosen(project, capsys):
    project.write("pin", lane_text('"torchlike>2.1.0,<2.2"'))
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    # 2.1.1 is the only candidate and it is yanked: uv refuses to pick it.
    assert code == 1
    assert "failed" in out and "torchlike" in out
    assert not project.lock_file("pin").exists()


@pytest.mark.slow
def test_unchanged_lane_is_skipped_without_asking_uv(project, universe, capsys):
    project.write("base", lane_text('"torchlike==2.1.0"'))
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    before = project.lock_file("base").read_bytes()
    requests = len(universe["main"].index.requests)
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0 and "up-to-date" in out
    assert project.lock_file("base").read_bytes() == before
    # no network at all
    assert len(universe["main"].index.requests) == requests


@pytest.mark.slow
def test_check_names_stale_and_missing_locks(project, capsys):
    project.write("a", lane_text('"torchlike==2.1.0"'))
    project.write("b", lane_text('"helper==1.0"'))
    run_cli(project.root, "lock", capsys=capsys)
    assert run_cli(project.root, "lock", "--check", capsys=capsys)[0] == 0
    project.write("a", lane_text('"torchlike==2.2.0"'))
    project.write("c", lane_text('"helper==1.5"'))
    code, out, _ = run_cli(project.root, "lock", "--check", capsys=capsys)
    assert code == 1
    # Each lock is named by its state: a lane that changed is stale, one never locked is missing.
    assert "stale   a: lane changed" in out and "missing c: no lock" in out
    assert " b:" not in out
    # --check writes nothing
    assert not project.lock_file("c").exists()


@pytest.mark.slow
def test_nightly_comes_only_from_its_index(project, capsys):
    project.write(
        "nightly",
        lane_text(
            '"torchlike>=2.3.0.dev0"', 'prerelease = "allow"\nexclude-newer = 2026-07-02T12:00:00Z'
        )
        + """
[lane.indexes.nightly]
url = "@NIGHTLY@"
[lane.sources]
torchlike = "nightly"
""",
    )
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0, out
    versions = packages(project.lock_file("nightly"))
    # The freeze date picks the 0702 nightly; helper comes from the main index as of that
    # date (1.5), never from the nightly index's newer decoy 99.0.
    assert versions["torchlike"] == "2.3.0.dev20260702"
    assert versions["helper"] == "1.5"
    text = project.lock_file("nightly").read_text()
    assert project.universe["nightly"].url.rsplit("/", 1)[0] + "/files/torchlike" in text


@pytest.mark.slow
def test_static_metadata_locks_an_unbuildable_sdist(project, capsys):
    project.write(
        "ext",
        lane_text('"kernels==0.5.0", "torchlike==2.2.0"')
        + """
[[lane.static-metadata]]
name = "cudaext"
version = "1.0.0"
requires-dist = ["helper"]
""",
    )
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0, out
    data = tomllib.loads(project.lock_file("ext").read_text())
    cudaext = next(p for p in data["packages"] if p["name"] == "cudaext")
    assert "sdist" in cudaext and cudaext["sdist"]["hashes"]["sha256"]


@pytest.mark.slow
def test_failing_lane_keeps_previous_lock_and_others_still_lock(project, capsys):
    project.write("good", lane_text('"helper==1.0"'))
    project.write("bad", lane_text('"torchlike==2.1.0"'))
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    previous = project.lock_file("bad").read_bytes()
    # unresolvable
    project.write("bad", lane_text('"torchlike==9.9"'))
    project.write("good", lane_text('"helper==1.5"'))
    project.write("offline", lane_text('"helper"').replace("@MAIN@", "http://127.0.0.1:9/simple"))
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 1
    assert "failed      bad:" in out and "torchlike" in out
    # uv's full explanation is shown under the failure
    assert "| " in out
    assert "unreachable offline:" in out
    # untouched
    assert project.lock_file("bad").read_bytes() == previous
    assert packages(project.lock_file("good")) == {"helper": "1.5"}
    assert not project.lock_file("offline").exists()


@pytest.mark.slow
def test_index_without_url_is_reported_unreachable_not_fatal(project, capsys):
    project.write(
        "night",
        lane_text('"torchlike"')
        + '[lane.indexes.pytorch-nightly]\n[lane.sources]\ntorchlike = "pytorch-nightly"\n',
    )
    project.write("ok", lane_text('"helper==1.0"'))
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    # an index this host cannot reach is not the lane's fault …
    assert code == 0
    assert "unreachable night: index 'pytorch-nightly' has no URL on this host" in out
    assert project.lock_file("ok").exists()
    # … unless asked
    assert run_cli(project.root, "lock", "--require-all", capsys=capsys)[0] == 1
    # A missing lock fails --check, also one this host could not make …
    code, out, _ = run_cli(project.root, "lock", "--check", capsys=capsys)
    assert code == 1 and "missing night: no lock, and its index has no URL on this host" in out
    # … unless the host says it never reaches that index: then it is a note.
    code, out, _ = run_cli(project.root, "lock", "--check", "--skip-unreachable", capsys=capsys)
    assert code == 0 and "note    night: never locked" in out and "1 of 2 locks match" in out


@pytest.mark.slow
def test_index_url_can_come_from_uv_configuration(project, monkeypatch, capsys):
    project.write(
        "night",
        lane_text('"torchlike>=2.3.0.dev0"', 'prerelease = "allow"')
        + '[lane.indexes.pytorch-nightly]\n[lane.sources]\ntorchlike = "pytorch-nightly"\n',
    )
    monkeypatch.setenv("UV_INDEX", f"pytorch-nightly={project.universe['nightly'].url}")
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0, out
    assert packages(project.lock_file("night"))["torchlike"] == "2.3.0.dev20260703"


@pytest.mark.slow
def test_upgrade_package_moves_only_that_package(project, capsys):
    project.write("a", lane_text('"torchlike>=2.0"', "exclude-newer = 2026-05-15"))
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    assert packages(project.lock_file("a")) == {"torchlike": "2.1.0", "helper": "1.5"}
    # Widen the freeze: a plain re-lock keeps the pins it already has …
    project.write("a", lane_text('"torchlike>=2.0"', "exclude-newer = 2026-11-01"))
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    assert packages(project.lock_file("a")) == {"torchlike": "2.1.0", "helper": "1.5"}
    # … --upgrade-package moves just the one named …
    assert run_cli(project.root, "lock", "--upgrade-package", "helper", capsys=capsys)[0] == 0
    assert packages(project.lock_file("a")) == {"torchlike": "2.1.0", "helper": "2.0"}
    # … and --upgrade moves everything.
    assert run_cli(project.root, "lock", "--upgrade", capsys=capsys)[0] == 0
    assert packages(project.lock_file("a")) == {"torchlike": "2.2.0", "helper": "2.0"}


@pytest.mark.slow
def test_lanes_command_shows_lock_state(project, capsys):
    project.write("a", lane_text('"helper==1.0"'))
    code, out, _ = run_cli(project.root, "lanes", capsys=capsys)
    assert code == 0 and "missing" in out
    run_cli(project.root, "lock", capsys=capsys)
    code, out, _ = run_cli(project.root, "lanes", "--json", capsys=capsys)
    import json

    [row] = json.loads(out)
    assert row["name"] == "a" and row["lock"] == "current"


@pytest.mark.parametrize("name", ["../evil", "a/b", ""])
def test_lock_path_refuses_names_that_escape(tmp_path, name):
    with pytest.raises(ValueError):
        locking.lock_path(tmp_path, name)


@pytest.mark.slow
def test_lock_state_is_current_stale_missing_or_foreign(project, capsys):
    project.write("a", lane_text('"helper==1.0"'))
    project.write("b", lane_text('"helper==1.5"'))
    [a, b] = lanefile.load_lanes(project.root / "lanes")
    locks = project.root / "locks"
    state = locking.lock_state(a, locks)
    assert (state.freshness, state.why, state.summary) == ("missing", "no lock", "no lock")
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    assert locking.lock_state(a, locks).current and locking.is_current(a, locks)

    project.write("a", lane_text('"helper==1.5"'))
    [a, b] = lanefile.load_lanes(project.root / "lanes")
    stale = locking.lock_state(a, locks)
    assert stale.freshness is locking.Freshness.STALE
    assert stale.summary == "the lock is stale (lane changed since it was locked)"

    # b's lock copied over a's: the same definition, but made for another lane.
    project.lock_file("a").write_bytes(project.lock_file("b").read_bytes())
    assert (
        locking.lock_state(a, locks).freshness == "foreign"
        and "made for lane 'b'" in locking.lock_state(a, locks).why
    )
    text = project.lock_file("b").read_text()
    # uv's own lock, no provenance
    project.lock_file("a").write_text(text[: text.index("\n[tool.patchlane]")] + "\n")
    assert "not made by patchlane" in locking.lock_state(a, locks).why
    project.lock_file("a").write_text("[[packages]\n")
    assert locking.lock_state(a, locks).freshness == "foreign"
    states = [locking.lock_state(lane, locks) for lane in (a, b)]
    assert [(state.lane, state.why) for state in states if not state.current] == [
        ("a", "pylock.toml is not readable TOML")
    ]
