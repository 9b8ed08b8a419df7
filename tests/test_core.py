"""The engine's shared plumbing: UTC times."""

from __future__ import annotations

import datetime as dt

import pytest

from shims import times

UTC = dt.UTC


def test_times_parse_accepts_z_and_offsets_and_returns_utc():
    assert times.parse("2026-11-15T09:00:00Z") == dt.datetime(2026, 11, 15, 9, tzinfo=UTC)
    moment = times.parse("2026-11-15T11:00:00.5+02:00")
    assert moment.tzinfo is UTC and moment == dt.datetime(2026, 11, 15, 9, 0, 0, 500000, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, why",
    [
        ("2026-11-15T09:00:00", "has no UTC offset"),
        ("2026-11-15", "has no UTC offset"),
        ("last tuesday", "not an ISO 8601 date or time"),
        ("9999-12-31T23:00:00-05:00", "out of range in UTC"),
        ("0001-01-01T00:00:00+01:00", "out of range in UTC"),
    ],
)
def test_times_parse_rejects_naive_malformed_and_overflowing_values_in_one_line(text, why):
    with pytest.raises(times.TimeError, match=why) as caught:
        times.parse(text)
    assert "\n" not in str(caught.value) and isinstance(caught.value, ValueError)


def test_times_naive_input_documented_as_utc_is_read_as_utc():
    assert times.parse("2026-11-15T09:00", assume_utc=True) == dt.datetime(
        2026, 11, 15, 9, tzinfo=UTC
    )
    assert times.parse("2026-11-15", assume_utc=True) == dt.datetime(2026, 11, 15, tzinfo=UTC)
    assert times.to_utc(dt.date(2026, 11, 15)) == dt.datetime(2026, 11, 15, tzinfo=UTC)
    with pytest.raises(times.TimeError):
        times.to_utc(dt.datetime(2026, 11, 15))


def test_times_format_utc_is_whole_seconds_with_z():
    assert (
        times.format_utc(
            dt.datetime(2026, 11, 15, 11, 0, 0, 999, tzinfo=dt.timezone(dt.timedelta(hours=2)))
        )
        == "2026-11-15T09:00:00Z"
    )
    assert times.parse(times.format_utc(times.now())).tzinfo is UTC


# ---------------------------------------------------------------------------------------------
# git


def test_git_runs_in_a_clean_environment_and_fails_in_one_line(tmp_path, monkeypatch):
    from retire.core.git import Git, GitError, environment
    from tests.support.gitrepos import commit, git

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    sha = commit(repo, "a.txt", "1\n", "first")
    # A hook's GIT_DIR must not redirect git away from the repository it was asked about.
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    env = environment({"GIT_AUTHOR_NAME": "x"})
    assert "GIT_DIR" not in env and env["GIT_AUTHOR_NAME"] == "x"
    assert (
        env["GIT_CONFIG_NOSYSTEM"],
        env["GIT_TERMINAL_PROMPT"],
        env["LC_ALL"],
        env["GIT_PAGER"],
    ) == ("1", "0", "C", "cat")
    assert Git(repo).rev_parse("HEAD") == sha and Git(repo).rev_parse("nope") is None
    assert Git(repo).commits_touching("a.txt")[0][0] == sha
    with pytest.raises(GitError) as caught:
        Git(repo).run("checkout", "no-such-branch")
    assert str(caught.value).startswith("git checkout failed: ") and "\n" not in str(caught.value)


def test_git_without_search_parents_sees_only_the_folder_itself(tmp_path):
    from retire.core.git import Git
    from tests.support.gitrepos import git

    git(tmp_path, "init", "-q")
    inner = tmp_path / "plain"
    inner.mkdir()
    assert Git(inner).is_repository()
    assert not Git(inner, search_parents=False).is_repository()


def test_git_timeout_is_a_git_error(tmp_path):
    from retire.core.git import Git, GitError

    with pytest.raises(GitError, match="timed out"):
        Git(tmp_path, timeout=0.001).run("hash-object", "--stdin", input="x" * 10_000_000)


# ---------------------------------------------------------------------------------------------
# uv


def test_uv_run_reports_failures_as_exit_codes_and_failure_lines_drop_warnings():
    from retire.core import uv

    assert uv.run(["--version"]).stdout.split()[1] == uv.version()
    failed = uv.run(["pip", "compile", "no-such-requirements.in", "--quiet"])
    assert failed.returncode != 0 and uv.failure_lines(failed.stderr)
    assert uv.failure_lines("warning: slow\n\n  error: no\n  Caused by: x\n") == [
        "error: no",
        "Caused by: x",
    ]


# ---------------------------------------------------------------------------------------------
# vocabularies


def test_vocabularies_are_str_enums_whose_text_is_the_protocol():
    import json

    from retire.evidence.validation import (
        FAILING,
        FIXED,
        OUTCOMES,
        PROVING,
        RunOutcome,
        ShimOutcome,
    )
    from retire.verdicts.model import ConditionState
    from shims.reproducer import MODES, SENTINELS, Mode, Sentinel, parse_output

    assert SENTINELS == ("BUG_REPRODUCED", "FIX_VALIDATED", "MEMORY_SAVE_VERIFIED", "SKIPPED")
    assert MODES == ("without", "with") and f"{Mode.WITH}-shim" == "with-shim"
    assert OUTCOMES == (
        "bug-reproduced",
        "fix-validated",
        "memory-save-verified",
        "skipped",
        "crashed",
        "timeout",
    )
    assert {"fix-validated", "memory-save-verified"} == FIXED and FIXED | {
        "bug-reproduced"
    } == PROVING
    assert {"shim-broken", "crashed", "timeout"} == FAILING and ShimOutcome.NOT_RUN == "not-run"
    assert [str(s) for s in ConditionState] == ["holds", "fails", "unknown"]
    assert (
        json.dumps({RunOutcome.CRASHED: [Sentinel.SKIPPED, Mode.WITHOUT]})
        == '{"crashed": ["SKIPPED", "without"]}'
    )
    _, sentinel, reason = parse_output("PATCHLANE-HOST {}\nSKIPPED: no GPU\n")
    assert sentinel is Sentinel.SKIPPED and reason == "no GPU"


def test_every_outcome_and_condition_state_has_one_look():
    from retire.evidence.validation import ShimOutcome
    from retire.report import vocabulary
    from retire.verdicts.model import ConditionState, Decision

    assert list(vocabulary.OUTCOMES) == list(ShimOutcome)
    assert all(
        look.emoji and look.glyph and look.label and look.colour
        for look in vocabulary.OUTCOMES.values()
    )
    assert set(vocabulary.CONDITIONS) == set(ConditionState)
    assert set(Decision) | {"stale", "drift"} == set(vocabulary.VERDICTS)
    assert (
        vocabulary.verdict("someday") == vocabulary.PLAIN
        and vocabulary.condition("maybe").emoji == "maybe"
    )
