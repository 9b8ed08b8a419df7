"""Cooldowns and per-package freezes through real uv against loopback indexes.

``exclude-newer = "7 days"`` is resolved to an absolute cutoff when a lane is locked and recorded
in the lock; re-locks keep it until ``--upgrade``. ``[lane.exclude-newer-package]`` gives one
package its own cutoff, or none (``false``): how a lane freezes everything but a nightly index
that serves no upload times.
"""

from __future__ import annotations

import datetime as _dt
import json
import tomllib

import pytest

from retire.lanes import lanefile
from retire.locks import locking
from shims import times
from tests.conftest import run_cli
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel
from tests.test_locking import lane_text, packages


def provenance(project, lane: str) -> dict:
    return tomllib.loads(project.lock_file(lane).read_text())["tool"]["patchlane"]


@pytest.mark.slow
def test_a_cooldown_is_resolved_at_lock_time_and_recorded(project, capsys):
    project.write("cool", lane_text('"torchlike>=2"', 'exclude-newer = "7 days"'))
    code, out, _ = run_cli(project.root, "lock", "--now", "2026-06-15T00:00:00Z", capsys=capsys)
    assert code == 0, out
    # 2026-06-15 less 7 days: torchlike 2.2.0 (uploaded 2026-06-10) is too young to take.
    assert packages(project.lock_file("cool")) == {"torchlike": "2.1.0", "helper": "1.5"}
    tool = provenance(project, "cool")
    assert tool["exclude-newer"] == "2026-06-08T00:00:00Z"
    assert tool["cooldown"] == "7 days" and tool["cooldown-resolved-at"] == "2026-06-15T00:00:00Z"
    assert "nothing uploaded after 2026-06-08T00:00:00Z" in out
    # `patchlane lanes` shows the cooldown and the cutoff the lock was made with.
    code, out, _ = run_cli(project.root, "lanes", capsys=capsys)
    assert "cooldown 7 days → 2026-06-08" in out
    [row] = json.loads(run_cli(project.root, "lanes", "--json", capsys=capsys)[1])
    assert (row["cooldown"], row["cutoff"], row["lock"]) == (
        "7 days",
        "2026-06-08T00:00:00Z",
        "current",
    )


@pytest.mark.slow
def test_a_relock_keeps_the_cutoff_until_upgrade(project, capsys):
    project.write("cool", lane_text('"torchlike>=2"', 'exclude-newer = "P7D"'))
    assert run_cli(project.root, "lock", "--now", "2026-06-15T00:00:00Z", capsys=capsys)[0] == 0
    # Weeks later: an unchanged lane is up to date (no uv at all), --force re-locks with the same
    # cutoff …
    code, out, _ = run_cli(project.root, "lock", "--now", "2026-07-01T00:00:00Z", capsys=capsys)
    assert code == 0 and "up-to-date" in out
    assert (
        run_cli(project.root, "lock", "--force", "--now", "2026-07-01T00:00:00Z", capsys=capsys)[0]
        == 0
    )
    assert provenance(project, "cool")["exclude-newer"] == "2026-06-08T00:00:00Z"
    # … and so does a re-lock of a changed lane: the cooldown is the same, so is its cutoff.
    project.write("cool", lane_text('"torchlike>=2", "helper"', 'exclude-newer = "P7D"'))
    assert run_cli(project.root, "lock", "--now", "2026-07-01T00:00:00Z", capsys=capsys)[0] == 0
    assert provenance(project, "cool")["exclude-newer"] == "2026-06-08T00:00:00Z"
    assert packages(project.lock_file("cool")) == {"torchlike": "2.1.0", "helper": "1.5"}
    # --upgrade measures the cooldown from now: 2026-06-24 admits torchlike 2.2.0.
    assert (
        run_cli(project.root, "lock", "--upgrade", "--now", "2026-07-01T00:00:00Z", capsys=capsys)[
            0
        ]
        == 0
    )
    assert provenance(project, "cool")["exclude-newer"] == "2026-06-24T00:00:00Z"
    assert packages(project.lock_file("cool")) == {"torchlike": "2.2.0", "helper": "1.5"}


