"""Culprits for real: a project in git, locks made by uv against loopback indexes (a stable one and
a dated-nightly one), a bump that breaks a lane, and the search that names the package, the
release and the proof in the PR body; plus the pure search with a scripted probe."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from retire.bisect.culprit import Culprit, CulpritStatus, FirstCommit, find_culprit
from retire.bisect.search import BROKEN, FIXED, UNKNOWN, CandidateRun
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
# Unknown is an answer: a run that cannot be told is reported, never guessed through (issue 35)


def told(answer):
    """A probe: ``answer(move)`` is True (broken), False (clean) or an outcome that tells
    nothing ("timeout", "crashed", "env-failed"); counts its runs."""
    asked = []

    def probe(move):
        asked.append(dict(move))
        got = answer(move)
        if isinstance(got, str):
            return CandidateRun(str(sorted(move.items())), UNKNOWN, got)
        state = BROKEN if got else FIXED
        return CandidateRun(str(sorted(move.items())), state, str(state))

    return probe, asked


def test_an_old_lock_that_cannot_be_told_stops_the_search_undecided():
    probe, asked = told(lambda m: "crashed" if not m else True)
    culprit = find_culprit("cpu", "toy", "without", CHANGES, probe, releases=RELEASES.__getitem__)
    assert culprit.status == CulpritStatus.UNDECIDED and not culprit.found
    assert culprit.line() == (
        "culprit of toy in lane cpu undecided: the old lock could not be told (crashed): "
        "nothing is blamed"
    )
    # nothing ran after it, and nothing is named
    assert asked == [{}] and culprit.packages == () and culprit.first_broken is None


def test_a_lone_package_that_times_out_is_not_called_harmless_nor_run_again():
    probe, asked = told(lambda m: "timeout" if "beta" in m else False)
    culprit = find_culprit("cpu", "toy", "without", [CHANGES[1]], probe)
    assert culprit.status == CulpritStatus.UNDECIDED
    assert "do not break it" not in culprit.line()
    assert culprit.reason == (
        "the new lock's packages, moved together on the old lock, could not be told: "
        "beta 1.3 (timeout)"
    )
    # alone and "together" are one candidate: asked once
    assert asked == [{}, {"beta": "1.3"}]
    assert "| beta 1.3 | could not be told | timeout |" in culprit.markdown()


def test_a_package_that_cannot_be_told_alone_leaves_its_interacting_set_undecided():
    # alpha's overlay cannot be installed alone; alpha and gamma break it together
    def answer(m):
        if m == {"alpha": "1.1"}:
            return "env-failed"
        return "alpha" in m and "gamma" in m

    probe, asked = told(answer)
    culprit = find_culprit("cpu", "toy", "without", CHANGES, probe)
    assert culprit.status == CulpritStatus.UNDECIDED
    assert [name for name, _, _ in culprit.packages] == ["alpha", "gamma"]
    assert culprit.reason == (
        "alpha 1.1 + gamma 1.1 break it together, but could not be told: alpha 1.1 (env-failed)"
    )
    assert "each alone clean" not in culprit.line()
    assert len(asked) == len({json.dumps(m, sort_keys=True) for m in asked})


def test_an_untold_package_the_set_can_spare_leaves_a_sound_interacting_set():
    # alpha times out alone but is not needed: beta and gamma break it together
    def answer(m):
        if m == {"alpha": "1.1"}:
            return "timeout"
        return "beta" in m and "gamma" in m

    probe, _ = told(answer)
    culprit = find_culprit("cpu", "toy", "without", CHANGES, probe)
    assert culprit.status == CulpritStatus.INTERACTING
    assert [name for name, _, _ in culprit.packages] == ["beta", "gamma"]


def test_a_set_whose_reduction_cannot_be_told_is_undecided():
    # without gamma the lane crashes: whether gamma can be spared is not known
    def answer(m):
        if set(m) == {"alpha", "beta"}:
            return "crashed"
        return len(m) == 3

    probe, _ = told(answer)
    culprit = find_culprit("cpu", "toy", "without", CHANGES, probe)
    assert culprit.status == CulpritStatus.UNDECIDED
    assert "could not be told: alpha 1.1, beta 1.3 (crashed)" in culprit.reason


def test_a_lone_package_that_breaks_is_found_past_one_that_cannot_be_told():
    probe, _ = told(lambda m: "timeout" if "alpha" in m else m.get("beta", "1.0") >= "1.2")
    culprit = find_culprit("cpu", "toy", "without", CHANGES, probe, releases=RELEASES.__getitem__)
    assert culprit.status == CulpritStatus.FOUND
    assert culprit.line() == "beta 1.2 breaks toy in lane cpu (1.1 clean)"


def test_a_release_that_cannot_be_told_leaves_the_release_unpinned_and_no_commit_searched():
    searched = []

    def answer(m):
        if m.get("beta") == "1.2":
            return "timeout"
        return m.get("beta", "1.0") >= "1.2"

    probe, asked = told(answer)
    culprit = find_culprit(
        "cpu",
        "toy",
        "without",
        CHANGES,
        probe,
        releases=RELEASES.__getitem__,
        commits=lambda *edge: searched.append(edge),
    )
    # the bisection's semantics: 1.1 clean, 1.3 broken, 1.2 between them could not be told
    assert culprit.status == CulpritStatus.FOUND
    assert (culprit.last_clean, culprit.first_broken, culprit.between) == ("1.1", "1.3", ("1.2",))
    assert culprit.line() == (
        "beta breaks toy in lane cpu; its first broken release lies between 1.1 (clean) and "
        "1.3: could not be told: beta 1.2 (timeout)"
    )
    assert culprit.to_json()["between"] == ["1.2"]
    assert searched == [] and culprit.commit is None
    assert len(asked) == len({json.dumps(m, sort_keys=True) for m in asked})


def test_the_commit_runs_and_the_last_clean_commit_are_in_the_proof():
    runs = (CandidateRun("c" * 40, FIXED, "fix-validated"), CandidateRun("d" * 40, BROKEN, "x"))
    probe, _ = scripted(lambda m: m.get("beta", "1.0") >= "1.2")
    culprit = find_culprit(
        "cpu",
        "toy",
        "without",
        CHANGES,
        probe,
        releases=RELEASES.__getitem__,
        commits=lambda *edge: FirstCommit("d" * 40, "#42", "c" * 40, runs=runs),
    )
    body = culprit.markdown()
    assert f"First broken commit `{'d' * 40}` (#42), last clean commit `{'c' * 40}`." in body
    assert f"| beta at {'c' * 12} | clean | fix-validated |" in body
    assert culprit.to_json()["commit"]["last_clean"] == "c" * 40
    assert culprit.proof[-1][0] == f"beta at {'d' * 12}"


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

    def __init__(
        self,
        tmp: Path,
        index: PackageIndex,
        url: str,
        lane: str = LANE,
        *,
        reproducer: str = REPRODUCER,
        timeout: int = 60,
    ) -> None:
        self.root, self.wheels, self.index = tmp / "shop", tmp / "wheels", index
        (self.root / "lanes").mkdir(parents=True)
        (self.root / "lanes" / "cpu.toml").write_text(lane.replace("@MAIN@", url))
        manifest = shimtree.manifest_text(
            "toy", module="beta", distribution="beta", fix_class="version-floor"
        )
        shimtree.write_shim(
            self.root / "shims",
            "toy",
            patch=None,
            reproducer=reproducer,
            manifest=manifest.replace("timeout = 60", f"timeout = {timeout}"),
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

    def move_by_hand(self, capsys, **new_betas: bool) -> None:
        """The lane locked and committed as it is, then beta's ``new_betas`` (version → ok)
        published and the lane re-locked and committed (no lane run in between)."""
        assert run_cli(self.root, "lock", capsys=capsys)[0] == 0
        git(self.root, "init", "--quiet", "-b", "main")
        git(self.root, "add", "-A")
        git(self.root, "commit", "--quiet", "-m", "a shop")
        for version, ok in new_betas.items():
            self.add("beta", version.replace("_", "."), "2026-02-01", ok=ok)
        assert run_cli(self.root, "lock", "--upgrade", capsys=capsys)[0] == 0
        git(self.root, "commit", "--quiet", "-am", "beta moves")

    def culprits(self) -> list[dict]:
        path = self.root / "validation" / "culprits.jsonl"
        return (
            [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
        )

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


@contextmanager
def nightly_shop(tmp_path: Path, capsys) -> Iterator[Shop]:
    """A shop started on alpha and gamma 1.0 from the main index and beta's 2026-11-20 nightly;
    its nightly index (``shop.index``) serves the later nightlies while it is open."""
    stable, nightly = PackageIndex(), PackageIndex()
    with IndexServer(stable) as main_server, IndexServer(nightly) as nightly_server:
        lane = NIGHTLY_LANE.replace("@NIGHTLY@", nightly_server.url)
        shop = Shop(tmp_path, stable, main_server.url, lane)
        shop.add("alpha", "1.0", "2026-01-01")
        shop.add("gamma", "1.0", "2026-01-01")
        shop.index = nightly
        shop.add("beta", "2.0.dev20261120", "2026-11-20")
        shop.start(capsys)
        yield shop


@pytest.mark.slow
def test_a_nightly_lanes_culprit_is_a_dated_build(tmp_path, capsys):
    with nightly_shop(tmp_path, capsys) as shop:
        for day, ok in (("21", True), ("22", True), ("23", False), ("24", False)):
            shop.add("beta", f"2.0.dev202611{day}", f"2026-11-{day}", ok=ok)
        result, lane_bump = shop.bump()
        [culprit] = lane_bump.culprits
        assert culprit.line() == ("beta 2.0.dev20261123 breaks toy in lane cpu (dev20261122 clean)")
        assert culprit.line() in Path(result.body_path).read_text()


@pytest.mark.slow
def test_a_committed_nightly_move_is_blamed_by_the_culprit_command(tmp_path, capsys):
    from tests.test_json_schemas import check

    with nightly_shop(tmp_path, capsys) as shop:
        for day, ok in (("21", True), ("22", False), ("23", False)):
            shop.add("beta", f"2.0.dev202611{day}", f"2026-11-{day}", ok=ok)
        # the nightly moves by hand: a re-lock, committed
        assert run_cli(shop.root, "lock", "--upgrade", capsys=capsys)[0] == 0
        git(shop.root, "commit", "--quiet", "-am", "nightly move")
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", capsys=capsys)
        line = "beta 2.0.dev20261122 breaks toy in lane cpu (dev20261121 clean)"
        # the result, said once
        assert code == 0 and out.rstrip().endswith(line) and out.count(line) == 1
        [recorded] = shop.culprits()
        assert recorded["line"] == line and recorded["old_lock"].startswith("sha256:")
        # asked again, answered from the cache: the same answer is not recorded twice
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", capsys=capsys)
        assert code == 0 and out.count(line) == 1
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", "--json", capsys=capsys)
        assert code == 0
        document = json.loads(out)
        check("culprit", document)
        assert document["line"] == line and document["first_broken"] == "2.0.dev20261122"
        assert shop.culprits() == [recorded]
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


def test_a_pack_from_a_culprit_whose_release_is_not_pinned_says_so(tmp_path, capsys):
    root = tmp_path
    shimtree.write_shim(root / "shims", "toy")
    (root / "lanes").mkdir()
    (root / "validation").mkdir()
    culprit = {
        "lane": "cpu",
        "subject": "toy",
        "mode": "without",
        "status": "found",
        "line": "toylib breaks toy in lane cpu; its first broken release lies between 1.1 …",
        "packages": [{"name": "toylib", "old": "1.0", "new": "1.4"}],
        "last_clean": "1.1",
        "first_broken": "1.3",
        "between": ["1.2"],
        "commit": None,
    }
    (root / "validation" / "culprits.jsonl").write_text(json.dumps(culprit) + "\n")
    args = ("pack", "new", "toy", "--from-culprit", "cpu", "--category", "kernel-numerics")
    code, _, _ = run_cli(root, *args, "--repository", "toy/toylib", capsys=capsys)
    assert code == 0
    text = (root / "shims" / "toy" / "pack.toml").read_text()
    assert "Regressed after toylib 1.1, by toylib 1.3 (not pinned: 1.2)" in text
    assert "Regressed in" not in text


def moved_by_hand(root: Path, index_url: str, capsys) -> None:
    """The toylib shop at ``root`` gets a lane cpu locked on toylib 1.2 from ``index_url`` and is
    committed; then a hand edit moves the lane two releases on, past the one that broke add(), and
    locks it again: what ``patchlane culprit cpu toylib_add`` asks about."""
    lane = root / "lanes" / "cpu.toml"
    lane.parent.mkdir()
    body = LANE.replace("@MAIN@", index_url).replace('"toy"', '"toylib_add"')
    lane.write_text(body.replace('["alpha", "beta", "gamma"]', '["toylib==1.2"]'))
    assert run_cli(root, "lock", capsys=capsys)[0] == 0
    git(root, "init", "--quiet", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "a shop")
    lane.write_text(lane.read_text().replace("toylib==1.2", "toylib==1.4"))
    assert run_cli(root, "lock", capsys=capsys)[0] == 0


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
        moved_by_hand(root, server.url, capsys)
        code, out, _ = run_cli(root, "culprit", "cpu", "toylib_add", capsys=capsys)
        assert code == 0, out
        line = (
            f"toylib 1.3 breaks toylib_add in lane cpu (1.2 clean); first broken commit "
            f"{repo.introduced[:12]} (#33)"
        )
        assert out.rstrip().endswith(line) and out.count(line) == 1
        # the commit step says itself and each commit's build as it starts, before the answer
        assert "commit step: 5 commit(s) of toylib between v1.2 and v1.3" in out
        building = re.findall(r"building toylib at ([0-9a-f]{7}) \((\d) of ~3\)…", out)
        assert building and building[0][1] == "1"
        assert out.index("building toylib at") < out.index(line)
        [line_recorded] = (root / "validation" / "culprits.jsonl").read_text().splitlines()
        entry = json.loads(line_recorded)
        assert (
            entry["commit"]["last_clean"]
            and entry["commit"]["last_clean"] != entry["commit"]["sha"]
        )
        # the bump PR's Breaks table: the last clean commit and the commit runs (from the cache)
        body = "\n".join(_breaks_again(root))
    last_clean = entry["commit"]["last_clean"]
    assert f"last clean commit `{last_clean}`" in body
    assert f"First broken commit `{repo.introduced}`" in body
    assert f"| toylib at {repo.introduced[:12]} | broken | bug-reproduced (cached) |" in body
    assert len(re.findall(r"\| toylib at [0-9a-f]{12} \|", body)) == len(building)


def _breaks_again(root: Path) -> list[str]:
    """The Breaks section of a bump PR body for the culprit just searched, found again."""
    from retire.bisect.budget import Meter
    from retire.branches import breaks
    from retire.core.project import Project
    from retire.evidence.validation import Mode
    from retire.lanes import lanefile
    from retire.locks import locking

    project = Project(root)
    [lane] = lanefile.project_lanes(project)
    found = breaks.find_breaks(
        project,
        lane,
        project.inside(".patchlane", "culprit", "cpu", "old", "pylock.toml"),
        locking.lock_path(project.locks_dir, "cpu"),
        [(project.manifests()["toylib_add"], Mode.WITHOUT)],
        meter=Meter(breaks.DEFAULT_BUDGET),
    )
    return breaks.breaks_markdown({"cpu": found})


#: Crashes on the old lock's beta (1.0); broken where beta is not ok.
CRASHES_ON_THE_OLD_LOCK = REPRODUCER.replace(
    "    broken = not beta.ok()",
    '    if beta.__version__ == "1.0":\n'
    '        raise RuntimeError("beta 1.0 crashes here")\n'
    "    broken = not beta.ok()",
)

#: Hangs (past its 3 s timeout) on beta 1.3.
HANGS_ON_BETA_1_3 = REPRODUCER.replace(
    "    broken = not beta.ok()",
    '    if beta.__version__ == "1.3":\n'
    "        import time\n\n"
    "        time.sleep(60)\n"
    "    broken = not beta.ok()",
)


@pytest.mark.slow
def test_an_old_lock_that_crashes_is_undecided_exits_1_and_blames_nothing(tmp_path, capsys):
    from tests.test_json_schemas import check

    index = PackageIndex()
    with IndexServer(index) as server:
        shop = Shop(tmp_path, index, server.url, reproducer=CRASHES_ON_THE_OLD_LOCK)
        for name in ("alpha", "beta", "gamma"):
            shop.add(name, "1.0", "2026-01-01")
        shop.move_by_hand(capsys, **{"1_1": False})
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", capsys=capsys)
        line = (
            "culprit of toy in lane cpu undecided: the old lock could not be told (crashed): "
            "nothing is blamed"
        )
        # said once, and never "beta 1.1 breaks it (1.0 clean)": 1.0 was never seen clean
        assert code == 1 and out.count(line) == 1, out
        assert "breaks toy" not in out
        # no culprit recorded: the entry says undecided and names no package
        [entry] = shop.culprits()
        assert entry["status"] == "undecided" and entry["packages"] == []
        assert entry["first_broken"] is None and entry["line"] == line
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", "--json", capsys=capsys)
    assert code == 1
    document = json.loads(out)
    check("culprit", document)
    assert document["status"] == "undecided" and document["line"] == line
    assert [(p["moved"], p["outcome"]) for p in document["proof"]] == [("old lock", "crashed")]


@pytest.mark.slow
def test_a_candidate_that_times_out_is_reported_untold_and_run_once(tmp_path, capsys):
    from retire.evidence import validation

    index = PackageIndex()
    with IndexServer(index) as server:
        shop = Shop(tmp_path, index, server.url, reproducer=HANGS_ON_BETA_1_3, timeout=3)
        for name in ("alpha", "beta", "gamma"):
            shop.add(name, "1.0", "2026-01-01")
        shop.move_by_hand(capsys, **{"1_3": False})
        code, out, _ = run_cli(shop.root, "culprit", "cpu", "toy", capsys=capsys)
    assert code == 1, out
    assert "could not be told: beta 1.3 (timeout)" in out
    assert "do not break it" not in out
    [entry] = shop.culprits()
    assert entry["status"] == "undecided"
    # one search, one run of the candidate that timed out (alone and "together" are one)
    records = validation.load(shop.root / "validation" / "manifest.jsonl")
    timed_out = [r for r in records if r.lane == "bisect:cpu" and r.outcome == "timeout"]
    assert len(timed_out) == 1
