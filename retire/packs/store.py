"""Upstream packs on disk: load, check, plan waves, approve, export, record filings.

Where things live in a project (``root``):

- ``shims/<id>/pack.toml``      pack metadata next to the shim (docs/packs.md);
- ``packs/deny.toml``           the deny-list of non-public language;
- ``packs/state.json``          approvals and filings (committed; the human gate's record);
- ``validation/manifest.jsonl`` reproducer runs: the only evidence that a pack is ready.

Nothing here files anything: ``retire.packs.export`` writes files for a human to post, ``filed``
records what they posted. ``patchlane pack …`` is ``retire.commands.pack``; :func:`filing_queue`
and :func:`markdown_section` feed the weekly report.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retire.core.atomic import atomic_write, locked
from retire.core.errors import InputError
from retire.core.project import Project, contained
from retire.evidence import validation
from retire.history.mirrored import project_window
from retire.history.window import Window
from retire.packs.checks import (
    DEFAULT_MAX_CODE_LINES,
    DEFAULT_WINDOW,
    Blocker,
    DenyRule,
    parse_deny,
    readiness,
)
from retire.packs.model import (
    CATEGORIES,
    GITHUB_HOST,
    Pack,
    Searched,
    github_repository,
    parse_pack_spec,
)
from retire.packs.render import codify, markdown_text, render
from retire.packs.waves import (
    Approval,
    Candidate,
    Filing,
    FilingState,
    PackRecord,
    WavePlan,
    dumps_state,
    last_waves,
    parse_state,
    plan_wave,
)
from shims import times, tomlreader
from shims.manifest import SHIM_ID, load_manifest
from shims.model import ShimManifest

__all__ = [
    "LoadedPack",
    "PackStatus",
    "QueueEntry",
    "approve",
    "deny_file",
    "filing_queue",
    "load_pack",
    "markdown_section",
    "pack_ids",
    "plan",
    "record_filing",
]


class PackStatus(enum.StrEnum):
    """Where a pack stands in the filing queue, in the order the queue lists them."""

    # passes every check; waits for a person's approval and a wave
    READY = "ready"
    # a check fails (or the pack cannot be read): the reasons say what to fix
    BLOCKED = "blocked"
    # a person approved it as it reads now
    APPROVED = "approved"
    # a person filed it upstream
    FILED = "filed"
    # fixed upstream meanwhile: regression coverage, never filed
    ALREADY_FIXED = "already-fixed"


STATUSES = tuple(PackStatus)


# ---------------------------------------------------------------------------------------------
# Paths and loading


def _paths(root: Path) -> dict[str, Path]:
    project = Project(root)
    return {
        "shims": project.shims_dir,
        "deny": project.packs_dir / "deny.toml",
        "state": project.packs_dir / "state.json",
        "validation": project.validation,
    }


def pack_ids(root: str | Path) -> list[str]:
    """Ids of the shims that carry a ``pack.toml``, sorted."""
    folder = _paths(Path(root))["shims"]
    names = (p.parent.name for p in folder.glob("*/pack.toml"))
    return sorted(name for name in names if SHIM_ID.fullmatch(name))


@dataclass(frozen=True)
class LoadedPack:
    manifest: ShimManifest
    pack: Pack
    # None when the shim has no reproducer file
    reproducer_text: str | None

    @property
    def digest(self) -> str:
        """What an approval covers: the body, the command and the attached reproducer."""
        hasher = hashlib.sha256()
        for part in (self.pack.body, self.pack.spec.command, self.reproducer_text or ""):
            hasher.update(part.encode())
            hasher.update(b"\0")
        return hasher.hexdigest()


def _check_id(root: Path, pack_id: str) -> Path:
    if not SHIM_ID.fullmatch(pack_id):
        raise InputError(
            None,
            None,
            f"unknown pack {pack_id[:80]!r}: not a shim id",
            "use an id from `patchlane pack check`",
        )
    path = _paths(root)["shims"] / pack_id / "pack.toml"
    if not path.is_file():
        known = ", ".join(pack_ids(root)) or "none"
        raise InputError(
            None,
            None,
            f"unknown pack {pack_id!r}: no shims/{pack_id}/pack.toml",
            f"packs here: {known}",
        )
    return path


def load_pack(root: str | Path, pack_id: str) -> LoadedPack:
    """Read and render one pack; bad input is a one-line InputError."""
    root = Path(root)
    path = _check_id(root, pack_id)
    manifest = load_manifest(path.parent / "manifest.toml", check_files=False)
    display = _display(root, path)
    text = tomlreader.read_text(path, display)
    # _check_id found the file; read_text raises for a missing one unless missing_ok
    assert text is not None
    spec = parse_pack_spec(text, display, manifest.id)
    # Neither the reproducer nor its shim folder may be a link: what is attached is what was
    # reviewed.
    reproducer = contained(
        manifest.directory.parent, manifest.reproducer_path.absolute(), key="reproducer.path"
    )
    reproducer_text = tomlreader.read_text(reproducer, _display(root, reproducer), missing_ok=True)
    lines = len(reproducer_text.splitlines()) if reproducer_text is not None else 0
    fix = _recorded_window(root, manifest, spec.repository) if spec.already_fixed else None
    return LoadedPack(manifest, render(manifest, spec, lines, fix), reproducer_text)


def _recorded_window(root: Path, manifest: ShimManifest, repository: str) -> Window | None:
    """The shim's window as the project's recorded runs show it (retire.history), the fix commit
    named where the target's mirror is on this host — found as every command finds it
    (:mod:`retire.mirrors.resolve`: a lane revision, a link, the pack's ``repository``, a mirror
    named as the package), and the window says how — what an already-fixed pack's upstream
    state cites. A validation manifest or mirror setting that cannot be read cites nothing (the
    checklist and `patchlane mirrors` say why)."""
    project = Project(root)
    try:
        records = validation.load(project.validation)
        links = (f"https://{GITHUB_HOST}/{repository}",)
        return project_window(project, manifest, records, links=links)
    except InputError:
        return None


def load_deny(root: str | Path) -> tuple[DenyRule, ...]:
    path = _paths(Path(root))["deny"]
    text = tomlreader.read_text(path, _display(Path(root), path), missing_ok=True)
    return () if text is None else parse_deny(text, _display(Path(root), path))


def load_state(root: str | Path) -> FilingState:
    path = _paths(Path(root))["state"]
    text = tomlreader.read_text(path, _display(Path(root), path), missing_ok=True)
    return FilingState() if text is None else parse_state(text, _display(Path(root), path))


def _display(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# The queue


@dataclass(frozen=True)
class QueueEntry:
    """The filing state of one pack, for `pack check`, `pack plan` and the weekly report."""

    id: str
    status: PackStatus
    title: str = ""
    repository: str = ""
    category: str = ""
    kind: str = ""
    priority: str = ""
    upstream_state: Searched | None = None
    thread: str | None = None
    #: Why it is blocked (or, when approved, what blocks its export right now): one line each.
    reasons: tuple[str, ...] = ()
    approved_by: str | None = None
    approved_at: str | None = None
    # filing URLs
    filed: tuple[str, ...] = ()
    fixed_in: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "status": self.status,
            "title": self.title,
            "repository": self.repository,
            "category": self.category,
            "kind": self.kind,
            "priority": self.priority,
            "upstream_state": self.upstream_state,
            "thread": self.thread,
            "reasons": list(self.reasons),
            "approved_by": self.approved_by,
            "approved_at": self.approved_at,
            "filed": list(self.filed),
            "fixed_in": self.fixed_in,
        }


@dataclass(frozen=True)
class _Assessed:
    entry: QueueEntry
    loaded: LoadedPack | None = None
    blockers: tuple[Blocker, ...] = field(default=())


def _assess(
    root: Path,
    pack_id: str,
    *,
    state: FilingState,
    records: Sequence[validation.ValidationRecord],
    deny: Sequence[DenyRule],
    now: _dt.datetime,
    window: _dt.timedelta,
    max_code_lines: int,
) -> _Assessed:
    try:
        loaded = load_pack(root, pack_id)
    except InputError as exc:
        return _Assessed(QueueEntry(pack_id, PackStatus.BLOCKED, reasons=(f"pack: {exc}",)))
    record = state.record(pack_id)
    if record.filings:
        return _Assessed(_entry(pack_id, loaded, record, PackStatus.FILED), loaded)
    if loaded.pack.spec.already_fixed:
        return _Assessed(_entry(pack_id, loaded, record, PackStatus.ALREADY_FIXED), loaded)
    blockers = readiness(
        loaded.pack,
        loaded.manifest,
        reproducer_text=loaded.reproducer_text,
        records=records,
        deny=deny,
        now=now,
        window=window,
        max_code_lines=max_code_lines,
    )
    if record.approval is not None and record.approval.digest != loaded.digest:
        blockers += (
            Blocker(
                "approval",
                f"the body, command or reproducer changed since {record.approval.by} approved it "
                f"on {record.approval.at[:10]} — review it and approve again",
            ),
        )
        status = PackStatus.BLOCKED
    elif record.approval is not None:
        status = PackStatus.APPROVED
    else:
        status = PackStatus.BLOCKED if blockers else PackStatus.READY
    reasons = tuple(str(b) for b in blockers)
    return _Assessed(_entry(pack_id, loaded, record, status, reasons), loaded, blockers)


def _entry(
    pack_id: str,
    loaded: LoadedPack,
    record: PackRecord,
    status: PackStatus,
    reasons: tuple[str, ...] = (),
) -> QueueEntry:
    spec, approval = loaded.pack.spec, record.approval
    return QueueEntry(
        id=pack_id,
        status=status,
        title=loaded.pack.title,
        repository=spec.repository,
        category=spec.category,
        kind=spec.kind,
        priority=spec.priority,
        upstream_state=spec.upstream.state,
        thread=spec.upstream.thread,
        reasons=reasons,
        approved_by=approval.by if approval else None,
        approved_at=approval.at if approval else None,
        filed=tuple(f.url for f in record.filings),
        fixed_in=spec.upstream.fixed_in,
    )


def _assess_all(
    root: Path,
    ids: Sequence[str] | None,
    *,
    now: _dt.datetime | None,
    window: _dt.timedelta,
    max_code_lines: int,
    validation_path: Path | None = None,
) -> list[_Assessed]:
    root = Path(root)
    records = validation.load(validation_path or _paths(root)["validation"])
    deny, state = load_deny(root), load_state(root)
    for pack_id in ids or ():
        _check_id(root, pack_id)
    return [
        _assess(
            root,
            pack_id,
            state=state,
            records=records,
            deny=deny,
            now=now or times.now(),
            window=window,
            max_code_lines=max_code_lines,
        )
        for pack_id in (ids or pack_ids(root))
    ]


def filing_queue(
    root: str | Path,
    ids: Sequence[str] | None = None,
    *,
    now: _dt.datetime | None = None,
    window: _dt.timedelta = DEFAULT_WINDOW,
    max_code_lines: int = DEFAULT_MAX_CODE_LINES,
    validation_path: str | Path | None = None,
) -> list[QueueEntry]:
    """The state of every pack under ``root`` (or of ``ids``): ready, blocked (why), approved, filed
    (links), already fixed."""
    return [
        a.entry
        for a in _assess_all(
            Path(root),
            ids,
            now=now,
            window=window,
            max_code_lines=max_code_lines,
            validation_path=Path(validation_path) if validation_path else None,
        )
    ]


def deny_file(root: str | Path) -> Path:
    """Where the deny-list of non-public language lives (it may not exist)."""
    return _paths(Path(root))["deny"]


def markdown_section(entries: Sequence[QueueEntry], *, heading: str = "## Filing queue") -> str:
    """The weekly report's section: one table, then the blockers of each blocked pack."""
    counts = {status: sum(1 for e in entries if e.status == status) for status in STATUSES}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no packs"
    lines = [heading, "", summary + ".", ""]
    if not entries:
        return "\n".join(lines)
    lines += ["| pack | target | category | state | detail |", "|---|---|---|---|---|"]
    for e in sorted(entries, key=lambda e: (STATUSES.index(e.status), e.id)):
        if e.status == PackStatus.FILED:
            detail = " ".join(f"<{url}>" for url in e.filed)
        elif e.status == PackStatus.ALREADY_FIXED:
            detail = "regression coverage: " + ", ".join(
                x for x in (f"<{e.thread}>" if e.thread else "", e.fixed_in or "") if x
            )
        elif e.status == PackStatus.APPROVED:
            detail = f"approved by {e.approved_by} on {(e.approved_at or '')[:10]}"
            if e.reasons:
                detail += f"; export blocked ({len(e.reasons)})"
        elif e.status == PackStatus.BLOCKED:
            detail = f"{len(e.reasons)} blocker(s), below"
        else:
            detail = f"{e.priority}; waits for a wave"
        cells = [
            f"`{e.id}`",
            e.repository or "?",
            CATEGORIES.get(e.category, e.category or "?"),
            e.status,
            detail,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    blocked = [
        e for e in entries if e.reasons and e.status in (PackStatus.BLOCKED, PackStatus.APPROVED)
    ]
    if blocked:
        lines += ["", "### Blocked packs", ""]
        for e in blocked:
            lines.append(f"- `{e.id}`")
            lines += [f"  - {markdown_text(codify(reason))}" for reason in e.reasons]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Waves, approval, export, filing


def plan(
    root: str | Path,
    *,
    day: _dt.date | None = None,
    now: _dt.datetime | None = None,
    window: _dt.timedelta = DEFAULT_WINDOW,
    **options: int,
) -> tuple[WavePlan, list[QueueEntry]]:
    """The next wave over the ready and approved packs, and the queue it was planned from."""
    now = now or times.now()
    entries = filing_queue(root, now=now, window=window)
    candidates = [
        Candidate(e.id, e.repository, e.priority, approved=e.status == PackStatus.APPROVED)
        for e in entries
        if e.status == PackStatus.READY or (e.status == PackStatus.APPROVED and not e.reasons)
    ]
    return plan_wave(
        candidates, last_waves(load_state(root)), day or now.date(), **options
    ), entries


def _update_state(root: Path, change) -> FilingState:
    path = _paths(root)["state"]
    # the project's own (resolved) root: the path was built from it
    within = Project(root).root
    with locked(path, within=within):
        state = change(load_state(root))
        atomic_write(path, dumps_state(state), within=within)
    return state


def _ready_or_raise(
    assessed: _Assessed, action: str, *, ignore: tuple[str, ...] = ()
) -> LoadedPack:
    entry = assessed.entry
    if assessed.loaded is None:
        raise InputError(None, None, f"{entry.id}: {entry.reasons[0]}")
    if entry.status == PackStatus.ALREADY_FIXED:
        raise InputError(
            None,
            None,
            f"{entry.id}: already fixed upstream — regression coverage, nothing to {action}",
        )
    if entry.status == PackStatus.FILED:
        raise InputError(
            None, None, f"{entry.id}: already filed at {entry.filed[0]}", "nothing to do"
        )
    blockers = [b for b in assessed.blockers if b.rule not in ignore]
    if blockers:
        more = (
            f" (and {len(blockers) - 1} more; see `patchlane pack check {entry.id}`)"
            if len(blockers) > 1
            else ""
        )
        raise InputError(None, None, f"{entry.id}: not ready to {action}: {blockers[0]}{more}")
    return assessed.loaded


def approve(
    root: str | Path,
    pack_id: str,
    *,
    by: str,
    now: _dt.datetime | None = None,
    window: _dt.timedelta = DEFAULT_WINDOW,
) -> Approval:
    """Record that ``by`` approved ``pack_id`` as it reads now; only a ready pack can be
    approved."""
    root, now = Path(root), now or times.now()
    name = " ".join(by.split())
    if not name:
        raise InputError(None, "--by", "empty approver", "give the name of the person approving")
    assessed = _assess_all(
        root, [pack_id], now=now, window=window, max_code_lines=DEFAULT_MAX_CODE_LINES
    )[0]
    loaded = _ready_or_raise(assessed, "approve", ignore=("approval",))
    approval = Approval(by=name, at=times.format_utc(now), digest=loaded.digest)
    _update_state(root, lambda state: state.approve(pack_id, approval))
    return approval


def record_filing(
    root: str | Path, pack_id: str, url: str, *, now: _dt.datetime | None = None
) -> Filing:
    """Record that a human filed ``pack_id`` at ``url`` (in the target repository)."""
    root = Path(root)
    loaded = load_pack(root, pack_id)
    spec = loaded.pack.spec
    if spec.already_fixed:
        raise InputError(
            None, None, f"{pack_id}: already fixed upstream — regression coverage is not filed"
        )
    state = load_state(root)
    if state.record(pack_id).approval is None:
        raise InputError(
            None,
            None,
            f"{pack_id}: never approved — a filing must pass the human gate first",
            f"run `patchlane pack approve {pack_id} --by NAME`",
        )
    found = github_repository(url)
    if found is None or found.lower() != spec.repository.lower() or not url.startswith("https://"):
        raise InputError(
            None,
            "--url",
            f"{url!r} is not in {spec.repository}",
            f"give the https://github.com/{spec.repository}/… URL of the issue, PR or comment",
        )
    filing = Filing(url=url, at=times.format_utc(now or times.now()), repository=spec.repository)
    _update_state(root, lambda s: s.file(pack_id, filing))
    return filing
