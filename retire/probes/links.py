"""Issue and pull-request links: the web URL a manifest names, read into a :class:`LinkRef`,
and how a request to the code host's API is authenticated.

Both ways of asking the code host (:mod:`retire.probes.codehost` over REST,
:mod:`retire.probes.graphql` in batches) start here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_API_BASE",
    "DEFAULT_WEB_HOST",
    "TOKEN_VARIABLES",
    "LinkKind",
    "LinkRef",
    "auth_headers",
    "parse_link",
    "token_from_env",
]

#: The public GitHub REST API; override with ``api_base`` (GitHub Enterprise, tests).
DEFAULT_API_BASE = "https://api.github.com"
DEFAULT_WEB_HOST = "github.com"
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")
_PATH = re.compile(
    r"/(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)"
    r"/(?P<kind>pull|pulls|issues)/(?P<number>\d+)/?"
)

#: What a link names: a pull request (``/pull/N``, ``/pulls/N``) or an issue (``/issues/N``).
LinkKind = Literal["pull", "issue"]


@dataclass(frozen=True)
class LinkRef:
    url: str
    owner: str
    repo: str
    kind: LinkKind
    number: int

    @property
    def repository(self) -> str:
        return f"https://{DEFAULT_WEB_HOST}/{self.owner}/{self.repo}"

    def api_path(self) -> str:
        noun = "pulls" if self.kind == "pull" else "issues"
        return f"/repos/{self.owner}/{self.repo}/{noun}/{self.number}"


def parse_link(url: str, *, web_host: str = DEFAULT_WEB_HOST) -> LinkRef | None:
    """The issue / pull request a web URL names, or None if it is not one on ``web_host``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or parts.hostname != web_host:
        return None
    found = _PATH.fullmatch(parts.path)
    if not found:
        return None
    kind: LinkKind = "issue" if found["kind"] == "issues" else "pull"
    repo = found["repo"].removesuffix(".git")
    return LinkRef(url, found["owner"], repo, kind, int(found["number"]))


def token_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    return next((environ[name] for name in TOKEN_VARIABLES if environ.get(name)), None)


def auth_headers(token: str | None) -> dict[str, str]:
    headers = {"X-GitHub-Api-Version": "2022-11-28"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers
