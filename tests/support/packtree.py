"""A throwaway patchlane project with toy shims that carry upstream packs.

Builds on :mod:`tests.support.shimtree` (the toy library and its shims): each pack gets a shim
folder whose manifest links to GitHub, a ``pack.toml``, and validation records, either from a
real run of the toy reproducer (:func:`record_real_run`) or written for a chosen date and host
(:func:`record`).
"""

from __future__ import annotations

import datetime as _dt
import textwrap
from pathlib import Path

from retire.evidence import validation
from retire.evidence.validation import ValidationRecord
from retire.runs.reproduce import run_reproducer
from shims.manifest import load_manifest
from tests.support import shimtree

DENY = """
[[deny]]
pattern = '(?i)\\b[a-z0-9-]+\\.corp\\b'
why = "an internal host name"

[[deny]]
literal = "Jane Roe"
why = "a person who is not a named author"
"""


def github_manifest(
    shim_id: str,
    repo: str = "toyorg/toylib",
    *,
    status: str = "submitted",
    title: str | None = None,
    explanation: str | None = None,
) -> str:
    text = shimtree.manifest_text(shim_id).replace(
        "https://example.org/toylib", f"https://github.com/{repo}"
    )
    text = text.replace('status = "submitted"', f'status = "{status}"')
    if status in ("pending", "not-applicable"):
        text = (
            text.split("[[upstream.links]]")[0] + "[retirement]" + text.split("[retirement]", 1)[1]
        )
    if title is not None:
        text = text.replace('title = "toylib add() subtracts"', f"title = {title!r}")
    if explanation is not None:
        text = text.replace(
            'explanation = "add() returns a - b in toylib 1.0."',
            f'explanation = """{explanation}"""',
        )
    return text


def pack_toml(
    *,
    repo: str = "toyorg/toylib",
    category: str = "kernel-numerics",
    kind: str = "issue",
    priority: str = "crash-fix",
    state: str | None = "new-report",
    thread: str | None = None,
    against: str = "toylib==1.0",
    command: str = "python reproduce.py --mode without",
    extra: str = "",
) -> str:
    lines = [
        f'category = "{category}"',
        f'repository = "{repo}"',
        f'kind = "{kind}"',
        f'priority = "{priority}"',
        extra,
        "",
        "[upstream-state]",
        "searched = 2026-11-20",
    ]
    if state is not None:
        lines.append(f'state = "{state}"')
    if thread is not None:
        lines.append(f'thread = "{thread}"')
    lines += ["", "[reproducer]", f'against = "{against}"', f'command = "{command}"', ""]
    return "\n".join(lines)


class PackProject:
    """``root/shims/<id>``, ``root/packs/deny.toml``, ``root/validation/manifest.jsonl``; toylib
    in ``site``."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.root = tmp_path / "project"
        self.shims = self.root / "shims"
        self.site = tmp_path / "site"
        self.shims.mkdir(parents=True)
        (self.root / "packs").mkdir()
        (self.root / "packs" / "deny.toml").write_text(DENY)
        shimtree.write_target(self.site)

    @property
    def manifest_path(self) -> Path:
        return self.root / "validation" / "manifest.jsonl"

    def add(
        self,
        shim_id: str,
        *,
        manifest: str | None = None,
        reproducer: str | None = shimtree.TOY_REPRODUCER,
        repo: str = "toyorg/toylib",
        **pack: object,
    ) -> Path:
        folder = shimtree.write_shim(
            self.shims,
            shim_id,
            manifest=manifest or github_manifest(shim_id, repo),
            reproducer=reproducer,
        )
        (folder / "pack.toml").write_text(pack_toml(repo=repo, **pack))  # type: ignore[arg-type]
        return folder

    def record_real_run(self, shim_id: str, mode: str = "without") -> ValidationRecord:
        """Run the toy reproducer for real and append its record."""
        manifest = load_manifest(self.shims / shim_id / "manifest.toml")
        env = shimtree.subprocess_env(self.tmp, self.shims, self.site)
        record = run_reproducer(manifest, mode, env=env, lane="toy", timeout=60)
        validation.append(self.manifest_path, [record])
        return record

    def record(
        self,
        shim_id: str,
        *,
        at: _dt.datetime,
        hostname: str = "gpu-host-1",
        outcome: str = "bug-reproduced",
        sentinel: str | None = "BUG_REPRODUCED",
        versions: dict | None = None,
        mode: str = "without",
        detail: str = "",
    ) -> ValidationRecord:
        record = ValidationRecord(
            shim=shim_id,
            mode=mode,
            lane="toy",
            host={"hostname": hostname, "gpu": None},
            versions=versions if versions is not None else {"toylib": "1.0"},
            sentinel=sentinel,
            outcome=outcome,
            exit_code={"bug-reproduced": 10, "skipped": 77, "fix-validated": 0}.get(outcome, 1),
            duration_s=0.1,
            started_at=at.astimezone(_dt.UTC).isoformat(timespec="microseconds"),
            detail=detail,
        )
        validation.append(self.manifest_path, [record])
        return record

    def cli(self, *args: str) -> int:
        from retire.commands import main

        return main(["pack", "--root", str(self.root), *args])


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip()
