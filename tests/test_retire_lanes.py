"""Retirement per lane, for real (issue 19): trial re-locks by uv against a loopback index, the
blocker named from uv's own explanation, partial branches in a real git repository, a blocker
lifted by a new upload on the next run, and a revision lane moved in a real git mirror.

Until the per-lane verdicts are gathered (``retire.verdicts.lanes``), the verdicts here are built
from values — each raise or blocked step from a real :func:`retire.locks.trial.try_raise`, as the
gathering does; the one end-to-end CLI test at the bottom switches on by itself when they are.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import tomllib
from pathlib import Path

import pytest

from retire.branches import autodrop
from retire.branches.options import ApplyOptions
from retire.branches.retirement import plans
from retire.core import uv
from retire.evidence.floor import Floor
from retire.lanes import lanefile
from retire.lanes.model import IndexSpec, Lane, LanePolicy
from retire.locks import locking
from retire.locks.trial import parse_blocker, raised, try_raise
from retire.mirrors.config import load_mirrors
from retire.verdicts.model import Decision, LaneStep, LaneVerdict, Verdict
from shims.manifest import discover
from tests.conftest import run_cli
from tests.support.gitrepos import git, make_package_repo
from tests.support.index import IndexServer, PackageIndex
from tests.support.shimtree import write_shim
from tests.support.wheels import build_wheel

SHIM = "toylib_add"
BRANCH = autodrop.BRANCH_PREFIX + SHIM
LANE = """\
# lane {name}: this comment must survive the branch byte for byte
[lane]
python = "3.12"
platform = "linux"
{policy}requirements = {requirements}
shims = {shims}

