"""``patchlane pack export``: an approved pack as files for a human to post, nothing filed.

The folder gets the body (``ISSUE.md``, ``PR.md`` or ``COMMENT.md``), the reproducer under its own
name, the protocol helper it imports and a README. Each file has its own name: a reproducer named
like the README or the body is refused, never overwritten; a link already in the folder is
refused, never written through.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from retire.core import mdsafe
from retire.core.atomic import atomic_write
from retire.core.errors import InputError
from retire.core.project import boundary, contained
from retire.packs.checks import DEFAULT_MAX_CODE_LINES, DEFAULT_WINDOW
from retire.packs.store import (
    LoadedPack,
    PackStatus,
    QueueEntry,
    _assess_all,
    _display,
    _ready_or_raise,
)

__all__ = ["export"]


def export(
    root: str | Path,
    pack_id: str,
    destination: str | Path,
    *,
    now: _dt.datetime | None = None,
    window: _dt.timedelta = DEFAULT_WINDOW,
) -> list[Path]:
    """Write an approved, still-ready pack for a human to post; returns the files written.

    ``<BODY>.md`` (ISSUE.md, PR.md or COMMENT.md), the reproducer, the reproducer protocol helper
    it imports (``shims/reproducer.py``, standard library only) and a README with the command.
    """
    root = Path(root)
    assessed = _assess_all(
        root, [pack_id], now=now, window=window, max_code_lines=DEFAULT_MAX_CODE_LINES
    )[0]
    if (
        assessed.loaded is not None
        and assessed.entry.status in (PackStatus.READY, PackStatus.BLOCKED)
        and assessed.entry.approved_by is None
    ):
        raise InputError(
            None,
            None,
            f"{pack_id}: not approved — nothing is exported before a human approves it",
            f"run `patchlane pack approve {pack_id} --by NAME` once it is ready",
        )
    loaded = _ready_or_raise(assessed, "export")
    if assessed.entry.status != PackStatus.APPROVED:
        raise InputError(
            None,
            None,
            f"{pack_id}: not approved",
            f"run `patchlane pack approve {pack_id} --by NAME`",
        )
    pack, spec = loaded.pack, loaded.pack.spec
    destination = Path(destination)
    if destination.exists() and not destination.is_dir():
        raise InputError(destination, None, "exists and is not a folder", "choose a folder")
    import shims.reproducer

    helper = Path(shims.reproducer.__file__)
    files = [
        (spec.body_name, pack.body),
        (pack.reproducer_name, loaded.reproducer_text or ""),
        ("README.md", _readme(loaded, assessed.entry)),
    ]
    if "from shims import reproducer" in (loaded.reproducer_text or "") and helper.is_file():
        files.append(
            (
                "shims/__init__.py",
                '"""The reproducer protocol helper only (host stamp, sentinels, exit codes)."""\n',
            )
        )
        files.append(("shims/reproducer.py", helper.read_text(encoding="utf-8")))
    _no_collisions(root, loaded, [name for name, _ in files])
    written = []
    for name, text in files:
        # a link already there is refused, never written through (nor one on the way inside
        # the project)
        target = contained(destination, name)
        atomic_write(target, text, within=boundary(root, destination.absolute()))
        written.append(target)
    return written


def _no_collisions(root: Path, loaded: LoadedPack, names: list[str]) -> None:
    """Every exported file gets its own name (case-insensitively: macOS and Windows folders), so the
    README or the body never replaces the attached reproducer."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.casefold(), name)
        if other is not name:
            raise InputError(
                _display(root, loaded.manifest.directory / "manifest.toml"),
                "reproducer.path",
                f"the reproducer's file name {loaded.pack.reproducer_name!r} is also the exported "
                f"{other!r}",
                "rename the reproducer, e.g. reproduce.py",
            )


def _readme(loaded: LoadedPack, entry: QueueEntry) -> str:
    spec, pack = loaded.pack.spec, loaded.pack
    if spec.is_comment:
        where = (
            f"Post `{spec.body_name}` as a comment on {spec.upstream.thread} — do not open a "
            f"competing pull request."
        )
    elif spec.kind == "pr":
        where = (
            f"Open a pull request against https://github.com/{spec.repository}: title = the first "
            f"line of "
            f"`{spec.body_name}` without the `# `, description = the rest."
        )
    else:
        where = (
            f"Open an issue at https://github.com/{spec.repository}/issues/new: title = the first "
            f"line of "
            f"`{spec.body_name}` without the `# `, body = the rest."
        )
    formatter = (
        "\n- [ ] NVIDIA/Megatron-LM: run the project's required formatter on the diff before "
        "attaching it."
        if spec.repository.lower() == "nvidia/megatron-lm" and spec.kind == "pr"
        else ""
    )
    approved = f"{mdsafe.text(entry.approved_by)} on {mdsafe.text(entry.approved_at)}"
    return f"""# Pack `{pack.id}`: {pack.title}

Approved by {approved}. Nothing here was filed automatically.

{where}

Attach `{pack.reproducer_name}` as a file or a gist (with `shims/` if present: the protocol
helper it imports). Run it against `{spec.against}` with:

{mdsafe.fence(spec.command, "sh")}

Before posting:

- [ ] the reproducer printed `BUG_REPRODUCED` today on a host you can name;
- [ ] the body reads cleanly in GitHub's preview (fences, tables, no non-public links);{formatter}
- [ ] after posting: `patchlane pack filed {pack.id} --url <the issue, PR or comment URL>`.
"""
