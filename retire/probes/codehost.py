"""The code-host probe: state of issues and pull requests on GitHub.

Links in manifests are web URLs (``https://github.com/<owner>/<repo>/pull/<n>``); they are
mapped onto the API at ``api_base`` (the public API by default, configurable for GitHub
Enterprise or the loopback stand-in in tests). :func:`probe_links` asks for many at once:

- **with a token**, through batched GraphQL queries, up to 100 links a request
  (:mod:`retire.probes.graphql`) — 100 shims cost one request, not 200; a batch that fails as a
  whole (an endpoint that is not there, a proxy that refuses POST) falls back to REST;
- **anonymously**, one REST request per link, concurrently, with conditional requests (ETag) and
  the on-disk cache of :mod:`retire.probes.http`: 304 answers do not count against GitHub's rate
  limit, which is what makes a weekly run over every shim cheap.

A token from ``GITHUB_TOKEN`` / ``GH_TOKEN`` is sent when present and redacted from every string
a probe returns (titles included: a server may echo it back). An answer of the wrong shape is a
failure that says what was wrong, never a guess.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

from retire.evidence.values import IssueState, ProbeFailure, PullState
from retire.probes.http import Fetched, Fetcher
from shims import times

__all__ = [
    "DEFAULT_API_BASE",
    "DEFAULT_WEB_HOST",
    "LinkRef",
    "auth_headers",
    "parse_link",
    "probe_link",
    "probe_links",
    "token_from_env",
]

#: The public GitHub REST API; override with ``api_base`` (GitHub Enterprise, tests).
DEFAULT_API_BASE = "https://api.github.com"
DEFAULT_WEB_HOST = "github.com"
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")
_PATH = re.compile(
    r"/(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)/(?P<kind>pull|pulls|issues)/(?P<number>\d+)/?"
)

LinkState = PullState | IssueState | ProbeFailure


@dataclass(frozen=True)
class LinkRef:
    url: str
    owner: str
    repo: str
    # pull | issue
    kind: str
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


# ---------------------------------------------------------------------------------------------
# The answer, checked: both APIs end here


class WrongShape(ValueError):
    """An answer that is not the object asked for; the message says what was wrong."""


def moment(data: Mapping[str, object], key: str) -> _dt.datetime | None:
    """A time the API sent (``2026-02-01T10:00:00Z``) or None when null; WrongShape when
    unreadable."""
    value = data.get(key)
    if value is None:
        return None
    try:
        return times.parse(value)
    except times.TimeError:
        raise WrongShape(f"{key} is {str(value)[:40]!r}, not a time") from None


def field(data: Mapping[str, object], key: str, kinds: tuple[type, ...], *, required: bool = False):
    """``data[key]`` when of one of ``kinds`` (or absent / null unless ``required``)."""
    value = data.get(key)
    if value is None and not required:
        return None
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        what = "missing" if key not in data else "null" if value is None else type(value).__name__
        raise WrongShape(f"{key} is {what}, not {' or '.join(k.__name__ for k in kinds)}")
    return value


def state_of(
    fetcher: Fetcher,
    ref: LinkRef,
    *,
    state: str,
    merged: bool,
    merged_at: _dt.datetime | None,
    merge_commit: str | None,
    state_reason: str | None,
    updated_at: _dt.datetime | None,
    closed_at: _dt.datetime | None,
    title: str,
) -> PullState | IssueState:
    """The value for ``ref`` from checked fields, every string redacted."""
    if state not in ("open", "closed"):
        raise WrongShape(f"state is {state!r}, not open or closed")
    title = fetcher.redact(title)
    if ref.kind == "pull":
        merged = merged or merged_at is not None
        return PullState(
            url=ref.url,
            number=ref.number,
            state=state,
            merged=merged,
            merged_at=merged_at,
            merge_commit_sha=merge_commit if merged else None,
            updated_at=updated_at,
            closed_at=closed_at,
            title=title,
        )
    return IssueState(
        url=ref.url,
        number=ref.number,
        state=state,
        state_reason=state_reason,
        updated_at=updated_at,
        closed_at=closed_at,
        title=title,
    )


def not_found(ref: LinkRef, how: str, attempts: int = 1) -> ProbeFailure:
    return ProbeFailure(
        "codehost",
        ref.url,
        f"{ref.kind} not found ({how}): private, moved or mistyped",
        attempts=attempts,
    )


# ---------------------------------------------------------------------------------------------
# REST: one link a request


def _from_rest(fetcher: Fetcher, ref: LinkRef, data: object) -> PullState | IssueState:
    if not isinstance(data, dict):
        raise WrongShape(f"the answer is a JSON {type(data).__name__}, not an object")
    number = field(data, "number", (int,))
    if number is not None and number != ref.number:
        raise WrongShape(f"the answer is for #{number}, not #{ref.number}")
    state = field(data, "state", (str,), required=True)
    merged = field(data, "merged", (bool,)) if ref.kind == "pull" else None
    return state_of(
        fetcher,
        ref,
        state=state,
        merged=bool(merged),
        merged_at=moment(data, "merged_at"),
        merge_commit=field(data, "merge_commit_sha", (str,)),
        state_reason=field(data, "state_reason", (str,)),
        updated_at=moment(data, "updated_at"),
        closed_at=moment(data, "closed_at"),
        title=field(data, "title", (str,)) or "",
    )


def probe_link(
    fetcher: Fetcher,
    url: str,
    *,
    api_base: str = DEFAULT_API_BASE,
    token: str | None = None,
    web_host: str = DEFAULT_WEB_HOST,
) -> LinkState:
    """The state of the issue or pull request at web ``url``, through REST; never raises."""
    ref = parse_link(url, web_host=web_host)
    if ref is None:
        return ProbeFailure("codehost", url, f"not an issue or pull request URL on {web_host}")
    api_url = api_base.rstrip("/") + ref.api_path()
    answer = fetcher.get_json(
        api_url, probe="codehost", headers=auth_headers(token), accept="application/vnd.github+json"
    )
    if isinstance(answer, ProbeFailure):
        return answer
    if isinstance(answer, Fetched):
        return not_found(ref, f"HTTP {answer.status}", answer.attempts)
    try:
        return _from_rest(fetcher, ref, answer[0])
    except WrongShape as exc:
        return ProbeFailure("codehost", url, f"unexpected API response: {fetcher.redact(str(exc))}")


# ---------------------------------------------------------------------------------------------
# Many links at once


def probe_links(
    fetcher: Fetcher,
    urls: Iterable[str],
    *,
    api_base: str = DEFAULT_API_BASE,
    token: str | None = None,
    web_host: str = DEFAULT_WEB_HOST,
    workers: int = 100,
) -> dict[str, LinkState]:
    """``{url: state}`` for every URL: GraphQL batches with a token, REST per link without (or
    for a batch that failed as a whole); never raises."""
    from retire.probes import graphql

    wanted = list(dict.fromkeys(urls))
    found: dict[str, LinkState] = {}
    refs = []
    for url in wanted:
        ref = parse_link(url, web_host=web_host)
        if ref is None:
            found[url] = ProbeFailure(
                "codehost", url, f"not an issue or pull request URL on {web_host}"
            )
        else:
            refs.append(ref)
    rest = refs
    batch_failed: dict[str, ProbeFailure] = {}
    if token and refs:
        batches = graphql.batches(refs)
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(batches)))) as pool:
            answers = list(
                pool.map(
                    lambda batch: graphql.probe_batch(
                        fetcher, batch, api_base=api_base, token=token
                    ),
                    batches,
                )
            )
        rest = []
        for batch, answer in zip(batches, answers):
            if isinstance(answer, ProbeFailure):
                # the whole batch failed: REST may still answer each link
                rest += batch
                batch_failed.update((ref.url, answer) for ref in batch)
            else:
                found.update(answer)
    if rest:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(rest)))) as pool:
            states = pool.map(
                lambda ref: probe_link(
                    fetcher, ref.url, api_base=api_base, token=token, web_host=web_host
                ),
                rest,
            )
            for ref, state in zip(rest, states):
                first = batch_failed.get(ref.url)
                # say why GraphQL did not answer either
                if isinstance(state, ProbeFailure) and first is not None:
                    state = dataclasses.replace(
                        state, reason=f"{state.reason} (GraphQL: {first.reason})"
                    )
                found[ref.url] = state
    return {url: found[url] for url in wanted}
