"""The index probe against real indexes on loopback (tests.support.index): PEP 691 JSON, PEP 503
HTML only, without upload times, and a static ``simple/`` tree behind a plain file server."""

from __future__ import annotations

import datetime as dt

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from retire.evidence.values import ProbeFailure, ReleaseList
from retire.probes.index import parse_project, probe_releases, project_url
from tests.support.faults import Fault, FaultyIndexServer
from tests.support.index import IndexServer, PackageIndex, StaticIndexServer, write_static_tree
from tests.support.probing import fetcher, toylib_index
from tests.support.wheels import build_wheel


@pytest.fixture(scope="module")
def index_server(tmp_path_factory):
    with FaultyIndexServer(toylib_index(tmp_path_factory.mktemp("wheels"))) as server:
        yield server


def test_releases_upload_times_yanks_prereleases_nightlies(index_server):
    found = probe_releases(fetcher(), "toylib", [index_server.url])
    assert isinstance(found, ReleaseList)
    assert [str(r.version) for r in found.releases] == [
        "1.0",
        "1.1",
        "1.2",
        "1.3rc1",
        "1.4.dev20260601",
    ]
    one_one = found.get("1.1")
    assert one_one.yanked and one_one.yanked_reason == "wrong wheel tag"
    one_two = found.get("1.2")
    assert len(one_two.files) == 2
    # the first file
    assert one_two.upload_time == dt.datetime(2026, 4, 1, 12, tzinfo=dt.UTC)
    assert found.get("1.3rc1").prerelease and not found.get("1.3rc1").dev
    nightly = found.get("1.4.dev20260601")
    assert nightly.dev and nightly.nightly == dt.date(2026, 6, 1)
    # finals first, yanked never
    assert found.latest.version == Version("1.2")


def test_matching_follows_pips_prerelease_rule(index_server):
    found = probe_releases(fetcher(), "toylib", [index_server.url])
    # 1.1 is yanked
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.1"))] == ["1.2"]
    # No final release inside: pre-releases count; a specifier naming one lets them in too.
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.2.1"))] == [
        "1.3rc1",
        "1.4.dev20260601",
    ]
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.3rc1"))] == [
        "1.3rc1",
        "1.4.dev20260601",
    ]
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.4.dev0"))] == [
        "1.4.dev20260601"
    ]
    assert found.matching(SpecifierSet(">=2")) == ()


def test_name_is_canonicalized_and_json_is_asked_for(index_server):
    index_server.index.requests.clear()
    found = probe_releases(fetcher(), "ToyLib", [index_server.url])
    assert isinstance(found, ReleaseList) and found.distribution == "toylib"
    assert index_server.index.requests == ["/simple/toylib/"]
    assert project_url("http://x/simple/", "Foo_Bar") == "http://x/simple/foo-bar/"


def test_first_index_with_the_project_wins(tmp_path, index_server):
    other = PackageIndex()
    other.add(build_wheel(tmp_path, "unrelated", "1.0"), "2026-01-01")
    with IndexServer(other) as empty:
        found = probe_releases(fetcher(), "toylib", [empty.url, index_server.url])
        assert isinstance(found, ReleaseList) and found.index_url == index_server.url
        missing = probe_releases(fetcher(), "nothing-here", [empty.url, index_server.url])
    assert isinstance(missing, ProbeFailure)
    assert "no project 'nothing-here'" in missing.reason and not missing.retryable


def test_no_index_url_is_a_failure_with_the_fix():
    found = probe_releases(fetcher(), "toylib", [])
    assert isinstance(found, ProbeFailure) and "UV_DEFAULT_INDEX" in found.reason


def test_warm_run_revalidates_with_etag(index_server, tmp_path):
    cold = fetcher(tmp_path / "cache")
    assert isinstance(probe_releases(cold, "toylib", [index_server.url]), ReleaseList)
    index_server.index.requests.clear()
    # a new process: only the disk cache carries over
    warm = fetcher(tmp_path / "cache")
    hits = []
    original = warm.client.send

    def spy(request, **kwargs):
        response = original(request, **kwargs)
        hits.append((request.headers.get("If-None-Match"), response.status_code))
        return response

    warm.client.send = spy
    found = probe_releases(warm, "toylib", [index_server.url])
    assert isinstance(found, ReleaseList) and len(found.releases) == 5
    assert len(hits) == 1 and hits[0][0] and hits[0][1] == 304


