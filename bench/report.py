"""Issue 6: the weekly retirement report for 500 shims × 50 lanes from cached evidence.

Synthetic but shaped like the real thing: 500 manifests (every fix class, linked or not),
50 lanes each listing ~40 % of the shims, the validation records of a lane run of every listed
pair (without + with shim, ~20,000 records), verdicts as the engine would return them (with
conditions and failures), and a previous report to compare with. Timed: the pure model
(``report_model.build``) and the three renderers (JSON, Markdown, HTML) — what ``patchlane report
--no-probe`` does after reading its inputs — and the three atomic writes. Goal: at most 1 s. The
sizes of the files are in the
detail (the Markdown is trimmed to fit one GitHub issue body).

Side by side, interleaved: the same report with the page's large sections parsed by markdown-it
from their Markdown instead of drawn from their blocks (``html.to_html(drawn=False)``, the page
before the blocks); the two pages must be the same bytes. Each sample starts cold: the text the
renderers memoise (``cell_text``, ``mdhtml.inline``) is forgotten first, as in a fresh
``patchlane report``. The CPU seconds are in the detail too (the machine is shared).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bench
from retire.evidence.floor import Floor
from retire.evidence.validation import ValidationRecord
from retire.evidence.values import ProbeFailure
from retire.lanes.model import Lane
from retire.report import build as report_build
from retire.report import mdhtml, sections
from retire.report import model as report_model
from retire.report.weekly import documents, write_report
from retire.verdicts.model import (
    ConditionResult,
    ConditionState,
    Decision,
    Flag,
    FlagKind,
    Verdict,
)
from shims.manifest import parse_manifest
from shims.model import FIX_CLASSES, ConditionKind, ShimManifest

SHIMS, LANES = 500, 50
NOW = _dt.datetime(2026, 11, 18, 12, 0, tzinfo=_dt.UTC)
GOAL_SECONDS = 1.0

_MANIFEST = """
id = "{id}"
title = "synthetic bug {n}"
fix-class = "{fix_class}"
explanation = "synthetic"
numerics = "bit-identical"
owner = "team{team}@example.org"
created = {created}

[target]
distribution = "lib{dist}"
module = "lib{dist}"

[upstream]
status = "{status}"
{links}
[retirement]
mode = "any"

[[retirement.conditions]]
kind = "version-floor"
version = ">=2.{n}"

