"""The pure parts of bisection: the search over candidate states, and the range from evidence."""

from __future__ import annotations

import math

import pytest
from packaging.specifiers import SpecifierSet

from retire import bisect
from retire.bisect import Limits, Status
from retire.bisect.prober import stopping
from retire.evidence.validation import ValidationRecord


def _probe(states: dict[str, str], asked: list[str], known=None):
    """A prober of ``states`` that logs what it ran in ``asked``; ``known``: its cache."""

    def probe(version: str) -> bisect.CandidateRun:
        asked.append(version)
        return bisect.CandidateRun(version, states[version], states[version])

    return bisect.prober_of(probe, known)


def test_candidates_are_ordered_and_skip_yanked_and_prereleases():
    c = bisect.select_candidates(
        ["1.10", "1.2", "1.9", "2.0rc1", "1.3.dev20260701", "1.4", "junk"], {"1.4"}
    )
    assert c.versions == ("1.2", "1.9", "1.10")
    assert (
        c.yanked == ("1.4",)
        and c.prereleases == ("1.3.dev20260701", "2.0rc1")
        and c.invalid == ("junk",)
    )
    c = bisect.select_candidates(
        ["1.2", "2.0rc1", "1.3.dev20260701"], include_prereleases=True, since="1.3.dev0"
    )
    assert c.versions == ("1.3.dev20260701", "2.0rc1") and c.out_of_range == ("1.2",)
    # A bound with a local label (a CPU build of torch) bounds the release it builds on.
    c = bisect.select_candidates(["2.12.0", "2.13.0", "2.14.0"], since="2.13.0+cpu")
    assert c.versions == ("2.13.0", "2.14.0") and c.out_of_range == ("2.12.0",)


@pytest.mark.slow
@pytest.mark.parametrize("known_broken", [None, "0"])
def test_conclusive_runs_stay_within_log2_n_plus_one_for_every_boundary(known_broken):
    """Every range size up to 65 and every place the fix can land (or not land): the answer is
    right and the runs asked never exceed ceil(log2 n) + 1."""
    for n in range(1, 66):
        versions = [str(i) for i in range(n)]
        for first_fixed in range(n + 1):
            states = {v: "broken" if int(v) < first_fixed else "fixed" for v in versions}
            asked: list[str] = []
            out = bisect.find_boundary(versions, _probe(states, asked), known_broken=known_broken)
            assert len(asked) <= math.ceil(math.log2(n)) + 1, (n, first_fixed, asked)
            if 0 < first_fixed < n:
                assert out.status == Status.FOUND and (out.last_broken, out.first_fixed) == (
                    str(first_fixed - 1),
                    str(first_fixed),
                )
            elif first_fixed == n:
                assert out.status == Status.NO_TRANSITION and "still reproduces" in out.reason
            else:
                assert out.status == Status.NO_TRANSITION and out.first_fixed is None
                # The evidence said the oldest is broken and here it is not: said so, never a
                # boundary.
                assert ("recorded broken" if known_broken else "already fixed") in out.reason


def test_not_applicable_releases_are_stepped_over_and_do_not_count_as_unknown():
    """30 old releases lack the tested API (the reproducer skips): far more than the 4 unknowns
    the search tolerates. The boundary is still found, in few runs, and they are reported apart."""
    versions = [f"1.{i}" for i in range(60)]
    states = {
        v: "not-applicable" if i < 30 else "broken" if i < 47 else "fixed"
        for i, v in enumerate(versions)
    }
    asked: list[str] = []
    out = bisect.find_boundary(versions, _probe(states, asked), limits=Limits(max_unknown=4))
    assert out.status == Status.FOUND and (out.last_broken, out.first_fixed) == ("1.46", "1.47")
    conclusive = [v for v in asked if states[v] != "not-applicable"]
    assert len(conclusive) <= math.ceil(math.log2(60)) + 1
    # one or two looks into the old span, not a walk through it
    assert 1 <= len(asked) - len(conclusive) <= 3


def test_not_applicable_between_the_two_still_pins_the_boundary():
    versions = ["1.0", "1.1", "1.2", "1.3"]
    states = {"1.0": "broken", "1.1": "broken", "1.2": "not-applicable", "1.3": "fixed"}
    out = bisect.find_boundary(versions, _probe(states, []))
    assert out.status == Status.FOUND and (out.last_broken, out.first_fixed) == ("1.1", "1.3")
    assert [r.version for r in out.between] == ["1.2"]