def test_the_digest_holds_the_cooldown_not_its_cutoff(tmp_path):
    (tmp_path / "a.toml").write_text(
        '[lane]\npython = "3.12"\nrequirements = ["x"]\nexclude-newer = "7 days"\n'
    )
    (tmp_path / "b.toml").write_text(
        '[lane]\npython = "3.12"\nrequirements = ["x"]\nexclude-newer = "1 week"\n'
    )
    (tmp_path / "c.toml").write_text(
        '[lane]\npython = "3.12"\nrequirements = ["x"]\nexclude-newer = "8 days"\n'
    )
    [a], [b], [c] = (lanefile.load_file(tmp_path / f"{n}.toml") for n in "abc")
    assert a.lock_inputs()["exclude-newer"] == "7 days"
    # one span, however it is written
    assert a.digest == b.digest != c.digest
    # absent keys keep older digests valid
    assert "exclude-newer-package" not in a.lock_inputs()


@pytest.fixture(scope="module")
def fresh_index(tmp_path_factory):
    """An index whose uploads are relative to the real clock: 1.0 a month ago, 1.1 two days ago."""
    root, index = tmp_path_factory.mktemp("fresh"), PackageIndex()
    now = times.now()
    index.add(build_wheel(root, "freshlib", "1.0"), now - _dt.timedelta(days=30))
    index.add(build_wheel(root, "freshlib", "1.1"), now - _dt.timedelta(days=2))
    with IndexServer(index) as server:
        yield server


@pytest.mark.slow
def test_a_cooldown_against_the_real_clock(project, fresh_index, capsys):
    project.write(
        "cool",
        lane_text('"freshlib"', 'exclude-newer = "7 days"').replace("@MAIN@", fresh_index.url),
    )
    before = times.now().replace(microsecond=0)
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    # 1.1 is two days old: not yet
    assert packages(project.lock_file("cool")) == {"freshlib": "1.0"}
    tool = provenance(project, "cool")
    resolved = times.parse(tool["cooldown-resolved-at"])
    assert before <= resolved <= times.now()
    assert times.parse(tool["exclude-newer"]) == resolved - _dt.timedelta(days=7)
    # Without the cooldown the newest is taken: the test could fail.
    project.write("cool", lane_text('"freshlib"').replace("@MAIN@", fresh_index.url))
    assert run_cli(project.root, "lock", "--upgrade", capsys=capsys)[0] == 0
    assert packages(project.lock_file("cool")) == {"freshlib": "1.1"}


@pytest.fixture(scope="module")
def timeless_nightly(tmp_path_factory):
    """A nightly index that serves no upload times at all (as some nightly indexes do)."""
    root, index = tmp_path_factory.mktemp("timeless"), PackageIndex()
    for day in ("20260701", "20260702"):
        index.add(build_wheel(root, "torchlike", f"2.3.0.dev{day}", requires=["helper>=1"]), None)
    with IndexServer(index) as server:
        yield server


NIGHTLY_LANE = """
[lane.indexes.nightly]
url = "{url}"
[lane.sources]
torchlike = "nightly"
"""


@pytest.mark.slow
def test_freeze_everything_but_a_nightly_index_without_upload_times(
    project, timeless_nightly, capsys
):
    nightly = NIGHTLY_LANE.format(url=timeless_nightly.url)
    # Frozen at 2026-05-15 with no exception: uv cannot see when the nightlies were uploaded.
    project.write(
        "night",
        lane_text('"torchlike>=2.3.0.dev0"', 'prerelease = "allow"\nexclude-newer = 2026-05-15')
        + nightly,
    )
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 1 and "failed      night:" in out, out
    # the fix, named: the table, the package and the file (uv's own hint stays under it)
    assert (
        "failed      night: exclude-newer hides every version of torchlike the lane accepts "
        "(none uploaded before 2026-05-15T00:00:00Z, or the index serves no upload times) — "
        "exempt it in lanes/night.toml: [lane.exclude-newer-package] torchlike = false (or give "
        "it its own date or cooldown)\n"
    ) in out, out
    assert "hint: `torchlike` was filtered by `exclude-newer`" in out
    # torchlike = false: the nightly is exempt, everything else stays frozen (helper 1.5, not 2.0).
    project.write(
        "night",
        lane_text('"torchlike>=2.3.0.dev0"', 'prerelease = "allow"\nexclude-newer = 2026-05-15')
        + "[lane.exclude-newer-package]\ntorchlike = false\n"
        + nightly,
    )
    code, out, _ = run_cli(project.root, "lock", capsys=capsys)
    assert code == 0, out
    # the exempt package named as `patchlane lanes` names it
    assert "nothing uploaded after 2026-05-15T00:00:00Z, not torchlike\n" in out, out
    assert packages(project.lock_file("night")) == {
        "torchlike": "2.3.0.dev20260702",
        "helper": "1.5",
    }
    tool = provenance(project, "night")
    assert tool["exclude-newer"] == "2026-05-15T00:00:00Z" and tool["exclude-newer-package"] == {
        "torchlike": False
    }
    assert "not torchlike" in run_cli(project.root, "lanes", capsys=capsys)[1]


