"""Culprits for real: a project in git, locks made by uv against loopback indexes (a stable one and
a dated-nightly one), a bump that breaks a lane, and the search that names the package, the
release and the proof in the PR body; plus the pure search with a scripted probe."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from retire.bisect.culprit import Culprit, CulpritStatus, FirstCommit, find_culprit
from retire.bisect.search import BROKEN, FIXED, CandidateRun
from retire.branches.bump import bump
from retire.branches.options import BumpOptions
from tests.conftest import run_cli
from tests.support import shimtree
from tests.support.gitrepos import git
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


# ---------------------------------------------------------------------------------------------
# The pure search


def scripted(breaks):
    """A probe: the old lock with ``move`` is broken when ``breaks(move)``; counts its runs."""
    asked = []

    def probe(move):
        asked.append(dict(move))
        state = BROKEN if breaks(move) else FIXED
        return CandidateRun(str(sorted(move.items())), state, str(state))

    return probe, asked


CHANGES = [("alpha", "1.0", "1.1"), ("beta", "1.0", "1.3"), ("gamma", "1.0", "1.1")]
RELEASES = {"beta": ["0.9", "1.0", "1.1", "1.2", "1.3", "1.4"]}


def test_one_package_alone_then_its_first_broken_release():
    probe, asked = scripted(lambda m: m.get("beta", "1.0") >= "1.2")
    culprit = find_culprit(
        "cpu",
        "toy",
        "without",
        CHANGES,
        probe,
        releases=RELEASES.__getitem__,
        commits=lambda dist, clean, broken: FirstCommit("a" * 40, "#42"),
    )
    assert culprit.status == CulpritStatus.FOUND
    assert (culprit.last_clean, culprit.first_broken) == ("1.1", "1.2")
    assert culprit.line() == (
        "beta 1.2 breaks toy in lane cpu (1.1 clean); first broken commit aaaaaaaaaaaa (#42)"
    )
    # never the same candidate twice
    assert len(asked) == len({json.dumps(m, sort_keys=True) for m in asked})


def test_two_packages_together_are_the_smallest_set():
    probe, _ = scripted(lambda m: "alpha" in m and "gamma" in m)
    culprit = find_culprit("cpu", "toy", "with", CHANGES, probe)
    assert culprit.status == CulpritStatus.INTERACTING
    assert [name for name, _, _ in culprit.packages] == ["alpha", "gamma"]
    assert (
        culprit.line() == "alpha 1.1 + gamma 1.1 together break toy in lane cpu (each alone clean)"
    )


def test_a_budget_stops_the_search_and_nothing_is_blamed():
    probe, asked = scripted(lambda m: "gamma" in m)
    runs = iter(range(10))
    culprit = find_culprit(
        "cpu", "toy", "without", CHANGES, probe, stop=lambda: "spent" if next(runs) >= 2 else None
    )
    assert culprit.status == CulpritStatus.STOPPED and "spent" in culprit.reason
    assert len(asked) == 2 and not culprit.found


def test_an_old_lock_that_is_broken_too_blames_nothing():
    probe, _ = scripted(lambda m: True)
    culprit = find_culprit("cpu", "toy", "without", CHANGES, probe)
    assert culprit.status == CulpritStatus.NOT_REPRODUCED
    assert culprit.line().startswith("no culprit for toy in lane cpu")


# ---------------------------------------------------------------------------------------------
# For real

REPRODUCER = """
from shims import reproducer


def check(with_shim):
    import alpha, beta, gamma

    broken = not beta.ok() or (alpha.NEW and gamma.NEW)
    return reproducer.BUG_REPRODUCED if broken else reproducer.FIX_VALIDATED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["alpha", "beta", "gamma"])
"""


def module(name: str, version: str, *, ok: bool = True, new: bool = False) -> Path:
    source = f'__version__ = "{version}"\nNEW = {new}\n\ndef ok():\n    return {ok}\n'
    return {f"{name}.py": source}


LANE = """\
[lane]
python = "3.11"
requirements = ["alpha", "beta", "gamma"]
shims = ["toy"]

