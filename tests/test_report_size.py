"""The weekly JSON of the committed catalogue stays small: verdicts are gathered for real against
a loopback index as big as the real ones (every target with a long release history, each release
with a wheel per platform and Python), and the report summarises each release list instead of
embedding every file of every release (742 KB for ten shims before)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil

import pytest

from retire.core.project import Project
from retire.probes.http import RetryPolicy
from retire.report import weekly
from tests.conftest import ROOT
from tests.support.index import IndexServer, PackageIndex
from tests.support.wheels import build_wheel

NOW = _dt.datetime(2026, 11, 23, 12, 0, tzinfo=_dt.UTC)
TARGETS = ("torch", "megatron-core", "liger-kernel", "mamba-ssm", "tilelang", "transformer-engine")
TAGS = [
    f"cp3{minor}-cp3{minor}-{platform}"
    for minor in (10, 11, 12, 13)
    for platform in (
        "manylinux_2_28_x86_64",
        "manylinux_2_28_aarch64",
        "win_amd64",
        "macosx_11_0_arm64",
    )
]
#: The bound: 742 KB failed it (every file of every release). What is left grows with the
#: catalogue's own records and lanes, not with upstream's history: 156 KB for 10 shims, 13 lanes
#: and 252 records (a shim's window and each lane's place in it included). Each summarised release
#: list is bounded on its own (LIST_LIMIT), whatever the records add.
LIMIT = 250_000
LIST_LIMIT = 2_000


@pytest.fixture(scope="module")
def big_index(tmp_path_factory):
    """Each target: 60 releases × 16 wheels, uploaded over the last five years (a torch-sized
    history)."""
    root = tmp_path_factory.mktemp("big-index")
    template = build_wheel(root / "template", "placeholder", "1.0")
    index = PackageIndex()
    for target in TARGETS:
        stem = target.replace("-", "_")
        for n in range(60):
            version = f"{n // 20}.{n % 20}.0"
            when = NOW - _dt.timedelta(days=30 * (60 - n))
            for tag in TAGS:
                path = root / "files" / f"{stem}-{version}-{tag}.whl"
                path.parent.mkdir(parents=True, exist_ok=True)
                # the listing is what matters; the files are never installed
                os.link(template, path)
                index.add(path, when)
    with IndexServer(index) as server:
        yield server


@pytest.mark.slow
def test_the_catalogues_weekly_json_summarises_release_lists(big_index, tmp_path):
    shop = tmp_path / "shop"
    for folder in ("shims", "lanes", "locks", "validation"):
        shutil.copytree(ROOT / folder, shop / folder)
    options = {
        "index_url": big_index.url,
        "api_base": "http://127.0.0.1:9",
        "token": None,
        "clock": lambda: NOW,
        "policy": RetryPolicy(attempts=1, json_attempts=1),
        "mirrors": None,
    }
    written = weekly.generate(
        Project(shop), now=NOW, out=tmp_path / "reports", packs=None, gather_options=options
    )
    size = len(written.json_text.encode())
    data = json.loads(written.json_text)
    lists = [e for v in data["verdicts"] for e in v["evidence"] if e.get("kind") == "release-list"]
    assert lists, "the index was probed: release lists are part of the evidence"
    # The evidence a verdict rested on is still there, in summary: counts, the newest, the used
    # ones.
    assert all(
        e["summarised"] and e["count"] == 60 and e["newest"]["version"] == "2.19.0" for e in lists
    )
    assert all(
        "files" not in (e["newest"] or {}) or isinstance(e["newest"]["files"], int) for e in lists
    )
    assert size < LIMIT, f"the weekly JSON is {size} bytes for {len(data['shims'])} shims"
    assert max(len(json.dumps(e, indent=1)) for e in lists) < LIST_LIMIT
    # What the full lists would have cost (about 510 KB of verdicts alone): the bound could fail.
    full = len(json.dumps([v.to_json() for v in written.report.verdicts], indent=1).encode())
    assert full > LIMIT, full


def test_a_summary_keeps_the_releases_the_conditions_used():
    from packaging.version import Version

    from retire.evidence.floor import Floor
    from retire.evidence.values import PullState, Release, ReleaseFile, ReleaseList, to_json
    from retire.report.evidence import summarise_verdict
    from retire.verdicts.model import ConditionResult, Verdict

    def release(version, yanked=False):
        when = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
        return Release(
            Version(version),
            tuple(ReleaseFile(f"liger_kernel-{version}-{tag}.whl", when, yanked) for tag in TAGS),
        )

    releases = ReleaseList(
        "liger-kernel",
        "https://index.example/simple",
        tuple(release(v, yanked=v == "0.8.3") for v in ("0.8.1", "0.8.3", "0.8.5", "0.9.0rc1")),
    )
    pull = PullState("https://github.com/org/liger/pull/1", 1, "closed", True)
    verdict = Verdict(
        "liger",
        "retire",
        "version-floor: liger-kernel 0.8.5 released",
        floors=(Floor.parse("liger-kernel>=0.8.5"),),
        conditions=(ConditionResult("version-floor", "holds", "0.8.5 is out"),),
        evidence=(releases, pull),
    )
    summary = summarise_verdict(verdict)
    [listed, kept] = summary["evidence"]
    # other evidence is kept as it was
    assert kept == to_json(pull)
    assert (
        listed["count"],
        listed["yanked"],
        listed["newest"]["version"],
        listed["latest"]["version"],
    ) == (4, 1, "0.9.0rc1", "0.8.5")
    assert [r["version"] for r in listed["used"]] == ["0.8.5"] and listed["used"][0][
        "files"
    ] == len(TAGS)
    assert len(json.dumps(summary)) < len(json.dumps(verdict.to_json())) / 4
