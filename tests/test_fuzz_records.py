"""Fuzzing the validation manifest (JSON Lines) and the run summaries: the store never breaks.

Generated manifests — records whose text holds every character that some reader takes as a line
break, records with values swapped for odd ones, edited and cut lines, random bytes — go through
:func:`retire.evidence.validation.load`, ``append`` and ``merge``. The properties:

- the reader is never stricter than the writer: whatever ``append`` wrote, ``load`` returns as is;
- nothing but the one input-error type escapes, and only for a path that is not a file;
- a damaged line never blocks: every other line loads, the damaged ones are quarantined, the next
  append moves them out, and afterwards the manifest loads clean.

About 1,500 inputs in a few seconds (``PATCHLANE_FUZZ_EXAMPLES`` as in test_fuzz_inputs).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retire.commands import main
from retire.evidence import validation
from retire.evidence.validation import ValidationRecord
from shims.errors import InputError
from tests.test_fuzz_inputs import FUZZ, SYNTAX, edited, emit, mutated, pools
from tests.test_validation import record

#: Characters ``str.splitlines`` (and some editors) break lines at, plus the ones JSON must escape.
BREAKERS = '\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\x7f\ud800\udfff"\\'
odd_text = st.text(st.sampled_from(BREAKERS) | st.characters(), max_size=40)
SEED = json.loads(
    validation.dumps(record(output_tail="x", detail="y", environment={"kind": "full"}))
)


def quiet(call, *args):
    """Warnings about damaged lines are expected here: keep them off the test's output."""
    with contextlib.redirect_stderr(io.StringIO()):
        return call(*args)


@pytest.mark.slow
@FUZZ
@given(texts=st.lists(odd_text, min_size=6, max_size=6), number=st.integers(0, 10**6))
def test_any_text_a_reproducer_prints_round_trips(tmp_path_factory, texts, number):
    """The writer escapes what the reader would split on: append → load gives the records back."""
    path = tmp_path_factory.mktemp("m") / "manifest.jsonl"
    tail, detail, host, lane, shim, gpu = texts
    records = [
        record(
            output_tail=tail,
            detail=detail,
            host=host,
            lane=lane,
            shim=shim or "s",
            started=f"2026-04-14T10:00:00.{number:06d}+00:00",
        ),
        ValidationRecord(
            shim=shim,
            mode="with",
            lane=lane,
            host={"hostname": host, "gpu": gpu, "packages": {tail: detail}},
            versions={detail: tail},
            sentinel=tail or None,
            outcome="crashed",
            exit_code=number,
            duration_s=number / 7,
            started_at=detail,
            output_tail=tail,
            detail=detail,
            run=lane,
            environment={"installed": {shim: host}},
        ),
    ]
    assert quiet(validation.append, path, records) == len({r.record_id for r in records})
    # one line each
    assert path.read_bytes().count(b"\n") == len(path.read_text(encoding="utf-8").splitlines())
    loaded, damaged = quiet(validation.load_checked, path)
    assert damaged == [] and loaded == list({r.record_id: r for r in records}.values())
    assert quiet(validation.merge, [path, path]) == sorted(loaded, key=lambda r: r.started_at)


def _line(rnd: random.Random, pool: list) -> bytes:
    """One manifest line: a valid record, a mutated one, an edited one, or random bytes."""
    choice = rnd.choice(["valid", "mutated", "mutated", "edited", "bytes", "deep"])
    if choice == "valid":
        return validation.dumps(record(host=f"h{rnd.randint(0, 10**9)}")).encode()
    if choice == "mutated":
        return json.dumps(mutated(rnd, SEED, pool), default=emit).encode("utf-8", "surrogatepass")
    if choice == "edited":
        text = edited(
            rnd, json.dumps(SEED), [str(v) for v in pool if isinstance(v, str)] + list(BREAKERS)
        )
        return text.encode("utf-8", "surrogatepass")
    if choice == "deep":
        depth = rnd.choice([10, 500, 5000, 100_000])
        return (
            (b'{"host": ' + b"[" * depth + b"]" * depth + b"}")
            if rnd.random() < 0.5
            else b"[" * depth
        )
    return bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 60)))