def test_parse_project_rejects_what_is_not_pep_691():
    assert "API version" in parse_project({"meta": {"api-version": "2.0"}, "files": []}, "x", "u")
    assert "files" in parse_project({"meta": {"api-version": "1.1"}}, "x", "u")
    assert "not a JSON object" in parse_project([], "x", "u")
    ok = parse_project(
        {
            "meta": {"api-version": "1.0"},
            "files": [
                {"filename": "x-1.0.tar.gz", "yanked": True},
                # not installable by a lane: ignored
                {"filename": "x-1.0.exe"},
            ],
        },
        "X",
        "u",
    )
    assert (
        isinstance(ok, ReleaseList) and ok.releases[0].yanked and ok.releases[0].upload_time is None
    )


# ---------------------------------------------------------------------------------------------
# Both simple APIs (PEP 691 JSON, PEP 503 HTML)


def files_of(found: ReleaseList) -> list:
    return [
        (
            str(r.version),
            [
                (
                    f.filename,
                    f.upload_time,
                    f.yanked,
                    f.yanked_reason,
                    f.requires_python,
                    f.hashes,
                    f.core_metadata,
                )
                for f in r.files
            ],
        )
        for r in found.releases
    ]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    index = toylib_index(tmp_path_factory.mktemp("wheels-503"))
    index.add(
        build_wheel(tmp_path_factory.mktemp("more"), "toylib", "1.5"),
        "2026-06-10",
        requires_python=">=3.10,<4",
    )
    return index


def test_a_pep_503_only_index_gives_the_same_releases(wheels):
    """An index that answers HTML to a JSON request (pypiserver, the PyTorch nightly index) is read
    as HTML: the same versions, files, yanks, requires-python, hashes and metadata as JSON gives."""
    with IndexServer(wheels) as server:
        as_json = probe_releases(fetcher(), "toylib", [server.url])
        wheels.api = "html"
        try:
            as_html = probe_releases(fetcher(), "toylib", [server.url])
        finally:
            wheels.api = "both"
    assert isinstance(as_html, ReleaseList), as_html
    assert (as_json.api, as_html.api) == ("PEP 691 JSON", "PEP 503 HTML")
    assert files_of(as_html) == files_of(as_json)
    one_five = as_html.get("1.5").files[0]
    assert one_five.requires_python == ">=3.10,<4" and one_five.core_metadata
    assert one_five.hashes[0][0] == "sha256" and len(one_five.hashes[0][1]) == 64
    assert as_html.get("1.1").yanked_reason == "wrong wheel tag" and as_html.has_upload_times


def test_an_index_without_upload_times_says_so(wheels):
    wheels.upload_times = False
    try:
        with IndexServer(wheels) as server:
            for api in ("both", "html"):
                wheels.api = api
                found = probe_releases(fetcher(), "toylib", [server.url])
                assert isinstance(found, ReleaseList) and found.get("1.2").upload_time is None
                assert not found.has_upload_times and found.latest.version == Version("1.5")
    finally:
        wheels.api, wheels.upload_times = "both", True


def test_a_static_simple_tree(wheels, tmp_path):
    """A folder of HTML pages behind a plain file server: relative links, no upload times, and
    the server's own same-host redirect of ``/simple/toylib`` to ``/simple/toylib/``."""
    wheels.upload_times = False
    try:
        root = write_static_tree(wheels, tmp_path / "static")
    finally:
        wheels.upload_times = True
    with StaticIndexServer(root) as server:
        found = probe_releases(fetcher(), "ToyLib", [server.url])
        slashless = fetcher().get(f"{server.url}/toylib", probe="index")
    assert isinstance(found, ReleaseList) and found.api == "PEP 503 HTML", found
    assert [str(r.version) for r in found.releases] == [
        "1.0",
        "1.1",
        "1.2",
        "1.3rc1",
        "1.4.dev20260601",
        "1.5",
    ]
    assert found.get("1.1").yanked and not found.has_upload_times
    # the 301 was followed: same host
    assert slashless.status == 200 and b"toylib-1.5" in slashless.body


