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
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from retire.evidence.values import IssueState, ProbeFailure, PullState
from retire.probes import graphql
from retire.probes.http import Fetched, Fetcher
from retire.probes.links import (
    DEFAULT_API_BASE,
    DEFAULT_WEB_HOST,
    LinkRef,
    auth_headers,
    parse_link,
    token_from_env,
)
from retire.probes.linkstate import LinkState, WrongShapeError, field, moment, not_found, state_of

__all__ = [
    "DEFAULT_API_BASE",
    "DEFAULT_WEB_HOST",
    "LinkRef",
    "LinkState",
    "auth_headers",
    "parse_link",
    "probe_link",
    "probe_links",
    "token_from_env",
]


# ---------------------------------------------------------------------------------------------
# REST: one link a request


def _from_rest(fetcher: Fetcher, ref: LinkRef, data: object) -> PullState | IssueState:
    if not isinstance(data, dict):
        raise WrongShapeError(f"the answer is a JSON {type(data).__name__}, not an object")
    number = field(data, "number", (int,))
    if number is not None and number != ref.number:
        raise WrongShapeError(f"the answer is for #{number}, not #{ref.number}")
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
    except WrongShapeError as exc:
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
        for batch, answer in zip(batches, answers, strict=True):
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
            for ref, state in zip(rest, states, strict=True):
                first = batch_failed.get(ref.url)
                # say why GraphQL did not answer either
                if isinstance(state, ProbeFailure) and first is not None:
                    state = dataclasses.replace(
                        state, reason=f"{state.reason} (GraphQL: {first.reason})"
                    )
                found[ref.url] = state
    return {url: found[url] for url in wanted}
