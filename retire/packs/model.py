"""Upstream packs, the model: what ``shims/<id>/pack.toml`` says and the body rendered from it.

A pack is one upstream submission prepared from a shim (seed 002, "What goes into a submission
pack"): a Markdown body rendered from the shim's manifest through a template per category, the
reproducer attached as a file with the single documented command that runs it against a named
upstream version or SHA, and the upstream-state field. Pack metadata lives next to the shim in
``pack.toml`` because the manifest format belongs to the shim runtime. No I/O here.
"""

from __future__ import annotations

import datetime as _dt
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from shims import tomlreader
from shims.tomlreader import Table

__all__ = [
    "CATEGORIES",
    "KINDS",
    "PRIORITIES",
    "UPSTREAM_STATES",
    "Pack",
    "PackSpec",
    "Searched",
    "UpstreamState",
    "github_repository",
    "parse_pack_spec",
    "pinned_ref",
]

#: The seed's seven categories: slug -> heading used in bodies and reports.
CATEGORIES: Mapping[str, str] = {
    "graph-capture": "CUDA-graph capture safety",
    "tensor-wrapper-dispatch": "Tensor-wrapper dispatch hazard",
    "kernel-numerics": "Kernel numerics and dimensions",
    "memory-footprint": "Memory footprint",
    "integration-gap": "Integration / dispatcher gap",
    "toolchain-bug": "Toolchain / compiler bug",
    "legality-refactor": "Legality-preserving refactor",
}
KINDS = ("issue", "pr")
#: The seed's filing priority, first to last: crash-in-training defensive fixes, comments on open
#: upstream threads, larger refactors, reports without a fix.
PRIORITIES = ("crash-fix", "thread-comment", "refactor", "report")


class Searched(enum.StrEnum):
    """What a search of the target project found before filing (pack.toml's
    ``[upstream-state] state``)."""

    # nothing upstream: the pack is an issue or a PR
    NEW_REPORT = "new-report"
    # an open thread covers it: the pack is a comment there, never a competing PR
    OVERLAP = "overlap"
    # fixed upstream: kept as regression coverage, not filed
    ALREADY_FIXED = "already-fixed"


UPSTREAM_STATES = tuple(Searched)

_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_PINNED_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][0-9A-Za-z.+!-]*")
_PINNED_SHA = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+@[0-9a-f]{7,40}")
GITHUB_HOST = "github.com"


@dataclass(frozen=True)
class UpstreamState:
    """What a search of the target project found before filing (seed: the upstream-state field)."""

    # None when not filled yet (the check says so)
    state: Searched | None
    # when the target's issues and pull requests were searched
    searched: _dt.date | None = None
    # overlap: the thread to comment on; already-fixed: the fix
    thread: str | None = None
    # already-fixed: the release that carries the fix, if known
    fixed_in: str | None = None

    def __post_init__(self) -> None:
        if self.state is not None:
            object.__setattr__(self, "state", Searched(self.state))


@dataclass(frozen=True)
class PackSpec:
    """``shims/<id>/pack.toml``: where the pack goes and how its reproducer is run."""

    shim: str
    category: str
    # "owner/repo" on GitHub
    repository: str
    # issue | pr
    kind: str
    # one of PRIORITIES
    priority: str
    upstream: UpstreamState
    # the named upstream version or SHA: "dist==1.2" or "owner/repo@<sha>"
    against: str
    # the single documented command that runs the attached reproducer
    command: str
    path: Path = Path("pack.toml")

    @property
    def already_fixed(self) -> bool:
        return self.upstream.state == Searched.ALREADY_FIXED

    @property
    def is_comment(self) -> bool:
        """Overlap: the pack is a comment on an existing thread, never a competing PR."""
        return self.upstream.state == Searched.OVERLAP

    @property
    def body_name(self) -> str:
        if self.is_comment:
            return "COMMENT.md"
        return "PR.md" if self.kind == "pr" else "ISSUE.md"


