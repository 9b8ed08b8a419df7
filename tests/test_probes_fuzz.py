"""Whatever an index or a code host answers, the readers end in a value or a reason — never an
exception (hypothesis over arbitrary JSON and HTML-ish text)."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retire.evidence.values import IssueState, ProbeFailure, PullState, ReleaseList
from retire.probes import graphql
from retire.probes.codehost import WrongShapeError, _from_rest, parse_link
from retire.probes.http import Fetcher
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
