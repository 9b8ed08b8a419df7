"""A small GitHub API stand-in on loopback: issues and pull requests over REST and GraphQL,
ETag / 304, rate-limit headers, and injectable faults per path (``tests.support.faults``).

Only what the code-host probe reads is served: ``GET /repos/<owner>/<repo>/pulls/<n>`` and
``GET /repos/<owner>/<repo>/issues/<n>``, shaped like GitHub's answers, and ``POST /graphql``
answering ``repository(owner:, name:) { issueOrPullRequest(number:) { … } }`` with aliases and
fragments (:mod:`tests.support.graphql`, a small hand-written executor), authenticated only, like
GitHub's. Like GitHub, a 304 does not count against the rate limit, and an exhausted limit answers
403 with ``X-RateLimit-Remaining: 0`` and ``X-RateLimit-Reset``. ``echo_authorization`` makes
every title carry the request's Authorization header (a hostile or broken server).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Self
from urllib.parse import urlsplit

from tests.support.faults import (
    Fault,
    FaultPlan,
    LoopbackServer,
    etag_of,
    send_body,
    send_fault_or_none,
)
from tests.support.graphql import execute


def _iso(moment: datetime | str | None) -> str | None:
    if moment is None:
        return None
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class CodeHost:
    """The state the stand-in serves; change it between requests to move upstream along."""

    pulls: dict[tuple[str, str, int], dict] = field(default_factory=dict)
    issues: dict[tuple[str, str, int], dict] = field(default_factory=dict)
    latency: float = 0.0
    faults: FaultPlan = field(default_factory=FaultPlan)
    rate_limit: int = 5000
    rate_remaining: int = 5000
    # epoch seconds; default: an hour from now
    rate_reset: int | None = None
    # Cache-Control max-age, like GitHub's 60 (None: no-cache)
    max_age: int | None = None
    # path, If-None-Match, Authorization
    requests: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    # issueOrPullRequest nodes per GraphQL request
    graphql_nodes: list[int] = field(default_factory=list)
    echo_authorization: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_pull(
        self,
        owner: str,
        repo: str,
        number: int,
        *,
        state: str = "open",
        merged: bool = False,
        merged_at: datetime | str | None = None,
        merge_commit_sha: str | None = None,
        updated_at: datetime | str | None = "2026-05-01T00:00:00",
        closed_at: datetime | str | None = None,
        title: str = "fix",
    ) -> dict:
        body = {
            "url": f"/repos/{owner}/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{owner}/{repo}/pull/{number}",
            "number": number,
            "state": state,
            "title": title,
            "merged": merged,
            "merged_at": _iso(merged_at),
            "merge_commit_sha": merge_commit_sha,
            "updated_at": _iso(updated_at),
            "closed_at": _iso(closed_at or (merged_at if merged else None)),
        }
        self.pulls[(owner, repo, number)] = body
        return body

    def add_issue(
        self,
        owner: str,
        repo: str,
        number: int,
        *,
        state: str = "open",
        state_reason: str | None = None,
        updated_at: datetime | str | None = "2026-05-01T00:00:00",
        closed_at: datetime | str | None = None,
        title: str = "bug",
    ) -> dict:
        body = {
            "url": f"/repos/{owner}/{repo}/issues/{number}",
            "html_url": f"https://github.com/{owner}/{repo}/issues/{number}",
            "number": number,
            "state": state,
            "state_reason": state_reason,
            "title": title,
            "updated_at": _iso(updated_at),
            "closed_at": _iso(closed_at),
        }
        self.issues[(owner, repo, number)] = body
        return body

    def rate_headers(self) -> dict[str, str]:
        reset = self.rate_reset if self.rate_reset is not None else int(time.time()) + 3600
        return {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(0, self.rate_remaining)),
            "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Resource": "core",
        }

    def lookup(self, path: str, authorization: str | None = None) -> dict | None:
        parts = [p for p in path.split("/") if p]
        if (
            len(parts) != 5
            or parts[0] != "repos"
            or parts[3] not in ("pulls", "issues")
            or not parts[4].isdigit()
        ):
            return None
        key = (parts[1], parts[2], int(parts[4]))
        found = self.pulls.get(key) if parts[3] == "pulls" else self.issues.get(key)
        # like GitHub: a PR is an issue too
        if found is None and parts[3] == "issues" and key in self.pulls:
            pull = self.pulls[key]
            found = {
                "url": f"/repos/{key[0]}/{key[1]}/issues/{key[2]}",
                "html_url": pull["html_url"],
                "number": key[2],
                "state": pull["state"],
                "state_reason": None,
                "title": pull["title"],
                "updated_at": pull["updated_at"],
                "closed_at": pull["closed_at"],
                "pull_request": {"url": pull["url"], "merged_at": pull["merged_at"]},
            }
        return self._echo(found, authorization) if found is not None else None

    def _echo(self, data: dict, authorization: str | None) -> dict:
        if not self.echo_authorization:
            return data
        return {**data, "title": f"{data['title']} (seen: {authorization})"}

    # GraphQL: the schema's few types over the same state

    def _node(self, data: dict, pull: bool, authorization: str | None) -> dict:
        data = self._echo(data, authorization)
        common = {
            "number": data["number"],
            "title": data["title"],
            "updatedAt": data["updated_at"],
            "closedAt": data["closed_at"],
        }
        if pull:
            merged = bool(data["merged"])
            return {
                **common,
                "__typename": "PullRequest",
                "merged": merged,
                "mergedAt": data["merged_at"],
                "state": "MERGED" if merged else data["state"].upper(),
                "mergeCommit": {"oid": data["merge_commit_sha"]}
                if merged and data["merge_commit_sha"]
                else None,
            }
        reason = data.get("state_reason")
        return {
            **common,
            "__typename": "Issue",
            "state": data["state"].upper(),
            "stateReason": reason.upper() if reason else None,
        }

    def _repository(self, owner: str, name: str, authorization: str | None) -> dict | None:
        if not any(key[:2] == (owner, name) for key in (*self.pulls, *self.issues)):
            return None

        def item(args: dict) -> tuple[dict | None, str | None]:
            key = (owner, name, int(args.get("number", -1)))
            if key in self.pulls:
                return self._node(self.pulls[key], True, authorization), None
            if key in self.issues:
                return self._node(self.issues[key], False, authorization), None
            return (
                None,
                f"Could not resolve to an issue or pull request with the number of {key[2]}.",
            )

        return {"__typename": "Repository", "issueOrPullRequest": item}

    def graphql(self, query: str, authorization: str | None) -> dict:
        def repository(args: dict) -> tuple[dict | None, str | None]:
            found = self._repository(str(args.get("owner")), str(args.get("name")), authorization)
            return (
                found,
                None
                if found
                else f"Could not resolve to a Repository with the name "
                f"'{args.get('owner')}/{args.get('name')}'.",
            )

        with self._lock:
            self.graphql_nodes.append(query.count("issueOrPullRequest("))
        return execute(
            query,
            {"__typename": "Query", "repository": repository},
            unions={"IssueOrPullRequest": {"Issue", "PullRequest"}},
        )


def _handler(host: CodeHost):
    class Handler(BaseHTTPRequestHandler):
        # keep-alive, like the real API
        protocol_version = "HTTP/1.1"
        # headers and body go out in two writes: no 40 ms delayed-ACK stall
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def _begin(self, etag: str | None) -> tuple[str, Fault | None, bool]:
            """Record the request, wait the latency, send an injected fault: (path, fault,
            answered)."""
            path = urlsplit(self.path).path
            with host._lock:
                host.requests.append((path, etag, self.headers.get("Authorization")))
            if host.latency:
                time.sleep(host.latency)
            fault: Fault | None = host.faults.take(path)
            if send_fault_or_none(self, fault):
                with host._lock:
                    host.statuses.append(fault.status or 0)
                return path, fault, True
            return path, fault, False

        def do_GET(self):
            path, fault, answered = self._begin(self.headers.get("If-None-Match"))
            if answered:
                return
            data = host.lookup(path, self.headers.get("Authorization"))
            if data is None:
                return self._answer(
                    404,
                    {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"},
                    fault,
                )
            body = json.dumps(data, sort_keys=True).encode()
            conditional = self.headers.get("If-None-Match") == etag_of(body)
            with host._lock:
                if not conditional:
                    if host.rate_remaining <= 0:
                        limited = True
                    else:
                        limited = False
                        host.rate_remaining -= 1
                else:
                    limited = False
            if limited:
                return self._answer(403, {"message": "API rate limit exceeded"}, None)
            return self._answer(200, data, fault)

        def do_POST(self):
            authorization = self.headers.get("Authorization")
            length = int(self.headers.get("Content-Length") or 0)
            payload = self.rfile.read(length)
            path, fault, answered = self._begin(None)
            if answered:
                return
            if path != "/graphql":
                return self._answer(404, {"message": "Not Found"}, fault)
            if not authorization:
                return self._answer(
                    401, {"message": "This endpoint requires you to be authenticated."}, fault
                )
            try:
                query = json.loads(payload)["query"]
            except (ValueError, KeyError, TypeError):
                return self._answer(400, {"message": "Problems parsing JSON"}, fault)
            return self._answer(200, host.graphql(str(query), authorization), fault, etag=False)

        def _answer(
            self, status: int, data: dict, fault: Fault | None, *, etag: bool = True
        ) -> None:
            body = json.dumps(data, sort_keys=True).encode()
            headers = dict(host.rate_headers())
            headers["Cache-Control"] = (
                f"private, max-age={host.max_age}"
                if host.max_age is not None
                else "private, no-cache"
            )
            if status == 200 and self.headers.get("If-None-Match") == etag_of(body):
                host.statuses.append(304)
            else:
                host.statuses.append(status)
            send_body(
                self,
                status,
                body,
                "application/json; charset=utf-8",
                fault,
                headers,
                etag=None if etag else False,
            )

    return Handler


class CodeHostServer:
    """Serve a :class:`CodeHost` on 127.0.0.1; ``url`` is the API base to give the probe."""

    def __init__(self, host: CodeHost | None = None) -> None:
        self.host = host or CodeHost()
        self._server = LoopbackServer(("127.0.0.1", 0), _handler(self.host))
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        address, port = self._server.server_address[:2]
        return f"http://{address}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
