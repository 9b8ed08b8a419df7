"""Whatever an index or a code host answers, the readers end in a value or a reason — never an
exception (hypothesis over arbitrary JSON and HTML-ish text)."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retire.evidence.values import IssueState, ProbeFailure, PullState, ReleaseList
from retire.probes import graphql, index
from retire.probes.codehost import WrongShapeError, _from_rest, parse_link
from retire.probes.http import BadBodyError, Fetched, Fetcher
from retire.probes.pages import PageError, parse_html_page, parse_json_page

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.sampled_from(
        [
            "1.0",
            "1.1",
            "2.0",
            "OPEN",
            "CLOSED",
            "MERGED",
            "open",
            "closed",
            "2026-02-01T10:00:00Z",
            "x-1.0.tar.gz",
            "x-1.0-py3-none-any.whl",
            "Issue",
            "PullRequest",
            "NOT_FOUND",
        ]
    )
)
KEYS = st.sampled_from(
    [
        "meta",
        "api-version",
        "name",
        "files",
        "filename",
        "yanked",
        "upload-time",
        "hashes",
        "requires-python",
        "core-metadata",
        "data",
        "errors",
        "path",
        "type",
        "message",
        "r0",
        "n1",
        "n2",
        "__typename",
        "number",
        "state",
        "merged",
        "mergedAt",
        "mergeCommit",
        "oid",
        "stateReason",
        "updatedAt",
        "closedAt",
        "title",
        "merged_at",
        "merge_commit_sha",
        "state_reason",
        "updated_at",
        "closed_at",
    ]
) | st.text(max_size=8)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=6),
    max_leaves=25,
)
FETCHER = Fetcher(httpx.Client(), secrets=("tok",))
REFS = [parse_link("https://github.com/o/r/issues/1"), parse_link("https://github.com/o/r/pull/2")]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(JSON)
def test_json_pages(data):
    try:
        assert isinstance(parse_json_page(data, "x", "u"), ReleaseList)
    except PageError as exc:
        assert exc.reason


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                '<a href="',
                '">',
                "</a>",
                "<html>",
                "</html>",
                "x-1.0.tar.gz",
                "#sha256=ab",
                " data-yanked",
                ' data-upload-time="',
                "2026-01-01",
                '"',
                "<meta name=",
                "&amp;",
                "<",
                ">",
                "\x00",
                "ü",
            ]
        )
        | st.text(max_size=10),
        max_size=30,
    ).map("".join)
)
def test_html_pages(text):
    try:
        assert isinstance(parse_html_page(text, "x", "u"), ReleaseList)
    except PageError as exc:
        assert exc.reason


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(JSON)
def test_rest_answers(data):
    for ref in REFS:
        try:
            assert isinstance(_from_rest(FETCHER, ref, data), (PullState, IssueState))
        except WrongShapeError as exc:
            assert str(exc)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(JSON)
def test_graphql_answers(data):
    found = graphql.read_answer(FETCHER, REFS, data, "http://api/graphql")
    if not isinstance(found, ProbeFailure):
        assert set(found) == {r.url for r in REFS}
        assert all(isinstance(v, (PullState, IssueState, ProbeFailure)) for v in found.values())


# -- index answers: whatever the body and its type, a ReleaseList or a failure -----------------

CONTENT_TYPES = st.sampled_from(
    [
        "",
        "text/html",
        "text/html; charset=utf-8",
        "application/vnd.pypi.simple.v1+html",
        "application/vnd.pypi.simple.v1+json",
        "application/json",
        "text/plain",
        "application/octet-stream",
        "image/png",
    ]
)
HTML_BITS = st.sampled_from(
    [
        "<!DOCTYPE html>",
        "<html>",
        "</html>",
        "<body>",
        "<h1>Links for x</h1>",
        "<title>Maintenance</title>",
        '<a href="/f/x-1.0.tar.gz#sha256=ab">x-1.0.tar.gz</a>',
        '<a href="/f/y-2.0-py3-none-any.whl">y-2.0-py3-none-any.whl</a>',
        '<a href="../">../</a>',
        '<a href="https://status.invalid/">status</a>',
        "<form><input name=user></form>",
        "<script>",
        "<!--",
        "\x00",
        "\x01",
        "ü",
        "{",
        '"files": []',
    ]
)
BODIES = (
    st.binary(max_size=200)
    | st.lists(HTML_BITS | st.text(max_size=12), max_size=25).map(lambda p: "".join(p).encode())
    | JSON.map(lambda data: json.dumps(data).encode())
)


def read_answer(body: bytes, content_type: str, expired=lambda: False):
    fetched = Fetched("http://i/simple/x/", 200, body, {"content-type": content_type})
    return index._reader("x", "http://i/simple", expired)(fetched)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(BODIES, CONTENT_TYPES)
def test_index_answers(body, content_type):
    """The whole read path (the form by content type or first byte, decoding, the page): a
    ReleaseList, or a BadBodyError with its reason — nothing else, never a traceback."""
    try:
        found = read_answer(body, content_type)
    except BadBodyError as exc:
        assert exc.reason
    else:
        assert isinstance(found, ReleaseList) and found.distribution == "x"


NOTICE_WORDS = st.lists(
    st.sampled_from(
        ["Service", "unavailable", "maintenance", "back", "soon", "log", "in", "please", "503"]
    )
    | st.text(alphabet="abcdefghijklmnopqrstuvw", min_size=1, max_size=12),
    min_size=1,
    max_size=12,
).map(" ".join)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    NOTICE_WORDS,
    st.sampled_from(["text/html", "application/vnd.pypi.simple.v1+html", ""]),
    st.sampled_from(["<html><body><p>{}</p></body></html>", "<h1>{}</h1>", "<div>{}</div>"]),
    st.booleans(),
)
def test_every_non_page_is_a_failure(words, content_type, frame, with_nul):
    """An HTML answer with words that are not a project's page (no file links, the project 'x'
    never named): a failure, never an empty release list."""
    body = frame.format(words).encode() + (b"\x00" if with_nul else b"")
    with pytest.raises(BadBodyError):
        read_answer(body, content_type)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from(
        [
            '<a href="/f/x-1.{n}-py3-none-any.whl#sha256=ab">x-1.{n}-py3-none-any.whl</a><br/>\n',
            "<!--",
            '<a href="',
            "<a b=c ",
            "<",
            "&amp;",
            "<div>",
            "<p>text {n}</p>",
        ]
    ),
    st.integers(4, 24),
)
def test_huge_pages_end_within_the_deadline(fragment, mebibytes):
    """Multi-MiB pages of one repeated fragment (links, unclosed comments, quotes and tags that
    make html.parser rescan): the read ends within a 0.3 s deadline plus one chunk's work."""
    unit = fragment.replace("{n}", "7")
    body = ("<html><body>" + unit * (mebibytes * 2**20 // len(unit))).encode()
    began = time.monotonic()
    deadline = began + 0.3
    try:
        read_answer(body, "text/html", lambda: time.monotonic() >= deadline)
    except BadBodyError as exc:
        assert exc.reason
    assert time.monotonic() - began < 0.3 + 1.5


@pytest.mark.slow
@pytest.mark.parametrize("fragment", ["<!--", '<a href="', "<a b=c "])
def test_an_unclosed_construct_is_refused_before_its_parse_turns_quadratic(fragment):
    """Found by the fuzzer above in CI: every chunk of a 4 MiB page of unclosed comments was fed
    within the deadline, then html.parser's close() parsed the held-back rest in one go —
    quadratic, minutes. A page whose one construct outgrows a few hundred KiB is refused first."""
    from retire.probes.pages import PageError, parse_html_page

    body = "<html><body>" + fragment * (4 * 2**20 // len(fragment))
    began = time.monotonic()
    with pytest.raises(PageError, match="does not close"):
        parse_html_page(body, "x", "http://index.invalid/simple/x/", expired=lambda: False)
    assert time.monotonic() - began < 2
