"""Where a shop's patchlane comes from (``patchlane init --from``), and what each file ``init``
writes says about it: the install line of the workflows and the README, the pre-commit hooks'
``repo:``/``rev:``, and the GitHub Action's ``uses:``.

Three kinds of source:

- ``git``: ``git+URL@REF`` (a tag, a branch, a commit; ``git+file:///path@REF`` for a local
  clone). The hooks are that repository's at ``REF``; on ``https://github.com/OWNER/REPO`` the
  Action is ``OWNER/REPO@REF``.
- ``index``: a requirement on patchlane from the shop's package index
  (``patchlane[engine]==0.1.0``). The hooks are ``repo: local`` hooks that pip installs the same
  requirement for.
- ``path``: a built wheel, an sdist or a checkout on this machine. Named by ``file://`` URL; a path
  inside the project reaches CI as ``$GITHUB_WORKSPACE/…``, a path outside it reaches no CI runner
  and no other clone (``init`` says so).

Only ``git`` on github.com gives an Action; otherwise the workflows run the engine's commands
themselves (or use ``--action OWNER/REPO@REF``, which also works alone, as a github.com source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from retire.core.errors import InputError

__all__ = [
    "PIP_FOR_GIT_FILE",
    "Source",
    "SourceKind",
    "from_ci_engine",
    "installed_source",
    "parse_action",
    "parse_source",
    "pip_note",
]

_NAME = "patchlane"
_ACTION = re.compile(r"(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@(?P<ref>[A-Za-z0-9_./-]+)")
_GITHUB_REPO = re.compile(r"/(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?")
_REF = re.compile(r"[A-Za-z0-9_./+-]+")
# what a git URL may hold: RFC 3986's characters without `$` (the workflows quote it for the shell)
_UNSAFE = re.compile(r"[^A-Za-z0-9._~:/?\[\]@!&'()*+,;=%-]")
_FIX = (
    'name an index requirement ("patchlane[engine]==0.1.0"), a git URL and a ref '
    "(git+https://HOST/OWNER/patchlane@v0.1.0), or a wheel or checkout on this machine"
)


class SourceKind(StrEnum):
    INDEX = "index"
    GIT = "git"
    PATH = "path"


@dataclass(frozen=True)
class Source:
    """One place patchlane installs from, as each written file names it."""

    kind: SourceKind
    # the engine as pip installs it here: 'patchlane[engine]==0.1.0', 'patchlane[engine] @ URL'
    engine: str
    # the runtime alone (no extra), for a training image
    runtime: str
    # the engine as a CI runner installs it (a path inside the project: under $GITHUB_WORKSPACE)
    ci_engine: str
    # git: the hook repository (the URL without git+ and @REF) and its ref
    repository: str | None = None
    rev: str | None = None
    # git on github.com: OWNER/REPO@REF, the Action's `uses:`
    action: str | None = None
    # the path that CI runners and other clones cannot install from ("" when they can)
    local_only: str = ""
    # a wheel or checkout inside the project: its path relative to the project, which every
    # clone has (the README and the hooks name it so, never this machine's absolute path)
    inside: str = ""

    @property
    def shared_engine(self) -> str:
        """The engine as a person installs it in any clone (relative, for a path inside)."""
        return f"./{self.inside}[engine]" if self.inside else self.engine

    @property
    def shared_runtime(self) -> str:
        """The runtime alone, as a person installs it in any clone."""
        return f"./{self.inside}" if self.inside else self.runtime

    @property
    def home(self) -> str:
        """A link for people: the repository's web address, when it is one."""
        if self.repository and self.repository.startswith("https://"):
            return self.repository
        return ""


def parse_action(text: str) -> tuple[str, str]:
    """``(OWNER/REPO, REF)`` of ``--action``; InputError when it is not ``owner/repo@ref``."""
    match = _ACTION.fullmatch(text)
    if match is None:
        raise InputError(
            None,
            "--action",
            f"{text!r} is not owner/repo@ref",
            "write it like OWNER/patchlane@v0.1.0",
        )
    return match["repo"], match["ref"]


def parse_source(text: str, root: Path, *, base: Path | None = None) -> Source:
    """The source ``--from TEXT`` names; ``root`` is the project (a path inside it reaches CI),
    ``base`` the folder a relative path is read from (default: the working folder)."""
    text = text.strip()
    if text.startswith("git+"):
        return _git(text)
    if "://" in text and not text.startswith("file://"):
        raise InputError(None, "--from", f"{text!r} is a URL but not a git URL", _FIX)
    looks_like_path = (
        text.startswith(("file://", ".", "/", "~"))
        or "/" in text
        or text.endswith((".whl", ".tar.gz"))
    )
    if looks_like_path:
        path = Path(urlsplit(text).path if text.startswith("file://") else text).expanduser()
        return _path(path if path.is_absolute() else (base or Path.cwd()) / path, root)
    return _index(text)


def _requirement(extras: str, at: str | None = None, specifier: str = "") -> str:
    name = f"{_NAME}[{extras}]" if extras else _NAME
    return f"{name} @ {at}" if at else f"{name}{specifier}"


