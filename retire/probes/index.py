"""The index probe: the releases of a distribution through either simple API.

One request asks for PEP 691 JSON first and PEP 503 HTML after it (``Accept`` with weights, as
pip and uv do); the answer is read by what it is — an index that answers HTML to a JSON request
(the PyTorch nightly index, pypiserver, a static ``simple/`` tree, many Artifactory / Nexus
set-ups) is read as HTML — and an index that refuses the negotiation (406) is asked for HTML
alone. Page formats: :mod:`retire.probes.pages`. Upload times come from PEP 700 where the index
gives them; a PEP 503 page usually has none, which :attr:`ReleaseList.has_upload_times` says so
that conclusions resting on them say what limits them. Pre-releases and nightlies
(``.devYYYYMMDD``) are kept and flagged; the reader decides (``ReleaseList.matching`` follows
pip's pre-release rule).

The index URL is the lane's, else the one given, else this host's uv default
(``retire.core.uv.host_indexes().default``); no registry is named here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from packaging.utils import canonicalize_name

from retire.evidence.values import ProbeFailure, ReleaseList
from retire.probes.http import BadBodyError, Fetched, Fetcher, decode_json, mask_url
from retire.probes.pages import PageError, PageTimeoutError, parse_html_page, parse_json_page

__all__ = ["ACCEPT", "JSON_TYPE", "parse_project", "probe_releases", "project_url"]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPE = "application/vnd.pypi.simple.v1+html"
#: PEP 691's negotiation: JSON preferred, the HTML forms after it.
ACCEPT = f"{JSON_TYPE}, {HTML_TYPE};q=0.2, text/html;q=0.01"
NEITHER = "not a PEP 691 JSON or PEP 503 HTML project page"


def project_url(index_url: str, distribution: str) -> str:
    return f"{index_url.rstrip('/')}/{canonicalize_name(distribution)}/"


def parse_project(data: object, distribution: str, index_url: str) -> ReleaseList | str:
    """A PEP 691 project page into a ReleaseList, or what is wrong with it."""
    try:
        return parse_json_page(data, distribution, mask_url(index_url))
    except PageError as exc:
        return exc.reason


def _form(fetched: Fetched) -> str | None:
    """``json`` or ``html`` by the content type, else by the first byte; None when neither."""
    kind = fetched.content_type
    if "json" in kind:
        return "json"
    if "html" in kind:
        return "html"
    if kind and kind not in ("text/plain", "application/octet-stream"):
        return None
    start = fetched.body.lstrip()[:1]
    return {b"{": "json", b"<": "html"}.get(start)


def _reader(
    distribution: str, index_url: str, expired: Callable[[], bool]
) -> Callable[[Fetched], ReleaseList]:
    def read(fetched: Fetched) -> ReleaseList:
        form = _form(fetched)
        try:
            if form == "json":
                data = decode_json(fetched)
                return parse_json_page(data, distribution, index_url, expired=expired)
            if form == "html":
                text = fetched.body.decode("utf-8", errors="replace")
                return parse_html_page(text, distribution, index_url, expired=expired)
        except PageTimeoutError as late:
            raise BadBodyError(late.reason) from None
        except PageError as exc:
            api = "PEP 691" if form == "json" else "PEP 503"
            raise BadBodyError(f"invalid {api} page: {exc.reason}", refetch=exc.truncated) from None
        # JSON that does not decode: the same as everywhere else
        except BadBodyError as bad:
            raise BadBodyError(f"{bad.reason} ({NEITHER})", refetch=bad.refetch) from None
        what = fetched.content_type or "no content type"
        raise BadBodyError(f"the index answered {what}: {NEITHER}")

    return read


def probe_releases(
    fetcher: Fetcher, distribution: str, index_urls: Sequence[str]
) -> ReleaseList | ProbeFailure:
    """The releases of ``distribution`` on the first of ``index_urls`` that has the project
    (uv's first-index rule), within one probe deadline; never raises."""
    name = canonicalize_name(distribution)
    if not index_urls:
        return ProbeFailure(
            "index", name, "no index URL: set UV_DEFAULT_INDEX or give the lane an index"
        )
    deadline = fetcher.deadline()

    # reading the page counts against the probe's deadline too
    def expired() -> bool:
        return fetcher.monotonic() >= deadline

    for index_url in index_urls:
        url = project_url(index_url, name)
        read = _reader(name, mask_url(index_url), expired)
        answer = fetcher.get_parsed(url, read, probe="index", accept=ACCEPT, deadline=deadline)
        if isinstance(answer, ProbeFailure) and answer.reason.startswith("HTTP 406"):
            answer = fetcher.get_parsed(
                url, read, probe="index", accept="text/html", deadline=deadline
            )
        if isinstance(answer, ProbeFailure):
            return answer
        # 404 / 410: try the next index
        if isinstance(answer, Fetched):
            continue
        return answer[0]
    where = ", ".join(mask_url(u) for u in index_urls)
    return ProbeFailure("index", name, f"no project {name!r} on {where}")