[lane.indexes.main]
url = "@MAIN@"
default = true
"""


class Shop:
    """A project in git whose lane cpu locks alpha, beta and gamma 1.0, all clean."""

    def __init__(self, tmp: Path, index: PackageIndex, url: str, lane: str = LANE) -> None:
        self.root, self.wheels, self.index = tmp / "shop", tmp / "wheels", index
        (self.root / "lanes").mkdir(parents=True)
        (self.root / "lanes" / "cpu.toml").write_text(lane.replace("@MAIN@", url))
        shimtree.write_shim(
            self.root / "shims",
            "toy",
            patch=None,
            reproducer=REPRODUCER,
            manifest=shimtree.manifest_text(
                "toy", module="beta", distribution="beta", fix_class="version-floor"
            ),
        )
        (self.root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")

    def add(self, name: str, version: str, when: str, **source) -> None:
        wheel = build_wheel(self.wheels, name, version, files=module(name, version, **source))
        self.index.add(wheel, when)

    def start(self, capsys) -> None:
        assert run_cli(self.root, "lock", capsys=capsys)[0] == 0
        git(self.root, "init", "--quiet", "-b", "main")
        git(self.root, "add", "-A")
        git(self.root, "commit", "--quiet", "-m", "a shop")
        # the lane is clean: the shim reads upstream-fixed
        code, out, _ = run_cli(self.root, "run", "--run-id", "before", capsys=capsys)
        assert code == 0, out
        git(self.root, "add", "-A")
        git(self.root, "commit", "--quiet", "-m", "the lane's runs")

    def bump(self):
        result = bump(self.root, BumpOptions(now=NOW, release_notes_links=False))
        assert result.status == "proposed", result.reason
        [lane] = result.lanes
        return result, lane


@pytest.fixture
def stable(tmp_path):
    index = PackageIndex()
    with IndexServer(index) as server:
        shop = Shop(tmp_path, index, server.url)
        for name in ("alpha", "beta", "gamma"):
            shop.add(name, "1.0", "2026-01-01")
        yield shop


@pytest.mark.slow
def test_a_bump_of_three_packages_names_the_one_that_breaks_and_its_release(stable, capsys):
    stable.start(capsys)
    stable.add("alpha", "1.1", "2026-02-01", new=True)
    stable.add("gamma", "1.1", "2026-02-01")
    for version, ok in (("1.1", True), ("1.2", False), ("1.3", False)):
        stable.add("beta", version, "2026-02-01", ok=ok)
    result, lane = stable.bump()
    assert {(c.name, c.new) for c in lane.changes} == {
        ("alpha", "1.1"),
        ("beta", "1.3"),
        ("gamma", "1.1"),
    }
    [culprit] = lane.culprits
    assert culprit.line() == "beta 1.2 breaks toy in lane cpu (1.1 clean)"
    body = Path(result.body_path).read_text()
    assert "### Breaks" in body and "#### Lane `cpu`" in body
    assert "**beta 1.2 breaks toy in lane cpu (1.1 clean)**" in body
    # the proof: the old lock clean, beta 1.3 alone broken, 1.1 clean, 1.2 broken
    assert "| old lock | clean | fix-validated |" in body
    assert "| beta 1.2 | broken | bug-reproduced |" in body
    # recorded as evidence on the branch, its runs in the validation manifest
    recorded = git(stable.root, "show", f"{result.branch}:validation/culprits.jsonl")
    assert json.loads(recorded.splitlines()[-1])["first_broken"] == "1.2"
    manifest = git(stable.root, "show", f"{result.branch}:validation/manifest.jsonl")
    assert '"lane": "bisect:cpu"' in manifest or '"lane":"bisect:cpu"' in manifest

    # asked again, every decided candidate comes from the cache: no reproducer runs again
    again = _search_again(stable, lane.culprits[0])
    assert again.line() == culprit.line()
    assert all(run.cached for _, run in again.proof)


def _search_again(shop: Shop, culprit: Culprit) -> Culprit:
    from retire.bisect.cache import ResultCache
    from retire.bisect.culpritrun import CulpritRunner, lock_changes, search_culprit
    from retire.core.project import Project
    from retire.lanes import lanefile
    from retire.locks import locking

    project = Project(shop.root)
    old = project.inside(".patchlane", "culprit", "cpu", "old", "pylock.toml")
    [lane] = lanefile.project_lanes(project)
    runner = CulpritRunner(
        lane,
        project.manifests()["toy"],
        culprit.mode,
        old,
        work_dir=project.inside(".patchlane", "culprit", "cpu"),
        cache=ResultCache(project.bisect_cache),
    )
    new = git(shop.root, "show", f"{_branch(shop)}:locks/cpu/pylock.toml")
    import tomllib

    changes = lock_changes(locking.read_lock(old), tomllib.loads(new))
    found = search_culprit(runner, changes)
    assert runner.runs == 0
    return found


def _branch(shop: Shop) -> str:
    return git(shop.root, "for-each-ref", "--format=%(refname:short)", "refs/heads/patchlane/")


@pytest.mark.slow
def test_a_break_that_needs_two_packages_together(stable, capsys):
    stable.start(capsys)
    stable.add("alpha", "1.1", "2026-02-01", new=True)
    stable.add("beta", "1.1", "2026-02-01")
    stable.add("gamma", "1.1", "2026-02-01", new=True)
    result, lane = stable.bump()
    [culprit] = lane.culprits
    assert culprit.status == "interacting"
    assert (
        culprit.line() == "alpha 1.1 + gamma 1.1 together break toy in lane cpu (each alone clean)"
    )
    assert culprit.line() in Path(result.body_path).read_text()


NIGHTLY_LANE = """\
[lane]
python = "3.11"
requirements = ["alpha", "beta>=2.0.dev0", "gamma"]
prerelease = "allow"
shims = ["toy"]