[[retirement.conditions]]
kind = "reproducer-clean"
{env}"""


def _manifests(rng: random.Random) -> list[ShimManifest]:
    out = []
    for n in range(SHIMS):
        fix_class = FIX_CLASSES[n % len(FIX_CLASSES)]
        linked = n % 4 != 0
        links = (
            f'\n[[upstream.links]]\nrole = "report"\nurl = '
            f'"https://github.com/org{n % 7}/lib{n % 40}/issues/{n}"\n'
            if linked
            else ""
        )
        text = _MANIFEST.format(
            id=f"shim_{n:03d}",
            n=n,
            fix_class=fix_class,
            team=n % 9,
            dist=n % 40,
            created=(_dt.date(2025, 1, 1) + _dt.timedelta(days=rng.randrange(600))).isoformat(),
            status="submitted" if linked else "pending",
            links=links,
            env='\n[env]\nSYNTH_FLAG = "1"\n' if fix_class == "env-constraint" else "",
        )
        out.append(parse_manifest(text, f"shims/shim_{n:03d}/manifest.toml"))
    return out


def _lanes(rng: random.Random, shim_ids: list[str]) -> list[Lane]:
    return [
        Lane(
            name=f"lane-{i:02d}",
            python="3.12",
            platform="x86_64-manylinux_2_28",
            requirements=("torch",),
            shims=tuple(s for s in shim_ids if rng.random() < 0.4),
        )
        for i in range(LANES)
    ]


_PAIRS = [
    ("bug-reproduced", "fix-validated"),
    ("bug-reproduced", "fix-validated"),
    ("bug-reproduced", "fix-validated"),
    ("fix-validated", None),
    ("skipped", None),
    ("bug-reproduced", "bug-reproduced"),
    ("crashed", None),
]


def _records(rng: random.Random, lanes: list[Lane]) -> list[ValidationRecord]:
    records = []
    for lane in lanes:
        for shim in lane.shims:
            if rng.random() < 0.1:
                # never ran on this lane
                continue
            without, with_shim = rng.choice(_PAIRS)
            when = f"2026-11-{rng.randrange(10, 18):02d}T{rng.randrange(24):02d}:00:00.000000+00:00"
            host = {
                "hostname": f"host{rng.randrange(6)}",
                "gpu": "NVIDIA H100" if rng.random() < 0.3 else None,
            }
            for mode, outcome in (("without", without), ("with", with_shim)):
                if outcome is None:
                    continue
                records.append(
                    ValidationRecord(
                        shim=shim,
                        mode=mode,
                        lane=lane.name,
                        host=host,
                        versions={"torch": "2.11.0"},
                        sentinel=None,
                        outcome=outcome,
                        exit_code=0,
                        duration_s=1.0,
                        started_at=when,
                        run=f"run-{lane.name}",
                        detail="no CUDA device" if outcome == "skipped" else "",
                    )
                )
    return records


def _verdicts(
    rng: random.Random, manifests: list[ShimManifest], lanes: list[Lane]
) -> list[Verdict]:
    out = []
    for m in manifests:
        listing = tuple(lane.name for lane in lanes if m.id in lane.shims)
        kind = rng.choice(["keep"] * 6 + ["retire", "unknown", "stale", "drift"])
        flags = (Flag(FlagKind(kind), f"synthetic {kind}"),) if kind in ("stale", "drift") else ()
        decision = Decision.KEEP if flags else Decision(kind)
        fails = ConditionState.FAILS
        conditions = (
            ConditionResult(
                ConditionKind.VERSION_FLOOR,
                fails,
                f"no release of {m.target.distribution} inside >=2.0",
            ),
            ConditionResult(
                ConditionKind.REPRODUCER_CLEAN, fails, "BUG_REPRODUCED without the shim on lane-01"
            ),
        )
        failures = (
            (ProbeFailure("codehost", f"https://github.com/x/y/issues/{m.id}", "server error 502"),)
            if decision is Decision.UNKNOWN
            else ()
        )
        out.append(
            Verdict(
                m.id,
                decision,
                f"synthetic {decision}: " + "; ".join(c.why for c in conditions),
                flags=flags,
                lanes=listing,
                conditions=conditions,
                failures=failures,
                floors=(Floor.parse(f"{m.target.distribution}>=2.0"),)
                if decision is Decision.RETIRE
                else (),
            )
        )
    return out


def _previous(verdicts: list[Verdict]) -> report_model.PreviousReport:
    flipped = {v.shim: ("keep" if i % 10 else "unknown") for i, v in enumerate(verdicts[25:])}
    return report_model.PreviousReport("2026-W46", flipped, frozenset(), len(flipped), 3)


def inputs(seed: int = 6) -> dict:
    rng = random.Random(seed)
    manifests = _manifests(rng)
    lanes = _lanes(rng, [m.id for m in manifests])
    verdicts = _verdicts(rng, manifests, lanes)
    history = [
        report_model.BurnPoint(
            report_model.iso_week(NOW.date() - _dt.timedelta(weeks=w)),
            400 + w,
            None,
            report_model.BurnSource.GIT,
        )
        for w in range(1, 80)
    ]
    return {
        "manifests": manifests,
        "lanes": lanes,
        "verdicts": verdicts,
        "records": _records(rng, lanes),
        "previous": _previous(verdicts),
        "history": history,
    }


def generate(data: dict, *, drawn: bool = True) -> tuple[str, str, str]:
    report = report_build.build(
        data["manifests"],
        data["lanes"],
        data["verdicts"],
        data["records"],
        week="2026-W47",
        now=NOW,
        previous=data["previous"],
        history=data["history"],
    )
    return documents(report, full_report="reports/2026-W47.html (and .json)", drawn=drawn)


def generate_and_write(data: dict, folder: Path, *, drawn: bool = True) -> tuple[str, str, str]:
    markdown, json_text, page = generate(data, drawn=drawn)
    write_report(folder, "2026-W47", [(".md", markdown), (".html", page), (".json", json_text)])
    return markdown, json_text, page


def _forget() -> None:
    """What the renderers memoised from an earlier sample: each sample is a fresh report."""
    for memo in (sections._inert, mdhtml.inline, mdhtml._cell):
        memo.cache_clear()


def _cold(action: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one call, from cold memos."""
    _forget()
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def run() -> list[dict]:
    data = inputs()
    repeats = 3 if bench.quick() else 7
    samples: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="bench-report-") as folder:
        write = functools.partial(generate_and_write, data, Path(folder))
        for round_number in range(repeats):
            # which page goes first alternates, so a slow phase of the machine hits both alike
            for drawn in (True, False) if round_number % 2 == 0 else (False, True):
                samples[drawn].append(_cold(functools.partial(write, drawn=drawn)))
    seconds, cpu = (bench.median([sample[i] for sample in samples[True]]) for i in (0, 1))
    parsed, parsed_cpu = (bench.median([sample[i] for sample in samples[False]]) for i in (0, 1))
    markdown, json_text, page = generate(data)
    same = page == generate(data, drawn=False)[2]
    assert dataclasses.is_dataclass(data["verdicts"][0])
    detail = (
        f"{SHIMS} shims × {LANES} lanes, {len(data['records'])} records: median of {repeats} "
        f"{seconds:.3f} s, {cpu:.3f} CPU-s (model + JSON + Markdown + HTML, three atomic "
        f"writes); md {len(markdown) / 1e3:.0f} kB "
        f"(issue body limit 65 kB), json {len(json_text) / 1e6:.1f} MB, html {len(page) / 1e6:.1f} "
        f"MB"
    )
    return [
        bench.row(
            "report.500x50-from-cache",
            seconds,
            f"<= {GOAL_SECONDS:g} s",
            "s",
            seconds <= GOAL_SECONDS,
            detail,
        ),
        bench.row(
            "report.500x50-parsed-vs-drawn",
            parsed / seconds,
            "the same page",
            "x",
            same,
            (
                f"every section parsed by markdown-it: {parsed:.3f} s, {parsed_cpu:.3f} CPU-s "
                f"(medians of {repeats}, interleaved with the drawn page); the two pages "
                + ("are the same bytes" if same else "DIFFER")
            ),
        ),
    ]