def test_unknowns_are_stepped_around_and_counted():
    truth = {f"v{i}": ("broken" if i < 70 else "fixed") for i in range(100)}
    truth["v50"] = truth["v49"] = "unknown"
    asked: list[str] = []
    out = bisect.find_boundary([f"v{i}" for i in range(100)], _probe(truth, asked))
    assert out.status == Status.FOUND and (out.last_broken, out.first_fixed) == ("v69", "v70")
    # two unknowns cost one extra run each
    assert len(asked) <= math.ceil(math.log2(100)) + 1 + 2
    # Four unknowns at the boundary: stop, say what is left, never guess.
    truth.update({f"v{i}": "unknown" for i in range(66, 72)})
    out = bisect.find_boundary([f"v{i}" for i in range(100)], _probe(truth, []))
    assert out.status == Status.UNPINNED and "could not be told" in out.reason


def test_answers_at_hand_cost_no_run_and_narrow_the_search():
    versions = [str(i) for i in range(16)]
    states = {v: "broken" if int(v) < 11 else "fixed" for v in versions}
    known = {
        v: bisect.CandidateRun(v, states[v], states[v], cached=True) for v in ("10", "11", "15")
    }
    asked: list[str] = []
    out = bisect.find_boundary(versions, _probe(states, asked, known))
    assert out.status == Status.FOUND and out.first_fixed == "11" and asked == []
    assert {r.version for r in out.runs} == {"10", "11", "15"}


def test_evidence_below_the_candidates_is_the_lower_bound():
    """The release recorded broken is not a candidate here (yanked, or a nightly): the first
    candidate being fixed pins the boundary on the evidence."""
    states = {"2.1": "fixed", "2.2": "fixed"}
    out = bisect.find_boundary(["2.1", "2.2"], _probe(states, []), known_broken="2.0")
    assert out.status == Status.FOUND and (out.last_broken, out.first_fixed) == ("2.0", "2.1")
    assert out.broken_here is False


def test_a_host_where_nothing_applies_stops_with_the_reason():
    versions = [str(i) for i in range(40)]
    states = dict.fromkeys(versions, "not-applicable")
    asked: list[str] = []
    out = bisect.find_boundary(versions, _probe(states, asked), limits=Limits(max_not_applicable=5))
    assert (
        out.status == Status.NO_TRANSITION
        and len(asked) == 5
        and "not applicable here" in out.reason
    )


# ---------------------------------------------------------------------------------------------
# The range


def _record(
    lane: str, host: str, outcome: str, versions: dict, *, shim: str = "s", mode: str = "without"
) -> ValidationRecord:
    return ValidationRecord(
        shim=shim,
        mode=mode,
        lane=lane,
        host={"hostname": host},
        versions=versions,
        sentinel=outcome.upper().replace("-", "_"),
        outcome=outcome,
        exit_code=10,
        duration_s=1.0,
        started_at=f"2026-05-0{len(lane) % 9 + 1}T00:00:00+00:00",
    )


RELEASES = ["0.15.0", "0.16.0", "0.17.0", "0.18.0", "0.19.0", "0.19.1", "0.19.2", "0.20.0"]


def test_the_newest_recorded_broken_release_sets_the_range():
    records = [
        _record("cpu", "vm", "bug-reproduced", {"megatron-core": "0.16.1", "torch": "2.13.0+cpu"}),
        # any spelling of the name
        _record("gpu", "h100-1", "bug-reproduced", {"Megatron_Core": "0.19.2"}),
        # with the shim: no
        _record("gpu", "h100-1", "bug-reproduced", {"megatron-core": "0.20.0"}, mode="with"),
        # not a broken one
        _record("gpu", "h100-1", "fix-validated", {"megatron-core": "0.20.0"}),
        _record("gpu", "h100-1", "bug-reproduced", {"megatron-core": "0.20.0"}, shim="other"),
    ]
    evidence = bisect.broken_evidence("s", "megatron-core", records, releases=RELEASES)
    bounds = bisect.choose_bounds("megatron-core", evidence)
    assert (bounds.since, bounds.known_broken) == ("0.19.2", "0.19.2")
    assert bounds.note == "from BUG_REPRODUCED on megatron-core 0.19.2, lane gpu on h100-1"
    candidates = bisect.select_candidates(RELEASES, since=bounds.since)
    assert candidates.versions == ("0.19.2", "0.20.0") and len(candidates.out_of_range) == 6