[lane.indexes.main]
url = "@MAIN@"
default = true

[lane.indexes.nightly]
url = "@NIGHTLY@"
"""


@pytest.mark.slow
def test_a_nightly_lanes_culprit_is_a_dated_build(tmp_path, capsys):
    stable, nightly = PackageIndex(), PackageIndex()
    with IndexServer(stable) as main_server, IndexServer(nightly) as nightly_server:
        lane = NIGHTLY_LANE.replace("@NIGHTLY@", nightly_server.url)
        shop = Shop(tmp_path, stable, main_server.url, lane)
        shop.add("alpha", "1.0", "2026-01-01")
        shop.add("gamma", "1.0", "2026-01-01")
        shop.index = nightly
        shop.add("beta", "2.0.dev20261120", "2026-11-20")
        shop.start(capsys)
        for day, ok in (("21", True), ("22", True), ("23", False), ("24", False)):
            shop.add("beta", f"2.0.dev202611{day}", f"2026-11-{day}", ok=ok)
        result, lane_bump = shop.bump()
        [culprit] = lane_bump.culprits
        assert culprit.line() == ("beta 2.0.dev20261123 breaks toy in lane cpu (dev20261122 clean)")
        assert culprit.line() in Path(result.body_path).read_text()


@pytest.mark.slow
def test_a_committed_nightly_move_is_blamed_by_the_culprit_command(tmp_path, capsys):
    stable, nightly = PackageIndex(), PackageIndex()
    with IndexServer(stable) as main_server, IndexServer(nightly) as nightly_server:
        lane = NIGHTLY_LANE.replace("@NIGHTLY@", nightly_server.url)
        shop = Shop(tmp_path, stable, main_server.url, lane)
        shop.add("alpha", "1.0", "2026-01-01")
        shop.add("gamma", "1.0", "2026-01-01")
        shop.index = nightly
        shop.add("beta", "2.0.dev20261120", "2026-11-20")
        shop.start(capsys)
        for day, ok in (("21", True), ("22", False), ("23", False)):
            shop.add("beta", f"2.0.dev202611{day}", f"2026-11-{day}", ok=ok)
        # the nightly moves by hand: a re-lock, committed
        assert run_cli(shop.root, "lock", "--upgrade", capsys=capsys)[0] == 0
        git(shop.root, "commit", "--quiet", "-am", "nightly move")
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", capsys=capsys)
        line = "beta 2.0.dev20261122 breaks toy in lane cpu (dev20261121 clean)"
        assert code == 0 and out.rstrip().endswith(line)
        recorded = (shop.root / "validation" / "culprits.jsonl").read_text().splitlines()
        assert json.loads(recorded[-1])["line"] == line
        # a lane that is not broken has no culprit: exit 1, said in one line
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", "--since", "HEAD", capsys=capsys)
        assert code == 1 and "no culprit for toy in lane cpu" in out


def test_pack_new_starts_a_new_report_from_a_culprit_behind_the_gate(tmp_path, capsys):
    from retire.packs.model import parse_pack_spec

    root = tmp_path
    shimtree.write_shim(root / "shims", "toy")
    (root / "lanes").mkdir()
    culprit = {
        "lane": "nightly",
        "subject": "toy",
        "mode": "without",
        "status": "found",
        "line": "toylib 2.0.dev20261124 breaks toy in lane nightly (dev20261123 clean)",
        "packages": [{"name": "toylib", "old": "2.0.dev20261120", "new": "2.0.dev20261125"}],
        "last_clean": "2.0.dev20261123",
        "first_broken": "2.0.dev20261124",
        "commit": {"sha": "b" * 40, "pr": "#7"},
    }
    (root / "validation").mkdir()
    (root / "validation" / "culprits.jsonl").write_text(json.dumps(culprit) + "\n")
    args = ("pack", "new", "toy", "--from-culprit", "nightly", "--category", "kernel-numerics")
    code, _, err = run_cli(root, *args[:3], "--from-culprit", "cpu", *args[5:], capsys=capsys)
    assert code == 2 and "no culprit recorded for toy in lane cpu" in err
    code, out, _ = run_cli(root, *args, "--repository", "toy/toylib", capsys=capsys)
    assert code == 0 and culprit["line"] in out
    text = (root / "shims" / "toy" / "pack.toml").read_text()
    assert "Regressed in toylib 2.0.dev20261124 (toylib 2.0.dev20261123 clean)" in text
    assert f"first broken commit {'b' * 40} (#7)" in text
    spec = parse_pack_spec(text, "shims/toy/pack.toml", "toy")
    assert spec.against == "toylib==2.0.dev20261124" and spec.upstream.state == "new-report"
    assert spec.command.startswith("uv run --no-project --with toylib==2.0.dev20261124 python")
    # the human gate: not searched yet, so not ready, and never overwritten
    assert spec.upstream.searched is None
    assert run_cli(root, *args, capsys=capsys)[0] == 2


@pytest.mark.slow
def test_with_a_mirror_the_culprit_names_the_first_broken_commit_and_its_pull(tmp_path, capsys):
    from tests.support.historyrepo import make_window_repo, release_index

    repo = make_window_repo(tmp_path / "upstream")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo.path), str(mirror))
    root = tmp_path / "shop"
    text = shimtree.manifest_text("toylib_add").replace(
        "https://example.org/toylib/pull/2", "https://github.com/acme/toylib/pull/2"
    )
    shimtree.write_shim(root / "shims", "toylib_add", manifest=text)
    (root / "patchlane.toml").write_text(
        f'[[mirrors.repository]]\nurl = "https://github.com/acme/toylib"\npath = "{mirror}"\n'
    )
    (root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")
    with IndexServer(release_index(repo, tmp_path / "wheels")) as server:
        lane = root / "lanes" / "cpu.toml"
        lane.parent.mkdir()
        body = LANE.replace("@MAIN@", server.url).replace('"toy"', '"toylib_add"')
        lane.write_text(body.replace('["alpha", "beta", "gamma"]', '["toylib==1.2"]'))
        assert run_cli(root, "lock", capsys=capsys)[0] == 0
        git(root, "init", "--quiet", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "--quiet", "-m", "a shop")
        # a hand edit moves the lane two releases on, past the one that broke add()
        lane.write_text(lane.read_text().replace("toylib==1.2", "toylib==1.4"))
        assert run_cli(root, "lock", capsys=capsys)[0] == 0
        code, out, _ = run_cli(root, "culprit", "cpu", "toylib_add", capsys=capsys)
    assert code == 0, out
    line = (
        f"toylib 1.3 breaks toylib_add in lane cpu (1.2 clean); first broken commit "
        f"{repo.introduced[:12]} (#33)"
    )
    assert out.rstrip().endswith(line)