def test_html_to_a_json_request_is_read_as_html(tmp_path):
    page = (
        b'<!DOCTYPE html><html><body><a href="/files/toylib-2.0-py3-none-any.whl#sha256=ab">'
        b"toylib-2.0-py3-none-any.whl</a><a "
        b'href="../other-1.0.tar.gz">other-1.0.tar.gz</a></body></html>'
    )
    with FaultyIndexServer(toylib_index(tmp_path)) as server:
        server.faults.add("/simple/toylib/", Fault(status=200, body=page, content_type="text/html"))
        found = probe_releases(fetcher(), "toylib", [server.url])
    assert isinstance(found, ReleaseList) and found.api == "PEP 503 HTML"
    # another project's file is passed over
    assert [str(r.version) for r in found.releases] == ["2.0"]
    assert found.releases[0].files[0].hashes == (("sha256", "ab"),)


def test_an_index_that_answers_neither_names_both_peps_and_the_url(tmp_path):
    with FaultyIndexServer(toylib_index(tmp_path)) as server:
        server.faults.add(
            "/simple/toylib/",
            Fault(status=200, body=b"welcome, please log in", content_type="text/plain"),
        )
        found = probe_releases(fetcher(), "toylib", [server.url])
    assert isinstance(found, ProbeFailure)
    assert "PEP 691" in found.reason and "PEP 503" in found.reason and "text/plain" in found.reason
    assert found.target == f"{server.url}/toylib/" and str(found).startswith(
        f"index {server.url}/toylib/: "
    )


def test_a_406_to_the_negotiation_asks_for_html(wheels):
    with FaultyIndexServer(wheels) as server:
        server.faults.add(
            "/simple/toylib/",
            Fault(status=406, times=1, body=b"not acceptable", content_type="text/plain"),
        )
        found = probe_releases(fetcher(), "toylib", [server.url])
    assert isinstance(found, ReleaseList) and found.api == "PEP 503 HTML"


def test_a_truncated_html_page_is_fetched_twice_then_a_failure(wheels):
    with FaultyIndexServer(wheels) as server:
        wheels.api = "html"
        try:
            server.faults.add("/simple/toylib/", Fault(truncate=True))
            found = probe_releases(fetcher(), "toylib", [server.url])
        finally:
            wheels.api = "both"
    assert (
        isinstance(found, ProbeFailure)
        and "stops before </html>" in found.reason
        and found.attempts == 2
    )


def test_json_of_the_wrong_shape_says_what_is_wrong():
    base = {"meta": {"api-version": "1.1"}, "name": "x"}
    assert "for project 'y', not 'x'" in parse_project({**base, "name": "y", "files": []}, "x", "u")
    assert "upload-time is int" in parse_project(
        {**base, "files": [{"filename": "x-1.0.tar.gz", "upload-time": 5}]}, "x", "u"
    )
    assert "not an ISO 8601 time" in parse_project(
        {**base, "files": [{"filename": "x-1.0.tar.gz", "upload-time": "soon"}]}, "x", "u"
    )
    assert "yanked is int" in parse_project(
        {**base, "files": [{"filename": "x-1.0.tar.gz", "yanked": 1}]}, "x", "u"
    )
    assert "hashes" in parse_project(
        {**base, "files": [{"filename": "x-1.0.tar.gz", "hashes": {"sha256": 1}}]}, "x", "u"
    )


def test_html_pages_of_an_unknown_repository_version_are_refused():
    from retire.probes.pages import PageError, parse_html_page

    with pytest.raises(PageError, match=r"repository version '2\.0'"):
        parse_html_page(
            '<html><head><meta name="pypi:repository-version" content="2.0"></head></html>',
            "x",
            "u",
        )
    # no <html>: fine
    bare = parse_html_page('<a href="x-1.0.tar.gz" data-yanked>x-1.0.tar.gz</a>', "x", "u")
    assert bare.releases[0].yanked and bare.releases[0].yanked_reason is None


def test_bisection_lists_releases_from_an_html_only_index(wheels):
    from retire.bisect.bisection import list_releases

    wheels.api = "html"
    try:
        with IndexServer(wheels) as server:
            versions, yanked = list_releases(server.url, "toylib")
    finally:
        wheels.api = "both"
    assert versions == ["1.0", "1.1", "1.2", "1.3rc1", "1.4.dev20260601", "1.5"] and yanked == {
        "1.1"
    }
