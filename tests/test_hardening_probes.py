"""Issue 20, classes 4 and 5: an answer that is not a project page is a probe failure (never "no
releases"), and reading a page — however big — ends within the probe's deadline.

Every index here is a real loopback server (tests.support.faults); the verdicts go through
``gather`` as `patchlane verdicts` does.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retire.core.errors import InputError
from retire.evidence.values import ProbeFailure, ReleaseList
from retire.mirrors import repo
from retire.mirrors.config import Mirror, load_mirrors
from retire.mirrors.repo import open_mirror
from retire.mirrors.tagpattern import MAX_TAG_LENGTH
from retire.probes.index import probe_releases
from retire.probes.pages import PageError, PageTimeoutError, parse_html_page, parse_json_page
from tests.support.faults import Fault, FaultyIndexServer
from tests.support.gitrepos import git, make_upstream
from tests.support.probing import FAST, fetcher, toylib_index
from tests.test_probe_faults import INDEX_PATH, upstream, verdicts, world  # noqa: F401

MAINTENANCE = (
    b"<!DOCTYPE html><html><head><title>Down for maintenance</title></head><body>"
    b"<h1>We'll be back soon</h1><p>See <a href='https://status.example.invalid/'>status</a>"
    b"</p></body></html>"
)
LOGIN = (
    b"<html><body><form action='/login'><input name='user'></form>"
    b"<a href='/help.html'>help</a></body></html>"
)
#: (content type, body): none is a project page, whatever its status line says
NOT_PAGES = {
    "maintenance-html": ("text/html", MAINTENANCE),
    "maintenance-pep503": ("application/vnd.pypi.simple.v1+html", MAINTENANCE),
    "login-html": ("text/html; charset=utf-8", LOGIN),
    "nul-bytes-html": ("text/html", b"\x00" * 4096),
    "nul-bytes-json": ("application/vnd.pypi.simple.v1+json", b"\x00" * 4096),
    "nul-bytes-untyped": ("", b"\x00" * 4096),
    "empty-html": ("text/html", b""),
    "blank-html": ("text/html", b" \n\t\n"),
    "plain-words-html": ("text/html", b"Service Unavailable"),
    "binary-html": ("text/html", bytes(range(256)) * 8),
    "maintenance-json": ("application/json", b'{"message": "maintenance", "retry": 60}'),
    "html-as-json": ("application/vnd.pypi.simple.v1+json", MAINTENANCE),
    "another-project": (
        "text/html",
        b'<html><body><a href="/f/other-1.0.tar.gz">other-1.0.tar.gz</a></body></html>',
    ),
    "json-files-of-another-project": (
        "application/vnd.pypi.simple.v1+json",
        json.dumps(
            {"meta": {"api-version": "1.1"}, "files": [{"filename": "other-1.0.tar.gz"}]}
        ).encode(),
    ),
    "json-of-another-project": (
        "application/vnd.pypi.simple.v1+json",
        json.dumps({"meta": {"api-version": "1.1"}, "name": "other", "files": []}).encode(),
    ),
}
#: well-formed project pages without a single file: a project with no releases, not a failure
EMPTY_PAGES = {
    "pypi-style": (
        "text/html",
        (
            b'<!DOCTYPE html><html><head><meta name="pypi:repository-version" content="1.1">'
            b"<title>Links for toylib</title></head><body><h1>Links for toylib</h1></body></html>"
        ),
    ),
    "bare-markup": ("text/html", b"<!DOCTYPE html><html><body></body></html>"),
    "static-tree": (
        "text/html",
        (
            b'<html><head><title>Index of /simple/ToyLib/</title></head><body><a href="../">../</a>'
            b"</body></html>"
        ),
    ),
    "json": (
        "application/vnd.pypi.simple.v1+json",
        json.dumps({"meta": {"api-version": "1.1"}, "name": "toylib", "files": []}).encode(),
    ),
}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    with FaultyIndexServer(toylib_index(tmp_path_factory.mktemp("wheels"))) as server:
        yield server


@pytest.mark.parametrize("name", sorted(NOT_PAGES))
def test_an_answer_that_is_not_a_project_page_is_a_failure(index, name):
    content_type, body = NOT_PAGES[name]
    index.faults.clear()
    index.faults.add(INDEX_PATH, Fault(status=200, body=body, content_type=content_type))
    found = probe_releases(fetcher(), "toylib", [index.url])
    assert isinstance(found, ProbeFailure), (name, found)
    assert found.probe == "index" and found.reason, found


@pytest.mark.parametrize("name", sorted(EMPTY_PAGES))
def test_a_well_formed_project_page_without_files_is_no_releases(index, name):
    content_type, body = EMPTY_PAGES[name]
    index.faults.clear()
    index.faults.add(INDEX_PATH, Fault(status=200, body=body, content_type=content_type))
    found = probe_releases(fetcher(), "toylib", [index.url])
    assert isinstance(found, ReleaseList) and found.releases == (), (name, found)


def test_the_reasons_say_what_the_answer_was(index):
    """One line each, saying why the answer is not a page."""
    reasons = {}
    for name in ("maintenance-html", "nul-bytes-html", "empty-html", "another-project"):
        content_type, body = NOT_PAGES[name]
        index.faults.clear()
        index.faults.add(INDEX_PATH, Fault(status=200, body=body, content_type=content_type))
        found = probe_releases(fetcher(), "toylib", [index.url])
        assert isinstance(found, ProbeFailure)
        reasons[name] = found.reason
    assert "does not name 'toylib'" in reasons["maintenance-html"]
    assert "Down for maintenance" in reasons["maintenance-html"]
    assert "control character '\\x00'" in reasons["nul-bytes-html"]
    assert "no markup" in reasons["empty-html"]
    assert "another project's" in reasons["another-project"]
    index.faults.clear()


@pytest.mark.slow
@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_a_maintenance_page_makes_the_verdict_unknown_never_keep(world, content_type):
    """Before: a 200 maintenance page read as a project with no files, so floor_fixed was *kept*
    ("newest none") on false evidence."""
    body = MAINTENANCE if "html" in content_type else b'{"status": "maintenance"}'
    world["index"].faults.add(INDEX_PATH, Fault(status=200, body=body, content_type=content_type))
    found = verdicts(world, mirrors=world["tmp"], cache=False)
    for shim in ("floor_fixed", "pr_fixed"):
        assert found[shim].decision == "unknown", (shim, found[shim].decision, found[shim].why)
        assert found[shim].failures, shim


def test_a_nul_body_makes_the_verdict_unknown(world):
    world["index"].faults.add(
        INDEX_PATH, Fault(status=200, body=b"\x00" * 10_000, content_type="text/html")
    )
    found = verdicts(world, mirrors=world["tmp"], cache=False)
    assert found["floor_fixed"].decision == "unknown", found["floor_fixed"].why


# -- the parse is bounded by the deadline --------------------------------------------------------


def huge_page(links: int) -> bytes:
    rows = (
        f'<a href="/f/toylib-1.{i}-py3-none-any.whl#sha256={i:064x}">'
        f"toylib-1.{i}-py3-none-any.whl</a><br/>"
        for i in range(links)
    )
    return ("<!DOCTYPE html><html><body>\n" + "\n".join(rows) + "\n</body></html>").encode()


def countdown(calls: int):
    """An ``expired`` that turns true after ``calls`` looks (the parse is cut wherever it is)."""
    left = [calls]

    def expired() -> bool:
        left[0] -= 1
        return left[0] < 0

    return expired


@pytest.mark.slow
@pytest.mark.parametrize("calls", [0, 1, 3, 8, 15])
def test_reading_a_page_stops_when_the_deadline_passes(calls):
    text = huge_page(5_000).decode()
    with pytest.raises(PageTimeoutError, match="not read within the deadline"):
        parse_html_page(text, "toylib", "u", expired=countdown(calls))
    files = [{"filename": f"toylib-1.{i}.tar.gz"} for i in range(5_000)]
    page = {"meta": {"api-version": "1.1"}, "files": files}
    with pytest.raises(PageTimeoutError):
        parse_json_page(page, "toylib", "u", expired=countdown(calls))
    # without a deadline the same pages read in full
    assert len(parse_html_page(text, "toylib", "u").releases) == 5_000


@pytest.mark.slow
def test_a_huge_page_is_a_failure_at_the_probe_deadline(index):
    """150k links (16 MiB): reading them took several seconds, far past this probe's 1.5 s
    budget; now the probe ends at its deadline with the reason."""
    body = huge_page(150_000)
    index.faults.clear()
    index.faults.add(INDEX_PATH, Fault(status=200, body=body, content_type="text/html"))
    policy = dataclasses.replace(FAST, budget=1.5)
    began = time.monotonic()
    found = probe_releases(fetcher(policy=policy), "toylib", [index.url])
    took = time.monotonic() - began
    index.faults.clear()
    assert isinstance(found, ProbeFailure), type(found)
    assert "not read within the deadline" in found.reason and found.probe == "index"
    assert took < 1.5 + 1.0, took


def test_the_first_look_at_the_deadline_comes_before_any_scan_of_the_whole_page():
    """Issue 30: a 300,000-anchor page was decided past its deadline under load. Nothing reads the
    whole page before the deadline is first looked at (the control-character scan, 46 MiB of it
    there, goes chunk by chunk with the parse): past the deadline, a page with a NUL at its end
    is a timeout, not a verdict on the NUL."""
    text = huge_page(5_000).decode() + "\x00"
    with pytest.raises(PageTimeoutError, match="not read within the deadline"):
        parse_html_page(text, "toylib", "u", expired=countdown(0))
    # read in full, the NUL is still found, at its offset
    with pytest.raises(PageError, match=f"control character '\\\\x00' at offset {len(text) - 1}"):
        parse_html_page(text, "toylib", "u")


@pytest.mark.slow
def test_a_huge_page_under_a_short_deadline_fails_within_about_it(index, tmp_path):
    """The 300,000-anchor page of issue 30 scaled down (40,000 links, 6 MiB: seconds of parsing
    on a loaded machine) under a 0.4 s budget, through a loopback index with the HTTP cache on:
    the probe ends within about its deadline, with the reason."""
    body = huge_page(40_000)
    index.faults.clear()
    index.faults.add(INDEX_PATH, Fault(status=200, body=body, content_type="text/html"))
    policy = dataclasses.replace(FAST, budget=0.4)
    began = time.monotonic()
    found = probe_releases(fetcher(tmp_path / "cache", policy=policy), "toylib", [index.url])
    took = time.monotonic() - began
    index.faults.clear()
    assert isinstance(found, ProbeFailure), type(found)
    assert "deadline" in found.reason and found.probe == "index", found.reason
    assert took < 0.4 + 1.0, took


def test_a_page_error_is_never_anything_else():
    """Whatever the page, the reader ends in a ReleaseList or a PageError."""
    for content_type, body in (*NOT_PAGES.values(), *EMPTY_PAGES.values()):
        if "json" in content_type:
            continue
        try:
            parse_html_page(body.decode("utf-8", "replace"), "toylib", "u")
        except PageError as exc:
            assert exc.reason


# -- release-tag patterns cannot hang a run ------------------------------------------------------

CATASTROPHIC = [
    r"v(?P<version>(\d+)+)",
    r"core_v(?P<version>(\d+\.?)+)",
    r"(?P<version>(a|a)*)",
    r"v(?P<version>([0-9]+-?)+)",
    r"(?P<version>(\w+\s?)+)",
    r"v(?P<version>\d*\d*\d*\d*\d*\d*x)",
]
SOUND = [
    r"v?(?P<version>\d+(?:\.\d+)*)",
    r"core_v(?P<version>\d+\.\d+\.\d+(?:rc\d+)?)",
    r"release-(?P<version>\d+(\.\d+)*)",
    r"v(?P<version>[\d.]+)",
    r"(?P<version>\d+\.\d+)(?:-post\d+)?",
]


def mirror_config(root: Path, pattern: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "patchlane.toml").write_text(
        f"[[mirrors.repository]]\nurl = \"https://github.com/org/toylib\"\ntags = '{pattern}'\n"
    )


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_a_catastrophic_tag_pattern_is_refused_when_read(tmp_path, pattern):
    mirror_config(tmp_path, pattern)
    began = time.monotonic()
    with pytest.raises(InputError) as caught:
        load_mirrors(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "patchlane.toml" in message
    assert "mirrors.repository[0].tags" in message and "backtracks" in message
    assert time.monotonic() - began < 3


@pytest.mark.parametrize("pattern", SOUND)
def test_sound_tag_patterns_are_accepted(tmp_path, pattern):
    mirror_config(tmp_path, pattern)
    found = load_mirrors(tmp_path).for_repository("https://github.com/org/toylib")
    assert found is not None and found.tags == pattern


def test_a_long_tag_is_never_a_release_tag():
    """Even a pattern that was never checked (a Mirror built in code) sees no tag over the length
    the checks cover."""
    mirror = Mirror("https://github.com/org/toylib", Path("/nonexistent"), r"v(?P<version>(\d+)+)")
    began = time.monotonic()
    assert mirror.tag_version("v" + "1" * (MAX_TAG_LENGTH + 5) + "x") is None
    assert mirror.tag_version("v12") == "12"
    assert time.monotonic() - began < 1


@pytest.mark.slow
def test_tags_read_past_their_budget_are_a_failure_not_a_hang(tmp_path, monkeypatch):
    upstream = make_upstream(tmp_path / "toylib")
    git(upstream.path, "tag", "v1.2", upstream.merge)
    monkeypatch.setattr(repo, "TAGS_BUDGET_S", -1.0)
    opened = open_mirror(Mirror("https://github.com/org/toylib", upstream.path))
    assert not isinstance(opened, ProbeFailure)
    found = opened.probe_commit(upstream.fix)
    assert isinstance(found, ProbeFailure) and "took over" in found.reason, found
    # the failure is kept: no other look-up pays for the tags again
    assert isinstance(opened.probe_commit(upstream.fix), ProbeFailure)


@pytest.mark.slow
def test_the_cli_refuses_the_pattern_instead_of_running_without_end(tmp_path):
    """Before: `patchlane mirrors list` matched a 45-character tag against v(\\d+)+ and never
    ended. Now: exit 2, one line naming the key — well within the limit this test sets."""
    upstream = make_upstream(tmp_path / "toylib")
    git(upstream.path, "tag", "v" + "1" * 44 + "x", upstream.merge)
    root = tmp_path / "project"
    mirror_config(root, r"v(?P<version>(\d+)+)")
    (root / "patchlane.toml").write_text(
        (root / "patchlane.toml").read_text() + f'path = "{upstream.path}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "retire", "--root", str(root), "mirrors", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "mirrors.repository[0].tags" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["(", ")", "+", "*", "?", "|", r"\d", r"\w", ".", "a", "v", "{2,}", "[0-9]"]
        )
        | st.just("(?P<version>"),
        max_size=14,
    ).map("".join),
    st.sampled_from(["tags", "branches", "path", "fetch", "url", "folder", "unknown"]),
)
def test_generated_mirror_sections_are_read_or_refused_in_one_line(pattern, key):
    """Generated ``[mirrors]`` sections: a MirrorSet or one InputError line, each within a bound."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        value = json.dumps(pattern)
        extra = f"{key} = {value}\n" if key != "folder" else ""
        head = f"[mirrors]\nfolder = {value}\n" if key == "folder" else ""
        (root / "patchlane.toml").write_text(
            head + '[[mirrors.repository]]\nurl = "https://github.com/o/r"\n' + extra
        )
        began = time.monotonic()
        try:
            found = load_mirrors(root)
        except InputError as exc:
            assert "\n" not in str(exc) and "patchlane.toml" in str(exc)
        else:
            for mirror in found.mirrors:
                # an accepted pattern matches the worst tags quickly
                mirror.tag_version("v" + "1" * MAX_TAG_LENGTH)
                mirror.tag_version("a" * (MAX_TAG_LENGTH - 1) + "!")
        assert time.monotonic() - began < 5
