"""Upstream packs, the model: what ``shims/<id>/pack.toml`` says and the body rendered from it.

A pack is one upstream submission prepared from a shim (seed 002, "What goes into a submission
pack"): a Markdown body rendered from the shim's manifest through a template per category, the
reproducer attached as a file with the single documented command that runs it against a named
upstream version or SHA, and the upstream-state field. Pack metadata lives next to the shim in
``pack.toml`` because the manifest format belongs to the shim runtime. No I/O here.
"""

from __future__ import annotations

import datetime as _dt
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from retire.core.errors import ConfigError

__all__ = [
    "CATEGORIES",
    "KINDS",
    "PRIORITIES",
    "UPSTREAM_STATES",
    "Pack",
    "PackSpec",
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
UPSTREAM_STATES = ("new-report", "overlap", "already-fixed")

_REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_PINNED_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][0-9A-Za-z.+!-]*")
_PINNED_SHA = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+@[0-9a-f]{7,40}")
GITHUB_HOST = "github.com"


@dataclass(frozen=True)
class UpstreamState:
    """What a search of the target project found before filing (seed: the upstream-state field)."""

    state: str | None  # one of UPSTREAM_STATES; None when not filled yet (the check says so)
    searched: _dt.date | None = None  # when the target's issues and pull requests were searched
    thread: str | None = None  # overlap: the thread to comment on; already-fixed: the fix
    fixed_in: str | None = None  # already-fixed: the release that carries the fix, if known


@dataclass(frozen=True)
class PackSpec:
    """``shims/<id>/pack.toml``: where the pack goes and how its reproducer is run."""

    shim: str
    category: str
    repository: str  # "owner/repo" on GitHub
    kind: str  # issue | pr
    priority: str  # one of PRIORITIES
    upstream: UpstreamState
    against: str  # the named upstream version or SHA: "dist==1.2" or "owner/repo@<sha>"
    command: str  # the single documented command that runs the attached reproducer
    path: Path = Path("pack.toml")

    @property
    def already_fixed(self) -> bool:
        return self.upstream.state == "already-fixed"

    @property
    def is_comment(self) -> bool:
        """Overlap: the pack is a comment on an existing thread, never a competing PR."""
        return self.upstream.state == "overlap"

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
    reproducer_name: str  # the attached file's name (the shim's reproducer file name)

    @property
    def id(self) -> str:
        return self.spec.shim


def github_repository(url: str) -> str | None:
    """``owner/repo`` of a github.com web URL, or None when the URL is not on github.com."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or (parts.hostname or "").lower() != GITHUB_HOST:
        return None
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        return None
    return f"{segments[0]}/{segments[1].removesuffix('.git')}"


def pinned_ref(against: str) -> bool:
    """Whether ``against`` names an exact release (``dist==1.2``) or a commit (``owner/repo@sha``)."""
    return bool(_PINNED_VERSION.fullmatch(against) or _PINNED_SHA.fullmatch(against))


def parse_pack_spec(text: str, path: str | Path, shim: str) -> PackSpec:
    """Validate ``pack.toml`` text for shim ``shim``; every problem is a one-line ConfigError.

    A missing ``[upstream-state] state`` is allowed here (the pack still renders) and reported
    by the readiness check, which is where "fill the upstream-state field" belongs.
    """
    path = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, None, f"invalid TOML: {exc}", "fix the syntax") from None
    parser = _Parser(path)
    parser.keys(data, "", ("category", "repository", "kind", "priority", "upstream-state", "reproducer"))
    category = parser.choice(data, "", "category", tuple(CATEGORIES))
    repository = parser.string(data, "", "repository")
    if not _REPOSITORY.fullmatch(repository):
        raise ConfigError(path, "repository", f"not an owner/repo name: {repository!r}", 'write it like "NVIDIA/Megatron-LM"')
    kind = parser.choice(data, "", "kind", KINDS)
    priority = parser.choice(data, "", "priority", PRIORITIES)
    upstream = parser.upstream(data.get("upstream-state", {}))
    reproducer = parser.table(data.get("reproducer"), "reproducer")
    parser.keys(reproducer, "reproducer", ("against", "command"))
    against = parser.string(reproducer, "reproducer", "against")
    command = parser.string(reproducer, "reproducer", "command")
    if "\n" in command.strip():
        raise ConfigError(path, "reproducer.command", "spans several lines", "document one command on one line")
    return PackSpec(
        shim=shim, category=category, repository=repository, kind=kind, priority=priority,
        upstream=upstream, against=against.strip(), command=command.strip(), path=path,
    )


class _Parser:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(self.path, key or None, problem, fix)

    def table(self, value: object, key: str) -> Mapping[str, object]:
        if value is None:
            raise self.fail(key, "missing", f"add a [{key}] table")
        if not isinstance(value, dict):
            raise self.fail(key, "expected a table", f"write [{key}]")
        return value

    def keys(self, table: Mapping[str, object], key: str, allowed: tuple[str, ...]) -> None:
        import difflib

        for name in table:
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.7)
                fix = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(allowed)}"
                raise self.fail(f"{key}.{name}" if key else name, f"unknown key {name!r}", fix)

    def string(self, table: Mapping[str, object], key: str, name: str, *, required: bool = True) -> str:
        where = f"{key}.{name}" if key else name
        if name not in table:
            if required:
                raise self.fail(where, "missing", f'add {name} = "…"')
            return ""
        value = table[name]
        if not isinstance(value, str):
            raise self.fail(where, f"expected a string, got {type(value).__name__}", "quote it")
        if not value.strip():
            raise self.fail(where, "is empty", "fill it in or remove the key")
        return value

    def choice(self, table: Mapping[str, object], key: str, name: str, choices: tuple[str, ...]) -> str:
        value = self.string(table, key, name)
        if value not in choices:
            raise self.fail(f"{key}.{name}" if key else name, f"unknown {name} {value!r}", f"use one of {', '.join(choices)}")
        return value

    def upstream(self, value: object) -> UpstreamState:
        if not isinstance(value, dict):
            raise self.fail("upstream-state", "expected a table", "write [upstream-state]")
        self.keys(value, "upstream-state", ("state", "searched", "thread", "fixed-in"))
        state = self.choice(value, "upstream-state", "state", UPSTREAM_STATES) if "state" in value else None
        searched = value.get("searched")
        if searched is not None and (not isinstance(searched, _dt.date) or isinstance(searched, _dt.datetime)):
            raise self.fail("upstream-state.searched", "expected a date", "write an unquoted date like 2026-11-22")
        thread = self.string(value, "upstream-state", "thread", required=False) or None
        if thread is not None and github_repository(thread) is None:
            raise self.fail("upstream-state.thread", f"not a github.com URL: {thread!r}", "link the issue or pull request on github.com")
        fixed_in = self.string(value, "upstream-state", "fixed-in", required=False) or None
        if state == "overlap" and thread is None:
            raise self.fail("upstream-state.thread", "an overlap needs the thread it overlaps",
                            'add thread = "https://github.com/<owner>/<repo>/pull/<n>" (the pack becomes a comment there)')
        if state == "already-fixed" and thread is None and fixed_in is None:
            raise self.fail("upstream-state", "already-fixed needs the fix: a thread or a release",
                            'add thread = "<the fixing PR>" or fixed-in = "<dist> <version>"')
        if state == "new-report" and thread is not None:
            raise self.fail("upstream-state.thread", "a new report has no existing thread",
                            'set state = "overlap" (comment there) or drop thread')
        return UpstreamState(state=state, searched=searched, thread=thread, fixed_in=fixed_in)