[lane.indexes.main]
url = "{url}"
default = true
"""


def toylib(folder: Path, version: str) -> Path:
    fixed = version >= "1.6"
    source = f"def add(a, b):\n    return a {'+' if fixed else '-'} b\n"
    return build_wheel(folder, "toylib", version, files={"toylib/__init__.py": source})


class LaneShop:
    """A project in git whose lanes carry ``toylib_add`` each their own way.

    follow  pins toylib==1.5 (broken) and follows upstream: raise;
    hold    pins toylib==1.0 and holds (policy = "hold"): the shim stays;
    blocked needs pinner, whose 1.0 pins toylib==1.5: raising cannot resolve;
    drop    already locks toylib 1.6 (fixed): the id goes, no pin moves;
    other   pins toylib==1.5 but does not carry the shim: never touched.
    ``other_fix`` is carried by follow and drop only: every lane of it can go.
    """

    def __init__(self, tmp: Path) -> None:
        self.root, self.wheels = tmp / "project", tmp / "wheels"
        self.index = PackageIndex()
        for version in ("1.0", "1.5"):
            self.index.add(toylib(self.wheels, version), "2026-01-01")
        self.index.add(
            build_wheel(self.wheels, "pinner", "1.0", requires=["toylib==1.5"]), "2026-01-01"
        )
        self.server = IndexServer(self.index).__enter__()
        for shim in (SHIM, "other_fix"):
            write_shim(self.root / "shims", shim)
        self.lane("follow", '["toylib==1.5"]', f'["{SHIM}", "other_fix"]')
        self.lane("hold", '["toylib==1.0"]', f'["{SHIM}"]', policy='policy = "hold"\n')
        self.lane("blocked", '["pinner", "toylib"]', f'["{SHIM}"]')
        self.lane("other", '["toylib==1.5"]', "[]")
        self.lock()
        # upstream ships the fix; the drop lane was locked after it
        self.index.add(toylib(self.wheels, "1.6"), "2026-03-01")
        self.lane("drop", '["toylib>=1.0"]', f'["{SHIM}", "other_fix"]')
        self.lock()
        (self.root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")
        git(self.root, "init", "-q", "-b", "main")
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "a shop")

    def record_fix(self) -> None:
        """The shim's retirement floor toylib>=1.6 and the evidence for it — a bisection's
        records, not one of the shop's lanes: 1.5 reproduces the bug, 1.6 is clean — committed."""
        from retire.evidence.validation import ValidationRecord, append
        from tests.support.retirement import manifest_toml

        floor = '[[retirement.conditions]]\nkind = "version-floor"\nversion = ">=1.6"\n'
        (self.root / "shims" / SHIM / "manifest.toml").write_text(manifest_toml(SHIM, floor))
        for version, outcome, sentinel, code in (
            ("1.5", "bug-reproduced", "BUG_REPRODUCED", 10),
            ("1.6", "fix-validated", "FIX_VALIDATED", 0),
        ):
            record = ValidationRecord(
                shim=SHIM, mode="without", lane="bisect", host={"hostname": "ci-1", "gpu": None},
                versions={"toylib": version}, sentinel=sentinel, outcome=outcome, exit_code=code,
                duration_s=0.1, started_at="2026-06-01T00:00:00.000000+00:00",
            )  # fmt: skip
            append(self.root / "validation" / "manifest.jsonl", [record])
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", "the evidence")

    def lane(self, name: str, requirements: str, shims: str, *, policy: str = "") -> None:
        text = LANE.format(
            name=name, policy=policy, requirements=requirements, shims=shims, url=self.server.url
        )
        (self.root / "lanes").mkdir(parents=True, exist_ok=True)
        (self.root / "lanes" / f"{name}.toml").write_text(text)

    def lanes(self) -> dict[str, Lane]:
        return {
            lane.name: lane for lane in lanefile.load_lanes(self.root / "lanes", root=self.root)
        }

    def lock(self) -> None:
        results = locking.lock_lanes(list(self.lanes().values()), self.root / "locks")
        assert all(r.ok for r in results), results

    def close(self) -> None:
        self.server.__exit__(None, None, None)

    def show(self, path: str, ref: str = BRANCH) -> str:
        return git(self.root, "show", f"{ref}:{path}") + "\n"

    def changed(self, ref: str = BRANCH) -> dict[str, str]:
        lines = git(self.root, "diff", "--name-status", "main", ref).splitlines()
        return {path: status for status, path in (line.split("\t", 1) for line in lines)}

    def verdict(self, shim: str = SHIM, *, resolve: bool = True) -> Verdict:
        """The verdict the per-lane rules give on this shop (floor toylib 1.6), with the trial
        re-locks run for real."""
        steps = []
        for lane in self.lanes().values():
            if shim not in lane.shims:
                continue
            steps.append(self.lane_verdict(lane, resolve=resolve))
        leaving = [s for s in steps if s.leaves]
        decision = Decision.RETIRE if len(leaving) == len(steps) else Decision.RETIRE_IN_SOME
        return Verdict(
            shim,
            decision if leaving else Decision.KEEP,
            "toylib 1.6 fixed add(): FIX_VALIDATED without the shim",
            lanes=tuple(s.lane for s in steps),
            floors=(Floor.parse("toylib>=1.6"),),
            lane_verdicts=tuple(steps),
        )

    def lane_verdict(self, lane: Lane, *, resolve: bool) -> LaneVerdict:
        lock = locking.read_lock(locking.lock_path(self.root / "locks", lane.name)) or {}
        [version] = [p["version"] for p in lock["packages"] if p["name"] == "toylib"]
        common = {"policy": lane.policy, "file": lane.file, "locked": f"toylib {version}"}
        if version >= "1.6":
            return LaneVerdict(lane.name, LaneStep.DROP, "locks toylib at the floor", **common)
        if lane.policy == LanePolicy.HOLD:
            until = f"the lane's toylib=={version} reaches 1.6"
            return LaneVerdict(lane.name, LaneStep.HOLD, "holds", until=until, **common)
        trial = try_raise(
            lane,
            {"toylib": "1.6"},
            locks_dir=self.root / "locks",
            scratch_dir=self.root / ".patchlane" / "trials",
        )
        if not resolve or trial.resolved:
            return LaneVerdict(
                lane.name, LaneStep.RAISE, "raise", floors=(Floor.parse("toylib>=1.6"),), **common
            )
        return LaneVerdict(lane.name, LaneStep.BLOCKED, "blocked", blocker=trial.blocker, **common)

    def apply(self, *verdicts: Verdict, **options) -> list[autodrop.DropOutcome]:
        manifests = {m.id: m for m in discover(self.root / "shims")}
        return autodrop.apply(
            self.root, plans(verdicts, manifests, []), ApplyOptions(open_prs=False, **options)
        )


