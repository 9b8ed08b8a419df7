"""A throwaway project for retirement tests: shims with retirement conditions, lanes and locks,
recorded reproducer runs, and the loopback upstream they point at (index, code host, mirror)."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

from retire.evidence.validation import ValidationRecord, append

NOW = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
OUTCOME_SENTINEL = {
    "bug-reproduced": ("BUG_REPRODUCED", 10),
    "fix-validated": ("FIX_VALIDATED", 0),
    "skipped": ("SKIPPED", 77),
    "crashed": (None, 1),
    "timeout": (None, None),
}


def manifest_toml(
    shim_id: str,
    conditions: str,
    *,
    mode: str = "any",
    links: tuple[tuple[str, str], ...] = (),
    status: str | None = None,
    distribution: str = "toylib",
) -> str:
    """A valid manifest; ``conditions`` is the TOML of its ``[[retirement.conditions]]`` tables."""
    status = status or ("submitted" if links else "pending")
    link_tables = "".join(
        f'\n[[upstream.links]]\nrole = "{role}"\nurl = "{url}"\n' for role, url in links
    )
    return (
        textwrap.dedent(f'''\
        id = "{shim_id}"
        title = "toylib add() subtracts"
        fix-class = "version-floor"
        explanation = "add() returns a - b."
        numerics = "Exact."
        owner = "kernels@example.org"
        created = 2026-01-01

        [target]
        distribution = "{distribution}"
        module = "toylib"

        [upstream]
        status = "{status}"
        ''')
        + link_tables
        + f'\n[retirement]\nmode = "{mode}"\n'
        + textwrap.dedent(conditions)
        + '\n[reproducer]\npackages = ["toylib"]\n'
    )


class Project:
    """``root`` holds shims/, lanes/, locks/ and validation/ like a real patchlane project."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for folder in ("shims", "lanes", "locks", "validation"):
            (root / folder).mkdir(parents=True, exist_ok=True)

    @property
    def validation(self) -> Path:
        return self.root / "validation" / "manifest.jsonl"

    def shim(self, shim_id: str, conditions: str, **options) -> Path:
        folder = self.root / "shims" / shim_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.toml").write_text(manifest_toml(shim_id, conditions, **options))
        (folder / "reproduce.py").write_text("raise SystemExit(0)\n")
        return folder

    def lane(
        self,
        name: str,
        shims: list[str],
        *,
        index_url: str | None,
        packages: list[str] | None = ("toylib",),
    ) -> None:
        index = f'\n[lane.indexes.main]\nurl = "{index_url}"\ndefault = true\n' if index_url else ""
        shim_list = ", ".join(f'"{s}"' for s in shims)
        (self.root / "lanes" / f"{name}.toml").write_text(
            f'[lane]\npython = "3.12"\nplatform = "linux"\nrequirements = ["toylib"]\nshims = '
            f"[{shim_list}]\n{index}"
        )
        if packages is not None:
            lock = self.root / "locks" / name / "pylock.toml"
            lock.parent.mkdir(parents=True, exist_ok=True)
            lock.write_text(
                'lock-version = "1.0"\ncreated-by = "test"\n'
                + "".join(f'\n[[packages]]\nname = "{p}"\nversion = "1.0"\n' for p in packages)
            )

    def run(
        self,
        shim: str,
        outcome: str,
        version: str,
        *,
        lane: str = "cpu",
        host: str = "ci-1",
        when: str = "2026-06-01T00:00:00.000000+00:00",
        mode: str = "without",
        detail: str = "",
    ) -> ValidationRecord:
        sentinel, code = OUTCOME_SENTINEL[outcome]
        record = ValidationRecord(
            shim=shim,
            mode=mode,
            lane=lane,
            host={"hostname": host, "gpu": None},
            versions={"toylib": version},
            sentinel=sentinel,
            outcome=outcome,
            exit_code=code,
            duration_s=0.1,
            started_at=when,
            detail=detail,
        )
        append(self.validation, [record])
        return record

    def manifests(self):
        from shims.manifest import discover

        return discover(self.root / "shims")

    def lanes(self):
        from retire.lanes import lanefile

        return lanefile.load_lanes(self.root / "lanes", root=self.root)


VERSION_FLOOR = """
[[retirement.conditions]]
kind = "version-floor"
version = ">=1.2"
"""
REPRODUCER_CLEAN = """
[[retirement.conditions]]
kind = "reproducer-clean"
"""


def pr_released(url: str) -> str:
    return f'\n[[retirement.conditions]]\nkind = "pr-released"\nurl = "{url}"\n'


def commit_in_tag(repository: str, commit: str) -> str:
    return (
        f'\n[[retirement.conditions]]\nkind = "commit-in-tag"\nrepository = '
        f'"{repository}"\ncommit = "{commit}"\n'
    )