@pytest.mark.slow
@FUZZ
@given(pool=pools, rnd=st.randoms(use_true_random=True))
def test_damaged_manifests_never_block_the_store(tmp_path_factory, pool, rnd):
    folder = tmp_path_factory.mktemp("m")
    path = folder / "manifest.jsonl"
    for _ in range(4):
        lines = [_line(rnd, pool) for _ in range(rnd.randint(1, 6))]
        path.write_bytes(b"\n".join(lines) + rnd.choice([b"\n", b""]))
        # never raises for a file
        loaded, damaged = quiet(validation.load_checked, path)
        nonblank = [line for line in path.read_bytes().split(b"\n") if line.strip()]
        assert len(loaded) + len(damaged) == len(nonblank)
        for item in damaged:
            assert "\n" not in item.problem and len(item.problem) <= 200
        new = record(host=f"new-{rnd.random()}")
        # a damaged line never stops a record from landing
        quiet(validation.append, path, [new])
        after, left = quiet(validation.load_checked, path)
        # damage moved out; everything written reads back
        assert left == [] and new in after
        assert {r.record_id for r in loaded} <= {r.record_id for r in after}
        if damaged:
            quarantined = validation.quarantine_path(path).read_bytes().split(b"\n")
            assert all(item.line in quarantined for item in damaged)
        path.unlink()


@pytest.mark.slow
@FUZZ
@given(pool=pools, rnd=st.randoms(use_true_random=True))
def test_validation_merge_through_the_cli_never_tracebacks(tmp_path_factory, pool, rnd):
    folder = tmp_path_factory.mktemp("merge")
    inputs = []
    for index in range(2):
        path = folder / f"host{index}.jsonl"
        path.write_bytes(b"\n".join(_line(rnd, pool) for _ in range(rnd.randint(0, 4))))
        inputs.append(str(path))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(
            [
                "--root",
                str(folder),
                "validation",
                "merge",
                *inputs,
                "-o",
                str(folder / "merged.jsonl"),
            ]
        )
    assert code == 0 and "Traceback" not in err.getvalue()
    assert all(line.startswith("patchlane: warning: ") for line in err.getvalue().splitlines())
    assert quiet(validation.load_checked, folder / "merged.jsonl")[1] == []


SUMMARY_SEED = {
    "lane": "a",
    "status": "passed",
    "planned": ["s"],
    "why": "",
    "seconds": 1.5,
    "shims": [{"shim": "s", "outcome": "needed", "why": ""}],
}


@pytest.mark.slow
@FUZZ
@given(pool=pools, rnd=st.randoms(use_true_random=True))
def test_run_summaries_are_read_or_refused_in_one_line(tmp_path_factory, pool, rnd):
    root = tmp_path_factory.mktemp("summary")
    folder = root / ".patchlane" / "runs" / "r1"
    folder.mkdir(parents=True)
    for _ in range(3):
        choice = rnd.choice(["mutated", "mutated", "edited"])
        text = (
            json.dumps(mutated(rnd, SUMMARY_SEED, pool), default=emit)
            if choice == "mutated"
            else edited(rnd, json.dumps(SUMMARY_SEED), SYNTAX)
        )
        (folder / "a.json").write_bytes(text.encode("utf-8", "surrogatepass"))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--root", str(root), "summary", "--run-id", "r1"])
        assert code in (0, 1, 2), code
        if code == 2:
            assert (
                err.getvalue().startswith("patchlane: error: ") and err.getvalue().count("\n") == 1
            ), err.getvalue()


def test_a_manifest_that_is_not_a_file_is_one_input_error(tmp_path: Path):
    with pytest.raises(InputError, match="not a regular file"):
        validation.load(tmp_path)
    # a fresh project has none yet
    assert validation.load(tmp_path / "missing.jsonl") == []