@pytest.fixture
def shop(tmp_path):
    made = LaneShop(tmp_path)
    yield made
    made.close()


def _lock_versions(text: str) -> dict[str, str]:
    return {p["name"]: p.get("version") for p in tomllib.loads(text)["packages"]}


# ---------------------------------------------------------------------------------------------
# The trial re-lock


@pytest.mark.slow
def test_a_trial_raise_resolves_names_the_blocker_or_fails_and_never_writes_the_lock(shop):
    lanes, locks = shop.lanes(), shop.root / "locks"
    before = {p: p.read_bytes() for p in locks.rglob("pylock.toml")}
    scratch = shop.root / ".patchlane" / "trials"

    def trial(lane: Lane):
        return try_raise(lane, {"toylib": "1.6"}, locks_dir=locks, scratch_dir=scratch)

    follow = trial(lanes["follow"])
    assert follow.resolved and follow.versions == {"toylib": "1.6"} and follow.blocker is None
    blocked = trial(lanes["blocked"])
    # uv's explanation, one line, the version the lane installs
    assert not blocked.resolved and blocked.blocker == "pinner 1.0 requires toylib==1.5"
    assert blocked.failure is None
    # the lane's own requirement cannot hold the floor: a blocker naming it, without uv
    own = trial(Lane("own", "3.12", "linux", ("toylib<1.6",), indexes=lanes["follow"].indexes))
    assert not own.resolved and "excludes toylib 1.6" in (own.blocker or "")
    # an index this host has no URL for: neither raise nor blocked
    gone = (IndexSpec("gone", None, True),)
    unreachable = trial(Lane("nowhere", "3.12", "linux", ("toylib==1.5",), indexes=gone))
    assert not unreachable.resolved and unreachable.blocker is None
    assert "unreachable" in (unreachable.failure or "")
    # never the lane's own lock; nothing left in the scratch folder
    assert {p: p.read_bytes() for p in locks.rglob("pylock.toml")} == before
    assert not list(scratch.iterdir())


@pytest.mark.slow
def test_answers_of_a_frozen_lane_are_cached_and_a_lane_that_is_not_is_asked_again(shop):
    import dataclasses

    lane = shop.lanes()["blocked"]
    frozen = dataclasses.replace(lane, exclude_newer=dt.datetime(2026, 6, 1, tzinfo=dt.UTC))
    where = {
        "locks_dir": shop.root / "locks",
        "scratch_dir": shop.root / ".patchlane" / "trials",
        "cache_dir": shop.root / ".patchlane" / "trial-cache",
    }
    first, again = (try_raise(frozen, {"toylib": "1.6"}, **where) for _ in range(2))
    assert not first.cached and again.cached and again.blocker == first.blocker
    # other floors, another question
    assert not try_raise(frozen, {"toylib": "1.5.1"}, **where).cached
    # no freeze: new uploads may change the answer at any time
    assert not any(try_raise(lane, {"toylib": "1.6"}, **where).cached for _ in range(2))