def _git(text: str) -> Source:
    if unsafe := sorted(set(_UNSAFE.findall(text))):
        raise InputError(
            None,
            "--from",
            f"{text!r} has characters a URL does not ({' '.join(map(repr, unsafe))})",
            "percent-encode them (a space is %20), as the workflows, hooks and README need",
        )
    url = text.removeprefix("git+")
    parts = urlsplit(url)
    location, at, ref = parts.path.rpartition("@")
    if not at or not location or not _REF.fullmatch(ref) or parts.query or parts.fragment:
        raise InputError(
            None,
            "--from",
            f"{text!r} names no ref",
            "add the tag, branch or commit after @: git+https://HOST/OWNER/patchlane@v0.1.0",
        )
    repository = parts._replace(path=location).geturl()
    found = _GITHUB_REPO.fullmatch(location) if parts.netloc.lower() == "github.com" else None
    action = f"{found['repo']}@{ref}" if found and parts.scheme == "https" else None
    engine = _requirement("engine", text)
    return Source(
        SourceKind.GIT,
        engine,
        _requirement("", text),
        engine,
        repository=repository,
        rev=ref,
        action=action,
        # a clone on this machine: no runner and no other clone has that path
        local_only=unquote(location) if parts.scheme.lower() == "file" else "",
    )


def _index(text: str) -> Source:
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise InputError(None, "--from", f"{text!r} is not a requirement ({exc})", _FIX) from None
    if canonicalize_name(requirement.name) != _NAME or requirement.url or requirement.marker:
        raise InputError(None, "--from", f"{text!r} is not a requirement on {_NAME}", _FIX)
    specifier = str(requirement.specifier)
    engine = _requirement("engine", specifier=specifier)
    return Source(SourceKind.INDEX, engine, _requirement("", specifier=specifier), engine)


def _path(path: Path, root: Path) -> Source:
    path = path.resolve()
    is_archive = path.is_file() and path.name.endswith((".whl", ".tar.gz"))
    is_checkout = path.is_dir() and (path / "pyproject.toml").is_file()
    if not (is_archive or is_checkout):
        raise InputError(str(path), "--from", "is no wheel, sdist or checkout of patchlane", _FIX)
    if is_archive and not re.match(rf"{_NAME}-[0-9]", path.name):
        raise InputError(str(path), "--from", f"is not a {_NAME} wheel or sdist", _FIX)
    engine = _requirement("engine", path.as_uri())
    project = root.resolve()
    if project in path.parents:
        inside = path.relative_to(project).as_posix()
        return Source(
            SourceKind.PATH,
            engine,
            _requirement("", path.as_uri()),
            # percent-encoded: a space, a quote, a `$` or `${{` in the path stays one URL, never
            # shell or a GitHub expression
            _requirement("engine", f"file://${{GITHUB_WORKSPACE}}/{quote(inside)}"),
            inside=inside,
        )
    return Source(
        SourceKind.PATH,
        engine,
        _requirement("", path.as_uri()),
        engine,
        local_only=str(path),
    )


#: The first pip that reads a ``git+file:///…`` URL (no host) with an extra: older ones (Python
#: 3.11's and 3.12's bundled 23.2) say "Invalid requirement"; ``git+file://localhost/…`` they read.
PIP_FOR_GIT_FILE = (24, 1)


def pip_note(source: Source, pip_version: str | None) -> str:
    """What to do when ``pip_version`` (this Python's pip) cannot install ``source`` as the
    README and the hooks name it; "" when it can (or there is no pip to ask)."""
    if source.kind != SourceKind.GIT or "@ git+file:///" not in source.engine or not pip_version:
        return ""
    try:
        found = tuple(int(part) for part in pip_version.split(".")[:2])
    except ValueError:
        return ""
    if found >= PIP_FOR_GIT_FILE:
        return ""
    wanted = ".".join(map(str, PIP_FOR_GIT_FILE))
    return (
        f"this Python's pip {pip_version} cannot install {source.engine!r} (pip {wanted} or later "
        "reads a git+file:/// URL with an extra): run `python -m pip install -U pip`, or name the "
        "clone git+file://localhost/…, which every pip reads"
    )


def installed_source(root: Path) -> Source:
    """Where the running patchlane came from (PEP 610's ``direct_url.json``): a git URL and the
    commit, a file or folder, else the index at this version."""
    import json
    from importlib import metadata

    try:
        distribution = metadata.distribution(_NAME)
    except metadata.PackageNotFoundError:
        return _index(_NAME)
    try:
        origin = json.loads(distribution.read_text("direct_url.json") or "null")
    except ValueError:
        origin = None
    if isinstance(origin, dict) and isinstance(origin.get("url"), str):
        vcs = origin.get("vcs_info")
        if isinstance(vcs, dict) and vcs.get("vcs") == "git":
            ref = vcs.get("requested_revision") or vcs.get("commit_id")
            if isinstance(ref, str) and _REF.fullmatch(ref):
                return _git(f"git+{origin['url']}@{ref}")
        elif origin["url"].startswith("file://"):
            return _path(Path(urlsplit(origin["url"]).path), root)
    return _index(f"{_NAME}=={distribution.version}")


_WORKSPACE = "file://${GITHUB_WORKSPACE}/"


def from_ci_engine(text: str, root: Path) -> Source:
    """The source whose CI install line is ``text`` (what ``init`` wrote in the workflows): read
    back for ``init --repoint``, without asking that the wheel still be there."""
    at = text.removeprefix(_requirement("engine") + " @ ")
    if at == text:
        return _index(text)
    if at.startswith("git+"):
        return _git(at)
    if at.startswith(_WORKSPACE):
        inside = unquote(at.removeprefix(_WORKSPACE))
        uri = (root.resolve() / inside).as_uri()
        return Source(
            SourceKind.PATH,
            _requirement("engine", uri),
            _requirement("", uri),
            text,
            inside=inside,
        )
    if at.startswith("file://"):
        path = Path(unquote(urlsplit(at).path))
        return Source(
            SourceKind.PATH,
            text,
            _requirement("", path.as_uri()),
            text,
            local_only=str(path),
        )
    raise InputError(None, "--repoint", f"{text!r} names no patchlane source init writes", _FIX)
