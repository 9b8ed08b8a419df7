"""Issue and pull-request states through GitHub's GraphQL API, up to 100 links a request.

One query per batch, one alias per repository and per number::

    query {
      r0: repository(owner: "org", name: "toylib") {
        n2: issueOrPullRequest(number: 2) { ...link }
      }
    }
    fragment link on IssueOrPullRequest { __typename ... on PullRequest { … } ... on Issue { … } }

mapped to the same values REST gives: ``MERGED`` is a closed, merged pull request; ``stateReason``
is lower-cased like REST's ``state_reason``; a ``/pull/N`` link that names an issue is not found
(REST's ``/pulls/N`` is a 404), an ``/issues/N`` link that names a pull request reads it as an issue
(as REST's ``/issues/N`` does). A node GitHub cannot resolve is not found, with GitHub's message;
a node of the wrong shape is a failure naming what was wrong. The endpoint is ``/graphql`` beside
the REST base (``…/api/v3`` → ``…/api/graphql`` on GitHub Enterprise).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from retire.evidence.values import ProbeFailure
from retire.probes.http import Fetched, Fetcher
from retire.probes.links import LinkRef, auth_headers
from retire.probes.linkstate import (
    LinkState,
    WrongShapeError,
    field,
    moment,
    not_found,
    state_of,
)

__all__ = ["BATCH", "batches", "endpoint", "probe_batch", "query", "read_answer"]

#: GitHub's limit on nodes a request may ask for at one level.
BATCH = 100

FRAGMENT = """fragment link on IssueOrPullRequest {
  __typename
  ... on PullRequest { number title state merged mergedAt mergeCommit { oid } updatedAt closedAt }
  ... on Issue { number title state stateReason updatedAt closedAt }
}"""


def endpoint(api_base: str) -> str:
    base = api_base.rstrip("/")
    return base.removesuffix("/v3") + "/graphql" if base.endswith("/api/v3") else base + "/graphql"


def batches(refs: Sequence[LinkRef], size: int = BATCH) -> list[list[LinkRef]]:
    """``refs`` in batches of at most ``size`` distinct issues / pull requests (two URLs of one
    number share its node)."""
    groups: dict[tuple[str, str, int], list[LinkRef]] = {}
    for ref in refs:
        groups.setdefault((ref.owner, ref.repo, ref.number), []).append(ref)
    keys = list(groups)
    return [
        [ref for key in keys[start : start + size] for ref in groups[key]]
        for start in range(0, len(keys), size)
    ]


def _aliases(refs: Sequence[LinkRef]) -> dict[tuple[str, str], str]:
    return {repo: f"r{n}" for n, repo in enumerate(dict.fromkeys((r.owner, r.repo) for r in refs))}


def query(refs: Sequence[LinkRef]) -> str:
    """The one query that asks for every link of ``refs``."""
    repos = _aliases(refs)
    lines = ["query {"]
    for (owner, repo), alias in repos.items():
        numbers = sorted({r.number for r in refs if (r.owner, r.repo) == (owner, repo)})
        lines.append(
            f"  {alias}: repository(owner: {json.dumps(owner)}, name: {json.dumps(repo)}) {{"
        )
        lines += [
            f"    n{number}: issueOrPullRequest(number: {number}) {{ ...link }}"
            for number in numbers
        ]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n" + FRAGMENT


def _errors_by_path(answer: dict[str, object]) -> dict[tuple[str, ...], dict[str, object]]:
    errors = answer.get("errors")
    found = {}
    for error in errors if isinstance(errors, list) else ():
        path = error.get("path") if isinstance(error, dict) else None
        if isinstance(path, list):
            found[tuple(str(p) for p in path)] = error
    return found


def _node_state(fetcher: Fetcher, ref: LinkRef, node: object) -> LinkState:
    if not isinstance(node, dict):
        raise WrongShapeError(f"the node is a JSON {type(node).__name__}, not an object")
    kind = field(node, "__typename", (str,), required=True)
    if kind not in ("PullRequest", "Issue"):
        raise WrongShapeError(f"__typename is {kind!r}, not PullRequest or Issue")
    if field(node, "number", (int,), required=True) != ref.number:
        raise WrongShapeError(f"the node is #{node['number']}, not #{ref.number}")
    if ref.kind == "pull" and kind == "Issue":
        return not_found(ref, f"#{ref.number} is an issue")
    state = field(node, "state", (str,), required=True)
    if state not in ("OPEN", "CLOSED", "MERGED"):
        raise WrongShapeError(f"state is {state!r}, not OPEN, CLOSED or MERGED")
    merge_commit = None
    if kind == "PullRequest":
        commit = field(node, "mergeCommit", (dict,))
        merge_commit = field(commit, "oid", (str,), required=True) if commit is not None else None
    reason = field(node, "stateReason", (str,)) if kind == "Issue" else None
    return state_of(
        fetcher,
        ref,
        state="open" if state == "OPEN" else "closed",
        merged=bool(field(node, "merged", (bool,))) or state == "MERGED",
        merged_at=moment(node, "mergedAt"),
        merge_commit=merge_commit,
        state_reason=reason.lower() if reason else None,
        updated_at=moment(node, "updatedAt"),
        closed_at=moment(node, "closedAt"),
        title=field(node, "title", (str,)) or "",
    )


def probe_batch(
    fetcher: Fetcher, refs: Sequence[LinkRef], *, api_base: str, token: str
) -> dict[str, LinkState] | ProbeFailure:
    """``{url: state}`` for ``refs`` from one GraphQL request, or why the request as a whole
    failed (the caller may ask REST instead); never raises."""
    url = endpoint(api_base)
    answer = fetcher.get_json(
        url, probe="codehost", headers=auth_headers(token), payload={"query": query(refs)}
    )
    if isinstance(answer, Fetched):
        return ProbeFailure("codehost", url, f"no GraphQL endpoint (HTTP {answer.status})")
    if isinstance(answer, ProbeFailure):
        return answer
    return read_answer(fetcher, refs, answer[0], url)


def read_answer(
    fetcher: Fetcher, refs: Sequence[LinkRef], data: object, url: str
) -> dict[str, LinkState] | ProbeFailure:
    """The decoded answer to :func:`query` ``(refs)`` as ``{url: state}``, or why it is none (no
    I/O)."""
    top = data.get("data") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(top, dict):
        errors = data.get("errors") if isinstance(data, dict) else None
        first = (
            errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
        )
        why = (
            f"{first.get('type') or 'error'}: {first.get('message')}"
            if first
            else "no 'data' object"
        )
        limited = first.get("type") == "RATE_LIMITED"
        return ProbeFailure(
            "codehost",
            url,
            fetcher.redact(f"GraphQL answered without data ({why})"),
            retryable=limited,
        )
    errors = _errors_by_path(data)
    repos = _aliases(refs)
    found: dict[str, LinkState] = {}
    for ref in refs:
        repo_alias, item_alias = repos[(ref.owner, ref.repo)], f"n{ref.number}"
        repo = top.get(repo_alias)
        node = repo.get(item_alias) if isinstance(repo, dict) else None
        error = errors.get((repo_alias, item_alias)) or errors.get((repo_alias,))
        try:
            if node is None:
                if error is None and repo_alias in top and (repo is None or item_alias in repo):
                    raise WrongShapeError(f"{repo_alias}.{item_alias} is null without an error")
                if error is None:
                    raise WrongShapeError(f"{repo_alias}.{item_alias} is missing")
                found[ref.url] = not_found(
                    ref,
                    fetcher.redact(
                        f"GraphQL {error.get('type') or 'error'}: {error.get('message')}"
                    ),
                )
            else:
                found[ref.url] = _node_state(fetcher, ref, node)
        except WrongShapeError as exc:
            found[ref.url] = ProbeFailure(
                "codehost", ref.url, f"unexpected GraphQL response: {fetcher.redact(str(exc))}"
            )
    return found