UV_SAYS = {
    # the words, as uv 0.13 prints them
    "Because mamba-ssm==2.3.2.post1 depends on tilelang==0.1.8 and you require tilelang>=0.1.15, "
    "we can conclude that your requirements are unsatisfiable.": (
        "mamba-ssm 2.3.2.post1 requires tilelang==0.1.8"
    ),
    # a range: the version the lane installs
    "Because mamba-ssm>=2.3.2.post1 depends on tilelang==0.1.8 and patchlane-lane depends on "
    "mamba-ssm==2.3.2.post1, we can conclude that patchlane-lane depends on tilelang==0.1.8.\n"
    "  And because patchlane-lane depends on tilelang>=0.1.15, we can conclude that your "
    "requirements are unsatisfiable.": "mamba-ssm 2.3.2.post1 requires tilelang==0.1.8",
    "Because all versions of mid depend on tilelang<0.1.10 and patchlane-lane depends on mid, we "
    "can conclude that patchlane-lane depends on tilelang<0.1.10.": (
        "every release of mid requires tilelang<0.1.10"
    ),
    "Because only tilelang<=0.1.8 is available and patchlane-lane depends on tilelang>=0.1.15, we "
    "can conclude that your requirements are unsatisfiable.": (
        "no release of tilelang>=0.1.15 is visible to the lane (its index, its exclude-newer)"
    ),
    # the raised target needs something the lane pins (the real mamba3 lane, uv 0.13.9)
    "Because tilelang>=0.1.15 depends on apache-tvm-ffi>=0.1.11,<0.1.13 and patchlane-lane depends "
    "on tilelang==0.1.15, we can conclude that patchlane-lane depends on "
    "apache-tvm-ffi>=0.1.11,<0.1.13.\n  And because patchlane-lane depends on "
    "apache-tvm-ffi==0.1.9, we can conclude that your requirements are unsatisfiable.": (
        "tilelang>=0.1.15 requires apache-tvm-ffi>=0.1.11,<0.1.13, and the lane requires "
        "apache-tvm-ffi==0.1.9"
    ),
    "Because patchlane-lane depends on tilelang<0.1.10 and tilelang>=0.1.15, we can conclude that "
    "your requirements are unsatisfiable.": (
        "the lane depends on tilelang<0.1.10 and tilelang>=0.1.15"
    ),
}


def test_the_raise_is_the_one_a_branch_makes():
    from retire.lanes.revisions import Revision

    lane = Lane("x", "3.12", "linux", ("pinner", "toylib~=1.4", "other==2.0"))
    up, upgrade = raised(lane, {"toylib": "1.6", "Other": "2.1", "dep": "3.0"})
    assert up.requirements == ("pinner", "toylib>=1.6,<2", "other==2.1")
    # a target the lane holds only as a dependency: a constraint
    assert up.constraints == ("dep>=3.0",) and upgrade == ("dep", "other", "toylib")
    # a revision is moved (upgraded when locked), never rewritten
    rev = Revision("toyrev", "https://git.example/acme/toyrev", "main")
    lane = Lane("r", "3.12", "linux", ("toyrev",), revisions=(rev,))
    up, upgrade = raised(lane, {"toyrev": "0.2"})
    assert up.requirements == ("toyrev",) and up.constraints == () and upgrade == ("toyrev",)


@pytest.mark.parametrize("said, blocker", UV_SAYS.items())
def test_the_blocker_is_uvs_own_explanation_in_one_line(said, blocker):
    stderr = f"error: No solution found when resolving dependencies\n  cause: {said}\n"
    # the lane's lock holds mamba-ssm, not mid
    assert parse_blocker(stderr, {"tilelang": "0.1.15"}, {"mamba-ssm": "2.3.2.post1"}) == blocker


# ---------------------------------------------------------------------------------------------
# Branches, lane by lane


@pytest.mark.slow
def test_a_partial_branch_edits_exactly_the_lanes_the_shim_leaves(shop):
    verdict = shop.verdict()
    steps = {lv.lane: lv.step for lv in verdict.lane_verdicts}
    assert steps == {"follow": "raise", "hold": "hold", "blocked": "blocked", "drop": "drop"}
    assert verdict.decision == Decision.RETIRE_IN_SOME
    lanes_before = {p.name: p.read_bytes() for p in (shop.root / "lanes").iterdir()}
    [outcome] = shop.apply(verdict)
    assert outcome.status == "proposed", outcome.reason
    # follow: raised and re-locked; drop: the id out, its lock untouched (shims are no lock
    # input); hold, blocked, other: untouched; the folder stays (hold and blocked list it)
    assert shop.changed() == {
        "lanes/follow.toml": "M",
        "locks/follow/pylock.toml": "M",
        "lanes/drop.toml": "M",
    }
    assert outcome.folder_removed is False and outcome.locks_remade == ("follow",)
    follow = shop.show("lanes/follow.toml")
    assert follow == lanes_before["follow.toml"].decode().replace(
        '"toylib==1.5"', '"toylib==1.6"'
    ).replace(f'["{SHIM}", "other_fix"]', '["other_fix"]')
    assert _lock_versions(shop.show("locks/follow/pylock.toml"))["toylib"] == "1.6"
    assert 'shims = ["other_fix"]' in shop.show("lanes/drop.toml")
    # the checkout is untouched
    assert {p.name: p.read_bytes() for p in (shop.root / "lanes").iterdir()} == lanes_before
    moves = {m.lane: (m.step, m.reason) for m in outcome.lanes}
    assert moves == {
        "follow": ("raise", ""),
        "drop": ("drop", ""),
        "hold": ("hold", "until the lane's toylib==1.0 reaches 1.6"),
        "blocked": ("blocked", "pinner 1.0 requires toylib==1.5"),
    }
    message = git(shop.root, "log", "-1", "--format=%B", BRANCH)
    assert message.startswith(f"Retire shim {SHIM} from drop, follow\n")
    assert (
        "- follow (lanes/follow.toml): raise — dropped shim toylib_add; toylib==1.5 → "
        "toylib==1.6; lock: toylib 1.5 → 1.6\n" in message
    )
    assert "- drop (lanes/drop.toml): drop — dropped shim toylib_add\n" in message
    assert "- hold (lanes/hold.toml): hold — until the lane's toylib==1.0 reaches 1.6" in message
    assert "- blocked (lanes/blocked.toml): blocked — pinner 1.0 requires toylib==1.5" in message
    assert f"shims/{SHIM}/ stays: blocked, hold still list it." in message
    body = Path(outcome.pr_body_path or "").read_text()
    assert "| `blocked` | blocked | pinner 1.0 requires toylib==1.5 |" in body
    # twice: nothing new
    [again] = shop.apply(shop.verdict())
    assert again.status == "already-proposed" and again.commit == outcome.commit


@pytest.mark.slow
def test_a_full_branch_leaves_a_guard(shop):
    verdict = shop.verdict("other_fix")
    assert verdict.decision == Decision.RETIRE
    [outcome] = shop.apply(verdict)
    assert outcome.status == "proposed" and outcome.folder_removed is True
    changed = shop.changed(autodrop.BRANCH_PREFIX + "other_fix")
    # the patch goes; the manifest (now with [guard]) and the reproducer stay as a guard
    assert {p for p, s in changed.items() if s == "D"} == {"shims/other_fix/patch.py"}
    assert {p for p, s in changed.items() if s == "M"} == {
        "shims/other_fix/manifest.toml",
        "lanes/follow.toml",
        "locks/follow/pylock.toml",
        "lanes/drop.toml",
    }


@pytest.mark.slow
def test_a_lane_that_cannot_relock_inside_the_branch_is_put_back_and_the_branch_goes_on(shop):
    # raises proposed without the trial (`verdicts --no-resolve`): blocked's re-lock fails
    verdict = shop.verdict(resolve=False)
    assert {lv.lane: lv.step for lv in verdict.lane_verdicts}["blocked"] == "raise"
    [outcome] = shop.apply(verdict)
    assert outcome.status == "proposed", outcome.reason
    assert "lanes/blocked.toml" not in shop.changed() and "lanes/follow.toml" in shop.changed()
    [blocked] = [m for m in outcome.lanes if m.lane == "blocked"]
    assert blocked.step == "blocked" and "re-locking blocked failed" in blocked.reason
    assert "pinner" in blocked.reason
    assert outcome.folder_removed is False


@pytest.mark.slow
def test_when_no_lane_can_move_there_is_no_branch_and_the_reasons_are_reported(shop):
    only_blocked = shop.verdict(resolve=False)
    lanes = tuple(lv for lv in only_blocked.lane_verdicts if lv.lane in ("blocked", "hold"))
    verdict = Verdict(
        SHIM,
        Decision.RETIRE_IN_SOME,
        "x",
        floors=(Floor.parse("toylib>=1.6"),),
        lane_verdicts=lanes,
    )
    [outcome] = shop.apply(verdict)
    assert (
        outcome.status == "blocked" and not outcome.ok and "blocked: re-locking" in outcome.reason
    )
    assert "retire" not in git(shop.root, "branch", "--list")


