"""uv's index credentials, handed over outside its environment.

A host gives uv credentials for a named index as ``UV_INDEX_<NAME>_USERNAME`` /
``UV_INDEX_<NAME>_PASSWORD``. Passed on as variables they sit in uv's environment block, which
any process of the same user may read through ``/proc/<pid>/environ`` — under ``run --jobs 2``,
the other lane's reproducer while this lane's ``uv pip sync`` runs. So uv never gets them as
variables: each call gets a netrc (``machine <host> login <user> password <password>``, the
host's own netrc after it) in an anonymous memory file (``memfd``) that exists only while that
call runs, is on no file system, and is named to uv as ``NETRC=/dev/fd/<n>``, a descriptor only
uv and what it starts hold. :func:`handed` is the one way :mod:`retire.core.uv` starts uv with
them.

A credential whose index has no URL on this host (``UV_INDEX``, uv.toml, the call's own
``--config-file`` or ``--index NAME=URL``) is left out: uv could not have used it either. Off
Linux (no ``memfd``) uv gets the variables as before.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "CREDENTIAL",
    "Handed",
    "IndexCredential",
    "call_indexes",
    "credentials",
    "handed",
    "netrc_text",
]

#: The variables uv reads an index's credentials from.
CREDENTIAL = re.compile(r"UV_INDEX_([A-Z0-9_]+)_(USERNAME|PASSWORD)")


@dataclass(frozen=True)
class IndexCredential:
    """What a host gives uv for one named index."""

    # the index name as the variables spell it (upper case, ``-`` as ``_``)
    index: str
    username: str
    password: str


@dataclass(frozen=True)
class Handed:
    """How one uv call gets its credentials: variables to add, descriptors to pass."""

    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()


def credentials(environ: Mapping[str, str]) -> tuple[IndexCredential, ...]:
    """Every index credential in ``environ``, by index name."""
    found: dict[str, dict[str, str]] = {}
    for name, value in environ.items():
        match = CREDENTIAL.fullmatch(name)
        if match:
            found.setdefault(match[1], {})[match[2]] = value
    return tuple(
        IndexCredential(index, parts.get("USERNAME", ""), parts.get("PASSWORD", ""))
        for index, parts in sorted(found.items())
    )


def _variable_name(index: str) -> str:
    # uv's spelling of an index name in a variable
    return re.sub(r"[^A-Z0-9]", "_", index.upper())


def _config_indexes(path: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    # the call fails on it itself, with uv's own message
    except (OSError, ValueError, RecursionError):
        return {}
    tables = data.get("index", [])
    return {
        table["name"]: table["url"]
        for table in (tables if isinstance(tables, list) else [])
        if isinstance(table, dict)
        and isinstance(table.get("name"), str)
        and isinstance(table.get("url"), str)
    }


def call_indexes(args: Sequence[str], cwd: str | os.PathLike[str] | None) -> dict[str, str]:
    """Index name → URL that one uv command line names (``--config-file``, ``--index N=URL``)."""
    named: dict[str, str] = {}
    for flag, value in itertools.pairwise(args):
        if flag == "--config-file":
            named.update(_config_indexes(Path(cwd or ".", value)))
        elif flag == "--index" and "=" in value:
            name, _, url = value.partition("=")
            named.setdefault(name, url)
    return named


def _token(text: str) -> str:
    """A netrc token: quoted when it holds a space, a quote or a backslash (uv's parser reads
    quotes and escapes)."""
    if text and not re.search(r'[\s"\\]', text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def netrc_text(
    given: Sequence[IndexCredential], indexes: Mapping[str, str], existing: str = ""
) -> str:
    """A netrc with one ``machine`` per index host that has a credential, ``existing`` after
    it (the first entry for a host wins)."""
    by_variable = {_variable_name(name): url for name, url in indexes.items()}
    lines = []
    hosts: set[str] = set()
    for credential in given:
        url = by_variable.get(credential.index)
        host = urlsplit(url).hostname if url else None
        if not host or host in hosts:
            continue
        hosts.add(host)
        login = f" login {_token(credential.username)}" if credential.username else ""
        lines.append(f"machine {host}{login} password {_token(credential.password)}\n")
    return "".join(lines) + existing


def _existing_netrc(environ: Mapping[str, str]) -> str:
    """The host's own netrc (``NETRC``, else ``~/.netrc``), which uv would have read."""
    path = environ.get("NETRC") or os.path.join(environ.get("HOME", "~"), ".netrc")
    try:
        text = Path(os.path.expanduser(path)).read_text(encoding="utf-8")
    # none, or one uv could not read either
    except (OSError, UnicodeDecodeError):
        return ""
    return text if text.endswith("\n") or not text else text + "\n"


@contextlib.contextmanager
def handed(
    environ: Mapping[str, str], indexes: Callable[[], Mapping[str, str]]
) -> Iterator[Handed]:
    """For one uv call: the netrc descriptor (closed when the call is over) and ``NETRC`` naming
    it; nothing when ``environ`` holds no credential. ``indexes`` gives index name → URL (asked
    only when there is a credential)."""
    given = credentials(environ)
    if not given:
        yield Handed({})
        return
    text = netrc_text(given, indexes(), _existing_netrc(environ))
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is None:
        yield Handed({name: value for name, value in environ.items() if CREDENTIAL.fullmatch(name)})
        return
    # close-on-exec: only the uv call it is passed to (pass_fds) gets it, never a process
    # another thread starts meanwhile
    descriptor = memfd_create("patchlane-netrc", os.MFD_CLOEXEC)
    try:
        os.write(descriptor, text.encode("utf-8"))
        yield Handed({"NETRC": f"/dev/fd/{descriptor}"}, (descriptor,))
    finally:
        os.close(descriptor)