def test_a_lane_lock_counts_where_the_lane_recorded_the_bug_without_saying_the_release():
    # no megatron-core version
    records = [_record("gpu", "h100-1", "bug-reproduced", {"torch": "2.11.0"})]
    evidence = bisect.broken_evidence(
        "s", "megatron-core", records, lane_locks={"gpu": "0.18.0", "cpu": "0.20.0"}
    )
    assert [(e.version, e.source) for e in evidence] == [("0.18.0", "lock")]
    assert "lane gpu's lock" in bisect.choose_bounds("megatron-core", evidence).note
    # A lane that never recorded the bug says nothing, whatever it locks; a lock that is not a
    # PEP 440 version (a hand-edited file) says nothing either.
    assert bisect.broken_evidence("s", "megatron-core", [], lane_locks={"gpu": "0.18.0"}) == []
    assert (
        bisect.broken_evidence("s", "megatron-core", records, lane_locks={"gpu": "main-branch"})
        == []
    )


@pytest.mark.parametrize(
    "affected, start",
    [
        ("<0.19.1", "0.19.0"),
        (">=0.16.0,<=0.19.2", "0.19.2"),
        ("==0.17.*", "0.17.0"),
        # no upper bound: it says nothing of where the bug ends
        (">=0.16.0", None),
        # nothing listed inside it
        ("<0.1", None),
    ],
)
def test_the_affected_range_bounds_from_its_upper_end(affected, start):
    evidence = bisect.broken_evidence(
        "s", "megatron-core", [], affected=SpecifierSet(affected), releases=RELEASES
    )
    bounds = bisect.choose_bounds("megatron-core", evidence)
    assert bounds.since == start
    if start:
        assert (
            bounds.note
            == f'from [target] affected = "{SpecifierSet(affected)}": its newest listed release '
            f"megatron-core {start}"
        )
    else:
        assert bounds.note.startswith("every release: no recorded evidence")


def test_since_and_all_override_the_evidence():
    evidence = [bisect.BrokenEvidence("0.19.2", "record", "lane gpu on h100-1")]
    since = bisect.choose_bounds("d", evidence, since="0.16.0")
    # the range starts at --since; the evidence inside it is where a window search starts from
    assert (since.since, since.known_broken) == ("0.16.0", "0.19.2")
    assert bisect.choose_bounds("d", evidence, since="0.19.3").known_broken is None
    assert bisect.choose_bounds("d", evidence, since="0.16.0", until="0.19.1").known_broken is None
    every = bisect.choose_bounds("d", evidence, every=True, until="0.19.1")
    assert (every.since, every.until, every.known_broken) == (None, "0.19.1", None)
    assert every.note == "every release (--all), up to --until 0.19.1"
    newest = bisect.choose_bounds(
        "d", [*evidence, bisect.BrokenEvidence("0.18.0", "affected", '"<0.18.1"')]
    )
    assert newest.since == "0.19.2"


def test_a_budget_stops_the_search_where_it_is_and_cached_answers_cost_nothing():
    """The progress's ``stop`` is a budget the caller keeps (``--bisect-budget``): asked before
    each fresh run; its reason ends the search with what it found so far, and a later search with
    those answers cached resumes where it stopped."""
    versions = [str(i) for i in range(16)]
    states = {v: "broken" if int(v) < 11 else "fixed" for v in versions}
    asked: list[str] = []
    budget = 2

    def stop() -> str | None:
        return "the budget of 2 reproducer runs is spent" if len(asked) >= budget else None

    first = bisect.find_boundary(versions, _probe(states, asked), progress=stopping(stop))
    assert len(asked) == 2 and first.status == Status.UNPINNED
    assert "the budget of 2 reproducer runs is spent" in first.reason
    # nothing asked at all: the newest end is not verified
    none_asked: list[str] = []
    nothing = bisect.find_boundary(
        versions, _probe(states, none_asked), progress=stopping(lambda: "spent")
    )
    assert none_asked == [] and nothing.status == Status.NO_TRANSITION
    assert nothing.reason == "stopped before the newest end was verified: spent"
    # next week: the two answers are cached (free even with no budget left for them)
    known = {r.version: bisect.CandidateRun(r.version, r.state, r.outcome) for r in first.runs}
    again: list[str] = []
    budget = 10
    done = bisect.find_boundary(
        versions,
        _probe(states, again, known),
        progress=stopping(lambda: None if len(again) < 10 else "x"),
    )
    assert done.status == Status.FOUND and done.first_fixed == "11"
    assert not set(again) & set(known) and len(again) + len(known) <= math.ceil(math.log2(16)) + 1