@pytest.mark.slow
def test_one_package_can_have_its_own_date_or_cooldown(project, capsys):
    project.write(
        "mixed",
        lane_text('"torchlike>=2"', "exclude-newer = 2026-05-15")
        + '[lane.exclude-newer-package]\nhelper = 2026-11-01\ntorchlike = "7 days"\n',
    )
    code, out, _ = run_cli(project.root, "lock", "--now", "2026-06-20T00:00:00Z", capsys=capsys)
    assert code == 0, out
    assert ", own dates: helper, torchlike\n" in out, out
    # helper's own date admits 2.0 (October); torchlike's cooldown (2026-06-13) admits 2.2.0 (June
    # 10).
    assert packages(project.lock_file("mixed")) == {"torchlike": "2.2.0", "helper": "2.0"}
    tool = provenance(project, "mixed")
    assert tool["exclude-newer-package"] == {
        "helper": "2026-11-01T00:00:00Z",
        "torchlike": "2026-06-13T00:00:00Z",
    }
    assert tool["cooldown-resolved-at"] == "2026-06-20T00:00:00Z" and "cooldown" not in tool


@pytest.mark.slow
def test_changing_a_package_freeze_makes_the_lock_stale(project, capsys):
    project.write("a", lane_text('"helper"', "exclude-newer = 2026-05-15"))
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    project.write(
        "a",
        lane_text('"helper"', "exclude-newer = 2026-05-15")
        + "[lane.exclude-newer-package]\nhelper = false\n",
    )
    [lane] = lanefile.load_lanes(project.root / "lanes")
    assert locking.lock_state(lane, project.root / "locks").freshness == "stale"
    assert run_cli(project.root, "lock", capsys=capsys)[0] == 0
    # a re-lock keeps its pins …
    assert packages(project.lock_file("a")) == {"helper": "1.5"}
    assert run_cli(project.root, "lock", "--upgrade-package", "helper", capsys=capsys)[0] == 0
    # … until told to move them
    assert packages(project.lock_file("a")) == {"helper": "2.0"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'exclude-newer = "1 month"',
            "lane.exclude-newer: not a span of time: '1 month' (months and years vary in length)",
        ),
        ("exclude-newer = false", "lane.exclude-newer: false is not a cutoff"),
        ('exclude-newer = "soon"', "lane.exclude-newer: not a span of time: 'soon'"),
        (
            "[lane.exclude-newer-package]\ntorch = true",
            "lane.exclude-newer-package.torch: true is not a cutoff — write false",
        ),
        (
            "[lane.exclude-newer-package]\ntorch = 3",
            "lane.exclude-newer-package.torch: expected a date, got an integer 3",
        ),
        ('exclude-newer-package = ["torch"]', "lane.exclude-newer-package: expected a table"),
        (
            '[lane.exclude-newer-package]\n"torch!" = false',
            "lane.exclude-newer-package.torch!: not a package name: 'torch!'",
        ),
    ],
)
def test_bad_freezes_are_one_line_errors(tmp_path, capsys, body, message):
    (tmp_path / "lanes").mkdir()
    (tmp_path / "lanes" / "x.toml").write_text(
        f'[lane]\npython = "3.12"\nrequirements = ["x"]\n{body}\n'
    )
    code, _out, err = run_cli(tmp_path, "lanes", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_a_bump_roll_leaves_a_cooldown_as_written(tmp_path):
    from retire.lanes import lanedit

    path = tmp_path / "cool.toml"
    path.write_text(
        '[lane]\npython = "3.12"\nrequirements = ["x"]\nexclude-newer = "7 days"  # our cooldown\n'
    )
    before = path.read_text()
    assert not lanedit.roll_exclude_newer(
        path, _dt.datetime(2026, 5, 25, tzinfo=_dt.UTC), within=tmp_path
    )
    # the re-lock with --upgrade measures it from now instead
    assert path.read_text() == before
