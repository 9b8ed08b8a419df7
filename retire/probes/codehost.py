"""The code-host probe: state of issues and pull requests through the GitHub REST API.

Links in manifests are web URLs (``https://github.com/<owner>/<repo>/pull/<n>``); they are
mapped onto the REST API at ``api_base`` (the public API by default, configurable for GitHub
Enterprise or the loopback stand-in in tests). A token from ``GITHUB_TOKEN`` / ``GH_TOKEN`` is
sent when present and redacted from every failure text. Conditional requests (ETag), the
on-disk cache and rate-limit handling live in :mod:`retire.probes.http`; 304 answers do not
count against GitHub's rate limit, which is what makes a weekly run over every shim cheap.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from retire.core import times
from retire.evidence.values import IssueState, ProbeFailure, PullState
from retire.probes.http import Fetched, Fetcher

__all__ = ["DEFAULT_API_BASE", "DEFAULT_WEB_HOST", "LinkRef", "auth_headers", "parse_link", "probe_link", "token_from_env"]

#: The public GitHub REST API; override with ``api_base`` (GitHub Enterprise, tests).
DEFAULT_API_BASE = "https://api.github.com"
DEFAULT_WEB_HOST = "github.com"
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")
_PATH = re.compile(r"/(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)/(?P<kind>pull|pulls|issues)/(?P<number>\d+)/?")


@dataclass(frozen=True)
class LinkRef:
    url: str
    owner: str
    repo: str
    kind: str  # pull | issue
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
    kind = "issue" if found["kind"] == "issues" else "pull"
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


def _moment(value: object) -> _dt.datetime | None:
    """A time the API sent (``2026-02-01T10:00:00Z``), or None when absent or unreadable."""
    try:
        return times.parse(value) if value is not None else None
    except times.TimeError:
        return None


def probe_link(fetcher: Fetcher, url: str, *, api_base: str = DEFAULT_API_BASE, token: str | None = None,
               web_host: str = DEFAULT_WEB_HOST) -> PullState | IssueState | ProbeFailure:
    """The state of the issue or pull request at web ``url``; never raises."""
    ref = parse_link(url, web_host=web_host)
    if ref is None:
        return ProbeFailure("codehost", url, f"not an issue or pull request URL on {web_host}")
    api_url = api_base.rstrip("/") + ref.api_path()
    answer = fetcher.get_json(api_url, probe="codehost", headers=auth_headers(token),
                              accept="application/vnd.github+json")
    if isinstance(answer, ProbeFailure):
        return answer
    if isinstance(answer, Fetched):
        return ProbeFailure("codehost", url, f"{ref.kind} not found (HTTP {answer.status}): private, moved or mistyped",
                            attempts=answer.attempts)
    data, _ = answer
    if not isinstance(data, dict) or data.get("state") not in ("open", "closed"):
        return ProbeFailure("codehost", url, "unexpected API response: no open/closed 'state'")
    if ref.kind == "pull":
        merged_at = _moment(data.get("merged_at"))
        merged = bool(data.get("merged")) or merged_at is not None
        sha = data.get("merge_commit_sha")
        return PullState(
            url=url, number=ref.number, state=data["state"], merged=merged, merged_at=merged_at,
            merge_commit_sha=sha if (merged and isinstance(sha, str)) else None,
            updated_at=_moment(data.get("updated_at")), closed_at=_moment(data.get("closed_at")),
            title=str(data.get("title") or ""),
        )
    return IssueState(
        url=url, number=ref.number, state=data["state"],
        state_reason=data.get("state_reason") if isinstance(data.get("state_reason"), str) else None,
        updated_at=_moment(data.get("updated_at")), closed_at=_moment(data.get("closed_at")),
        title=str(data.get("title") or ""),
    )