@pytest.mark.slow
def test_a_blocker_lifted_by_a_new_upload_becomes_a_branch_on_the_next_run(shop):
    [first] = shop.apply(shop.verdict())
    assert first.status == "proposed"
    # a human merges the partial branch
    git(shop.root, "merge", "-q", "--ff-only", BRANCH)
    # pinner 1.1 lifts its pin
    shop.index.add(
        build_wheel(shop.wheels, "pinner", "1.1", requires=["toylib>=1.5"]), "2026-04-01"
    )
    verdict = shop.verdict()
    assert {lv.lane: lv.step for lv in verdict.lane_verdicts} == {
        "hold": "hold",
        "blocked": "raise",
    }
    [second] = shop.apply(verdict)
    # the merged branch is replaced: nothing on it is lost
    assert second.status == "proposed", second.reason
    assert shop.changed() == {"lanes/blocked.toml": "M", "locks/blocked/pylock.toml": "M"}
    blocked = shop.show("lanes/blocked.toml")
    assert 'requirements = ["pinner", "toylib>=1.6"]' in blocked and "shims = []" in blocked
    versions = _lock_versions(shop.show("locks/blocked/pylock.toml"))
    assert versions["toylib"] == "1.6" and versions["pinner"] == "1.1"


# ---------------------------------------------------------------------------------------------
# A revision lane, and the command's locations reaching the re-lock

REVISION_LANE = """\
[lane]
python = "3.11"
platform = "linux"
requirements = ["toyrev"]
shims = ["{shim}"]

[lane.revisions]
toyrev = {{ mirror = "https://git.example/acme/toyrev", rev = "main" }}
"""


