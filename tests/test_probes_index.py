"""The index probe against a real PEP 691 index on loopback (tests.support.index)."""

from __future__ import annotations

import datetime as dt

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from retire.evidence.values import ProbeFailure, ReleaseList
from retire.probes.index import parse_project, probe_releases, project_url
from tests.support.faults import FaultyIndexServer
from tests.support.index import IndexServer, PackageIndex
from tests.support.probing import fetcher, toylib_index
from tests.support.wheels import build_wheel


@pytest.fixture(scope="module")
def index_server(tmp_path_factory):
    with FaultyIndexServer(toylib_index(tmp_path_factory.mktemp("wheels"))) as server:
        yield server


def test_releases_upload_times_yanks_prereleases_nightlies(index_server):
    found = probe_releases(fetcher(), "toylib", [index_server.url])
    assert isinstance(found, ReleaseList)
    assert [str(r.version) for r in found.releases] == ["1.0", "1.1", "1.2", "1.3rc1", "1.4.dev20260601"]
    one_one = found.get("1.1")
    assert one_one.yanked and one_one.yanked_reason == "wrong wheel tag"
    one_two = found.get("1.2")
    assert len(one_two.files) == 2
    assert one_two.upload_time == dt.datetime(2026, 4, 1, 12, tzinfo=dt.timezone.utc)  # the first file
    assert found.get("1.3rc1").prerelease and not found.get("1.3rc1").dev
    nightly = found.get("1.4.dev20260601")
    assert nightly.dev and nightly.nightly == dt.date(2026, 6, 1)
    assert found.latest.version == Version("1.2")  # finals first, yanked never


def test_matching_follows_pips_prerelease_rule(index_server):
    found = probe_releases(fetcher(), "toylib", [index_server.url])
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.1"))] == ["1.2"]  # 1.1 is yanked
    # No final release inside: pre-releases count; a specifier naming one lets them in too.
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.2.1"))] == ["1.3rc1", "1.4.dev20260601"]
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.3rc1"))] == ["1.3rc1", "1.4.dev20260601"]
    assert [str(r.version) for r in found.matching(SpecifierSet(">=1.4.dev0"))] == ["1.4.dev20260601"]
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
    warm = fetcher(tmp_path / "cache")  # a new process: only the disk cache carries over
    hits = []
    original = warm.client.get

    def spy(url, **kwargs):
        response = original(url, **kwargs)
        hits.append((kwargs["headers"].get("If-None-Match"), response.status_code))
        return response

    warm.client.get = spy
    found = probe_releases(warm, "toylib", [index_server.url])
    assert isinstance(found, ReleaseList) and len(found.releases) == 5
    assert len(hits) == 1 and hits[0][0] and hits[0][1] == 304


def test_parse_project_rejects_what_is_not_pep_691():
    assert "API version" in parse_project({"meta": {"api-version": "2.0"}, "files": []}, "x", "u")
    assert "files" in parse_project({"meta": {"api-version": "1.1"}}, "x", "u")
    assert "not a JSON object" in parse_project([], "x", "u")
    ok = parse_project({"meta": {"api-version": "1.0"}, "files": [
        {"filename": "x-1.0.tar.gz", "yanked": True},
        {"filename": "x-1.0.exe"},  # not installable by a lane: ignored
    ]}, "X", "u")
    assert isinstance(ok, ReleaseList) and ok.releases[0].yanked and ok.releases[0].upload_time is None


def test_html_only_index_is_reported_not_misread(tmp_path):
    from tests.support.faults import Fault

    with FaultyIndexServer(toylib_index(tmp_path)) as server:
        server.faults.add("/simple/toylib/", Fault(status=200, body=b"<html><body></body></html>",
                                                   content_type="text/html"))
        found = probe_releases(fetcher(), "toylib", [server.url])
    assert isinstance(found, ProbeFailure)
    assert "JSON" in found.reason
