"""Breaks: what a lock move broke in a lane, and the culprit of each, for the bump PR body.

After a bump's suites ran (:mod:`retire.branches.bump`), every lane outcome that turned from clean
to broken is searched for its culprit (:mod:`retire.bisect.culprit`) between the lane's old lock
(the base commit's) and its new one:

- a guard that regressed: its reproducer without a shim;
- a shim whose without-shim run turned broken (upstream-fixed → needed or shim-broken): without;
- a shim that newly breaks with the shim applied (needed → shim-broken): with.

Each culprit is recorded as evidence (``validation/culprits.jsonl``, one JSON object a line, next
to the validation manifest; its runs go to the manifest like any bisection's) and becomes the
"Breaks" section of the PR body: per lane, the one line, the last clean and first broken commit
where the commit step named them, and the runs that prove it (the commit runs too). A search
answered the same way again (its runs cached) is recorded once: an entry is keyed by lane,
subject, mode and the two locks' digests, and one whose newest entry under that key already says
the same is not appended.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from retire.bisect.budget import Budget, Meter
from retire.bisect.cache import ResultCache
from retire.bisect.culprit import CommitSearch, Culprit
from retire.bisect.culpritcommits import mirror_commits
from retire.bisect.culpritrun import CulpritRunner, lock_changes, search_culprit
from retire.core import mdsafe
from retire.core.project import Project
from retire.evidence import culprits as recorded
from retire.evidence.validation import Mode, ShimOutcome, ValidationRecord
from retire.lanes.model import Lane
from retire.runs.guards import GuardOutcome
from shims.model import ShimManifest

__all__ = [
    "DEFAULT_BUDGET",
    "breaks_markdown",
    "broken_subjects",
    "find_breaks",
    "record",
    "regressed_markdown",
]

#: What a bump spends on culprits when the command names no budget.
DEFAULT_BUDGET = Budget(runs=40, minutes=30)

_CLEAN_WITHOUT = {ShimOutcome.UPSTREAM_FIXED, GuardOutcome.HOLDING}
_BROKEN_WITHOUT = {ShimOutcome.NEEDED, ShimOutcome.SHIM_BROKEN, GuardOutcome.REGRESSED}


def broken_subjects(
    outcomes: Iterable[tuple[str, str, str | None]],
) -> list[tuple[str, Mode]]:
    """(shim or guard, the mode whose run turned broken) for each outcome that went clean →
    broken; a crash or a first run is no clean → broken."""
    found = []
    for subject, now, before in outcomes:
        if before in _CLEAN_WITHOUT and now in _BROKEN_WITHOUT:
            found.append((subject, Mode.WITHOUT))
        elif before == ShimOutcome.NEEDED and now == ShimOutcome.SHIM_BROKEN:
            found.append((subject, Mode.WITH))
    return found


def _digest(path: Path) -> str:
    """``sha256:…`` of a lock's bytes ("" when it is missing)."""
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def find_breaks(
    project: Project,
    lane: Lane,
    old_lock: Path,
    new_lock: Path,
    subjects: Sequence[tuple[ShimManifest, Mode]],
    *,
    meter: Meter,
    on_record: Callable[[ValidationRecord], object] | None = None,
    commits: CommitSearch | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[Culprit, ...]:
    """The culprit of each subject's break in ``lane`` between the locks at ``old_lock`` and
    ``new_lock``, within what is left of ``meter``."""
    from retire.locks import locking

    changes = lock_changes(locking.read_lock(old_lock), locking.read_lock(new_lock))
    old_digest, new_digest = _digest(old_lock), _digest(new_lock)
    found = []
    for manifest, mode in subjects:
        runner = CulpritRunner(
            lane,
            manifest,
            mode,
            old_lock,
            work_dir=project.inside(".patchlane", "culprit", lane.name),
            cache=ResultCache(project.bisect_cache),
            on_record=on_record,
            say=lambda line: say(f"[{lane.name}] culprit: {line}"),
        )
        # the commit step: the culprit package's mirror, where this host has one (history search)
        step = commits or mirror_commits(project, runner, stop=meter.stop, say=runner.say)
        culprit = search_culprit(runner, changes, meter=meter, commits=step)
        # the caller prints the result line, once
        found.append(dataclasses.replace(culprit, old_lock=old_digest, new_lock=new_digest))
    return tuple(found)


#: What says which search an entry answers (the rest, less its proof, is the answer).
_KEY = ("lane", "subject", "mode", "old_lock", "new_lock")


def _answer(entry: Mapping[str, object]) -> tuple[str, str]:
    """(the search, its answer) of a recorded entry, as canonical JSON; the proof is left out:
    the runs that led to an answer are not the answer."""
    key = json.dumps([entry.get(k) for k in _KEY])
    answer = {k: v for k, v in entry.items() if k not in _KEY and k != "proof"}
    return key, json.dumps(answer, sort_keys=True)


def record(project: Project, culprits: Sequence[Culprit]) -> Path:
    """Append the culprits to ``validation/culprits.jsonl``: the evidence people and reports
    read. One whose search's newest entry already gives the same answer is not appended again;
    every line already there stays as it is, a damaged one too (the one evidence reader)."""
    path = project.validation.parent / recorded.NAME
    newest: dict[str, str] = {}
    for entry in recorded.load(path):
        key, answer = _answer(entry)
        newest[key] = answer
    entries = []
    for culprit in culprits:
        entry = culprit.to_json()
        key, answer = _answer(entry)
        if newest.get(key) != answer:
            newest[key] = answer
            entries.append(entry)
    if entries:
        recorded.append(path, entries, within=project.root)
    return path


def breaks_markdown(culprits: Mapping[str, Sequence[Culprit]]) -> list[str]:
    """The PR body's "Breaks" section: per lane, each culprit's line and its proof."""
    lanes = {lane: found for lane, found in culprits.items() if found}
    if not lanes:
        return []
    lines = ["### Breaks", ""]
    for lane, found in lanes.items():
        lines += [f"#### Lane {mdsafe.code(lane)}", ""]
        for culprit in found:
            lines += [culprit.markdown(), ""]
    return lines


def regressed_markdown(regressed: Sequence[tuple[str, str]]) -> list[str]:
    """The PR body's "Guards that regressed": (lane, guard) whose retired bug is back."""
    if not regressed:
        return []
    return [
        "### Guards that regressed",
        *[
            f"- {mdsafe.code(guard)} on lane {mdsafe.code(lane)}: the retired bug reproduces "
            f"again — {mdsafe.code(f'patchlane shim restore {guard}')}"
            for lane, guard in regressed
        ],
        "",
    ]


def old_lock_at(project: Project, lane: str, rev: str | None) -> tuple[bytes, str]:
    """The lane's lock as commit ``rev`` holds it, and the revision read. Without ``rev``: ``HEAD``
    when the lock in the checkout differs from it (a hand edit, a re-lock not committed), else the
    parent of the last commit that changed it (a committed nightly move)."""
    from retire.core.errors import InputError
    from retire.core.git import Git, GitError
    from retire.locks import locking

    path = locking.lock_path(project.locks_dir, lane)
    repo = Git(project.root)
    try:
        relative = path.resolve().relative_to(repo.toplevel().resolve()).as_posix()
        if rev is None:
            head = repo.run("show", revs=[f"HEAD:{relative}"], check=False)
            if not path.is_file() or head.strip() != path.read_text(encoding="utf-8").strip():
                rev = "HEAD"
            else:
                touched = repo.commits_touching(relative)
                if not touched:
                    raise InputError(
                        None,
                        "--since",
                        f"no commit changed {relative}",
                        "name one with --since REV",
                    )
                rev = f"{touched[0][0]}^"
        return (repo.run("show", revs=[f"{rev}:{relative}"]) + "\n").encode(), rev
    except GitError as exc:
        raise InputError(
            None,
            "--since",
            f"cannot read lane {lane}'s old lock: {exc}",
            "name a commit that holds it, e.g. --since HEAD~1",
        ) from None