@pytest.mark.slow
def test_a_revision_lane_moves_its_revision_with_the_commands_mirrors(tmp_path, capsys):
    upstream = make_package_repo(tmp_path / "upstream" / "toyrev")
    root = tmp_path / "project"
    write_shim(root / "shims", "toyrev_fix")
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "dev.toml").write_text(REVISION_LANE.format(shim="toyrev_fix"))
    (root / "patchlane.toml").write_text(
        '[[mirrors.repository]]\nurl = "https://git.example/acme/toyrev"\n'
    )
    # the mirror lives outside the project: only --mirrors finds it
    mirrors = tmp_path / "elsewhere"
    mirror = mirrors / "acme" / "toyrev.git"
    git(tmp_path, "clone", "-q", "--mirror", str(upstream.path), str(mirror))
    git(mirror, "update-ref", "refs/heads/main", upstream.first)
    found = load_mirrors(root, folder=mirrors)
    [lane] = lanefile.load_lanes(root / "lanes", root=root)
    assert locking.lock_lane(lane, root / "locks", mirrors=found).ok
    (root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a shop")
    # the fix lands on the followed branch
    git(mirror, "update-ref", "refs/heads/main", upstream.second)
    trial = try_raise(
        lane, {"toyrev": "0.1"}, locks_dir=root / "locks", scratch_dir=tmp_path / "s", mirrors=found
    )
    assert trial.resolved, trial
    raise_ = LaneVerdict(
        "dev",
        LaneStep.RAISE,
        "move past the fix",
        file="lanes/dev.toml",
        floors=(Floor.parse("toyrev>=0.1"),),
    )
    plan = {
        "shim_id": "toyrev_fix",
        "why": "fixed on main",
        "floors": ["toyrev>=0.1"],
        "lanes": [raise_.to_json()],
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    args = ("retire", "--apply", "--no-pr", "--json", "--plan", str(tmp_path / "plan.json"))
    # without --mirrors the branch's re-lock cannot find the mirror: the lane is put back
    code, out, err = run_cli(root, *args, capsys=capsys)
    [proposal] = json.loads(out)["proposals"]
    assert code == 0 and proposal["status"] == "blocked", err
    assert (
        "no mirror" in proposal["lanes"][0]["reason"] or "missing" in proposal["lanes"][0]["reason"]
    )
    code, out, err = run_cli(root, *args, "--mirrors", str(mirrors), capsys=capsys)
    [proposal] = json.loads(out)["proposals"]
    assert code == 0 and proposal["status"] == "proposed", err
    from tests.test_json_schemas import check

    check("retire-apply", json.loads(out))
    lock = tomllib.loads(
        git(root, "show", f"{autodrop.BRANCH_PREFIX}toyrev_fix:locks/dev/pylock.toml")
    )
    [toyrev] = [p for p in lock["packages"] if p["name"] == "toyrev"]
    assert toyrev["vcs"]["commit-id"] == upstream.second
    assert toyrev["vcs"]["url"] == "https://git.example/acme/toyrev.git"
    # the lane file keeps its rev (the branch it follows); the shim leaves it
    dev = git(root, "show", f"{autodrop.BRANCH_PREFIX}toyrev_fix:lanes/dev.toml")
    assert 'rev = "main"' in dev and "shims = []" in dev
    assert uv.version()


# ---------------------------------------------------------------------------------------------
# End to end, once the verdicts are gathered per lane (issue 19, P1)

PER_LANE_VERDICTS = importlib.util.find_spec("retire.verdicts.lanes") is not None


@pytest.mark.slow
@pytest.mark.skipif(
    not PER_LANE_VERDICTS, reason="needs the per-lane verdicts (retire/verdicts/lanes.py, P1)"
)
def test_retire_apply_end_to_end_per_lane(shop, capsys):
    shop.record_fix()
    code, out, err = run_cli(shop.root, "retire", "--apply", "--no-pr", "--json", capsys=capsys)
    assert code == 0, err
    proposals = {p["shim_id"]: p for p in json.loads(out)["proposals"]}
    steps = {m["lane"]: m["step"] for m in proposals[SHIM]["lanes"]}
    assert steps == {"follow": "raise", "drop": "drop", "hold": "hold", "blocked": "blocked"}
    [blocked] = [m for m in proposals[SHIM]["lanes"] if m["lane"] == "blocked"]
    assert blocked["reason"] == "pinner 1.0 requires toylib==1.5"
    assert proposals[SHIM]["folder_removed"] is False


PLAIN_LANE = """\
[lane]
python = "3.12"
platform = "linux"
exclude-newer = 2026-02-01
requirements = ["toylib"]
"""


@pytest.mark.slow
def test_bump_relocks_with_the_commands_mirrors_and_index(tmp_path, capsys, monkeypatch):
    # no index from this host's configuration: only --index-url names one
    for name in ("UV_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    upstream = make_package_repo(tmp_path / "upstream" / "toyrev")
    index = PackageIndex()
    index.add(toylib(tmp_path / "wheels", "1.5"), "2026-01-01")
    root, mirrors = tmp_path / "project", tmp_path / "elsewhere"
    mirror = mirrors / "acme" / "toyrev.git"
    git(tmp_path, "clone", "-q", "--mirror", str(upstream.path), str(mirror))
    git(mirror, "update-ref", "refs/heads/main", upstream.first)
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "dev.toml").write_text(REVISION_LANE.format(shim="toyrev_fix"))
    (root / "lanes" / "plain.toml").write_text(PLAIN_LANE)
    write_shim(root / "shims", "toyrev_fix")
    (root / "patchlane.toml").write_text(
        '[[mirrors.repository]]\nurl = "https://git.example/acme/toyrev"\n'
    )
    (root / ".gitignore").write_text(".patchlane/\n__pycache__/\n")
    with IndexServer(index) as server:
        host = uv.HostIndexes({}, server.url)
        lanes = lanefile.load_lanes(root / "lanes", root=root)
        results = locking.lock_lanes(
            lanes, root / "locks", host=host, mirrors=load_mirrors(root, folder=mirrors)
        )
        assert all(r.ok for r in results), results
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "a shop")
        index.add(toylib(tmp_path / "wheels", "1.6"), "2026-03-01")
        git(mirror, "update-ref", "refs/heads/main", upstream.second)
        args = ("bump", "--no-run", "--no-pr", "--json", "--now", "2026-06-01T12:00:00")
        overrides = ("--mirrors", str(mirrors), "--index-url", server.url)
        code, out, err = run_cli(root, *args, *overrides, capsys=capsys)
    assert code == 0, err
    document = json.loads(out)
    assert {lane["lane"]: lane["status"] for lane in document["lanes"]} == {
        "dev": "bumped",
        "plain": "bumped",
    }, err
    branch = document["branch"]
    dev = tomllib.loads(git(root, "show", f"{branch}:locks/dev/pylock.toml"))
    [toyrev] = [p for p in dev["packages"] if p["name"] == "toyrev"]
    assert toyrev["vcs"]["commit-id"] == upstream.second
    plain = git(root, "show", f"{branch}:locks/plain/pylock.toml")
    assert _lock_versions(plain)["toylib"] == "1.6" and server.url.split("/simple")[0] in plain


def test_a_moved_revision_is_a_lock_change():
    from retire.locks import lockdiff

    def lock(commit: str) -> dict:
        vcs = {"type": "git", "url": "https://git.example/a/b.git", "commit-id": commit}
        return {"packages": [{"name": "toyrev", "version": "0.1", "vcs": vcs}]}

    [change] = lockdiff.diff(lock("a" * 40), lock("b" * 40))
    assert (change.old, change.new, change.kind) == (
        "0.1 @ aaaaaaaaaa",
        "0.1 @ bbbbbbbbbb",
        "other",
    )
    assert lockdiff.diff(lock("a" * 40), lock("a" * 40)) == ()


MATRIX = """\
# cells share one shim list
[matrix]
name = "mx-{a}"

[matrix.base]
python = "3.12"
platform = "linux"
requirements = ["toylib"]
shims = ["toylib_add"]

[matrix.axes.a."1"]
requirements = ["helper==1.0"]

[matrix.axes.a."2"]
requirements = ["helper==2.0"]
"""


@pytest.mark.slow
def test_a_matrix_file_is_edited_only_when_every_cell_leaves(tmp_path):
    root = tmp_path / "project"
    write_shim(root / "shims", SHIM)
    (root / "lanes").mkdir(parents=True)
    (root / "lanes" / "mx.toml").write_text(MATRIX)
    (root / ".gitignore").write_text(".patchlane/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a matrix")

    def cell(name: str, step: LaneStep) -> LaneVerdict:
        return LaneVerdict(name, step, "x", file="lanes/mx.toml", until="the shop moves")

    # one cell holds: the other cannot go alone (defensive: the rules already say keep)
    coupled = plan_of(cell("mx-1", LaneStep.DROP), cell("mx-2", LaneStep.HOLD))
    [outcome] = autodrop.apply(root, [coupled], ApplyOptions(open_prs=False))
    assert outcome.status == "blocked" and "retire" not in git(root, "branch", "--list")
    [mx1] = [m for m in outcome.lanes if m.lane == "mx-1"]
    assert (
        mx1.step == "keep"
        and mx1.reason == "lanes/mx.toml's cells share one shim list; mx-2 keep(s) it"
    )
    # every cell leaves: the file is edited once, the folder goes
    both = plan_of(cell("mx-1", LaneStep.DROP), cell("mx-2", LaneStep.DROP))
    [outcome] = autodrop.apply(root, [both], ApplyOptions(open_prs=False))
    assert outcome.status == "proposed" and outcome.folder_removed is True
    assert outcome.lane_changes == ("lanes/mx.toml: dropped shim toylib_add",)
    text = git(root, "show", f"{BRANCH}:lanes/mx.toml") + "\n"
    assert text == MATRIX.replace('shims = ["toylib_add"]', "shims = []")


def plan_of(*lanes: LaneVerdict):
    from retire.branches.dropplan import DropPlan

    return DropPlan(SHIM, "fixed", (Floor.parse("toylib>=1.6"),), lanes=lanes)


def test_the_pr_body_shows_a_conflict_never_resolves_it_out_of_sight():
    from retire.branches.retirement import evidence_markdown
    from retire.verdicts.model import Flag, FlagKind, Verdict

    conflict = (
        "pr-released: PR #746 is in release 0.1.6.post1 — but BUG_REPRODUCED without the shim "
        "on tilelang 0.1.8; the floor comes from execution: tilelang>=0.1.15"
    )
    verdict = Verdict(
        "tilelang_tma_lowering",
        "retire-in-some",
        "fixed in 0.1.15",
        flags=(Flag(FlagKind.CONFLICT, conflict), Flag(FlagKind.STALE, "no movement")),
    )
    body = evidence_markdown(verdict, ())
    assert f"**Conflict:**\n- {conflict}" in body and "no movement" not in body