@dataclass(frozen=True)
class Pack:
    """A rendered pack: the spec, the shim it comes from, and the body ready for GitHub."""

    spec: PackSpec
    title: str
    body: str
    # the attached file's name (the shim's reproducer file name)
    reproducer_name: str

    @property
    def id(self) -> str:
        return self.spec.shim


def github_repository(url: str) -> str | None:
    """``owner/repo`` of a github.com web URL, or None when the URL is not on github.com."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    # not a URL at all (an unclosed [IPv6] host, a bad port)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or host != GITHUB_HOST:
        return None
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        return None
    return f"{segments[0]}/{segments[1].removesuffix('.git')}"


def pinned_ref(against: str) -> bool:
    """Whether ``against`` names an exact release (``dist==1.2``) or a commit
    (``owner/repo@sha``)."""
    return bool(_PINNED_VERSION.fullmatch(against) or _PINNED_SHA.fullmatch(against))


def parse_pack_spec(text: str, path: str | Path, shim: str) -> PackSpec:
    """Validate ``pack.toml`` text for shim ``shim``; every problem is a one-line InputError.

    A missing ``[upstream-state] state`` is allowed here (the pack still renders) and reported
    by the readiness check, which is where "fill the upstream-state field" belongs.
    """
    path = Path(path)
    doc = tomlreader.loads(text, str(path))
    doc.check_keys(("category", "repository", "kind", "priority", "upstream-state", "reproducer"))
    category = doc.choice("category", tuple(CATEGORIES))
    repository = doc.string("repository")
    if not _REPOSITORY.fullmatch(repository):
        raise doc.error(
            "repository",
            f"not an owner/repo name: {repository!r}",
            'write it like "NVIDIA/Megatron-LM"',
        )
    kind = doc.choice("kind", KINDS)
    priority = doc.choice("priority", PRIORITIES)
    section = doc.get("upstream-state")
    upstream = _upstream(section.table()) if section is not None else UpstreamState(None)
    reproducer = doc.table("reproducer").check_keys(("against", "command"))
    against = reproducer.string("against")
    command = reproducer.string("command")
    if "\n" in command.strip():
        raise reproducer.error("command", "spans several lines", "document one command on one line")
    return PackSpec(
        shim=shim,
        category=category,
        repository=repository,
        kind=kind,
        priority=priority,
        upstream=upstream,
        against=against.strip(),
        command=command.strip(),
        path=path,
    )


def _upstream(table: Table) -> UpstreamState:
    table.check_keys(("state", "searched", "thread", "fixed-in"))
    chosen = table.choice("state", UPSTREAM_STATES, None)
    state = Searched(chosen) if chosen is not None else None
    searched = table.get("searched")
    searched_on = (
        searched.date(fix="write an unquoted date like 2026-11-22")
        if searched is not None
        else None
    )
    thread = table.string("thread", None)
    if thread is not None and github_repository(thread) is None:
        raise table.error(
            "thread",
            f"not a github.com URL: {thread!r}",
            "link the issue or pull request on github.com",
        )
    fixed_in = table.string("fixed-in", None)
    if state == Searched.OVERLAP and thread is None:
        raise table.error(
            "thread",
            "an overlap needs the thread it overlaps",
            'add thread = "https://github.com/<owner>/<repo>/pull/<n>" (the pack becomes a comment '
            "there)",
        )
    if state == Searched.ALREADY_FIXED and thread is None and fixed_in is None:
        raise table.error(
            None,
            "already-fixed needs the fix: a thread or a release",
            'add thread = "<the fixing PR>" or fixed-in = "<dist> <version>"',
        )
    if state == Searched.NEW_REPORT and thread is not None:
        raise table.error(
            "thread",
            "a new report has no existing thread",
            'set state = "overlap" (comment there) or drop thread',
        )
    return UpstreamState(state=state, searched=searched_on, thread=thread, fixed_in=fixed_in)
