"""The result of one bisection: the range and what set it, the boundary found (or why there is
none), every probe, and the retirement floor it proposes. A value: no I/O."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from packaging.version import Version

from retire.bisect.search import (
    NOT_APPLICABLE,
    UNKNOWN,
    CandidateRun,
    Candidates,
    Status,
)
from retire.core import mdsafe
from retire.evidence.floor import Floor

__all__ = ["BisectResult"]


@dataclass(frozen=True)
class BisectResult:
    """``status``: ``found`` (last broken and first fixed are neighbours, not counting candidates
    the reproducer does not apply to), ``unpinned`` (unknown or untested candidates lie between
    them: the first fixed release is one of those or ``first_fixed``), or ``no-transition``
    (``reason`` says which end did not behave)."""

    shim: str
    distribution: str
    status: Status
    reason: str
    first_fixed: str | None
    last_broken: str | None
    # unknown or untested candidates between the two
    unknown_between: tuple[str, ...]
    # reproducer runs made now (cached answers cost none)
    runs: int
    # in the order they were asked
    probes: tuple[CandidateRun, ...]
    candidates: Candidates
    # fingerprint of the base environment
    base: str
    seconds: float = 0.0
    #: Which evidence set the range: "from BUG_REPRODUCED on toylib 1.3, lane cpu on host-1",
    #: "--all", …
    range_note: str = ""
    #: Where ``last_broken`` was shown broken when no run here did (the evidence), else "".
    last_broken_evidence: str = ""
    not_applicable_between: tuple[str, ...] = ()
    #: Records this bisection added to the validation manifest.
    records_added: int = 0

    @property
    def releases_available(self) -> int:
        """Candidates in the range (yanked, pre-releases and releases outside it not counted)."""
        return len(self.candidates.versions)

    @property
    def run_bound(self) -> int:
        """ceil(log2(n)) + 1 conclusive runs: the newest end, then n possible boundaries halved."""
        n = self.releases_available
        return (math.ceil(math.log2(n)) + 1) if n else 0

    @property
    def conclusive_runs(self) -> int:
        """Reproducer runs made now that told broken from fixed."""
        return sum(1 for p in self.probes if p.conclusive and not p.cached)

    @property
    def not_applicable(self) -> tuple[CandidateRun, ...]:
        return tuple(p for p in self.probes if p.state == NOT_APPLICABLE)

    @property
    def unknown(self) -> tuple[CandidateRun, ...]:
        return tuple(p for p in self.probes if p.state == UNKNOWN)

    @property
    def floor(self) -> Floor | None:
        """The retirement floor, ``<dist>>=<first fixed>``, when a fixed release was proven."""
        if self.status in (Status.FOUND, Status.UNPINNED) and self.first_fixed:
            return Floor(self.distribution, Version(self.first_fixed))
        return None

    def run_of(self, version: str | None) -> CandidateRun | None:
        return next((p for p in self.probes if p.version == version), None)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["candidates"] = asdict(self.candidates)
        data.update(
            floor=None if self.floor is None else str(self.floor),
            releases_available=self.releases_available,
            run_bound=self.run_bound,
            conclusive_runs=self.conclusive_runs,
        )
        return data

    def summary(self) -> str:
        if self.status == Status.FOUND:
            head = (
                f"{self.distribution} {self.first_fixed} is the first fixed release (last "
                f"broken: {self.last_broken}"
            )
            head += f", recorded {self.last_broken_evidence})" if self.last_broken_evidence else ")"
            if self.not_applicable_between:
                head += f"; not applicable in between: {', '.join(self.not_applicable_between)}"
        elif self.status == Status.UNPINNED:
            head = (
                f"{self.distribution}: last broken {self.last_broken}, first proven fixed "
                f"{self.first_fixed}; "
                f"boundary not pinned, unknown in between: {', '.join(self.unknown_between)}"
            )
        else:
            head = f"{self.distribution}: no transition — {self.reason}"
        counts = [
            (
                f"{self.conclusive_runs} conclusive reproducer run(s) for "
                f"{self.releases_available} release(s) "
                f"in range (bound {self.run_bound})"
            )
        ]
        fresh_na = sum(1 for p in self.not_applicable if not p.cached)
        if fresh_na:
            counts.append(f"{fresh_na} not applicable")
        if self.unknown:
            counts.append(f"{len(self.unknown)} unknown")
        counts.append(f"{sum(1 for p in self.probes if p.cached)} from cache")
        return f"{head}. {'; '.join(counts)}."

    def markdown(self) -> str:
        """Evidence for a PR body: the range, the boundary, every probe, and the output before /
        after."""
        lines = [
            f"### Release bisection of `{self.distribution}` for shim `{self.shim}`",
            "",
            self.summary(),
            "",
        ]
        if self.range_note:
            lines += [f"Range: {self.range_note}.", ""]
        if self.floor:
            lines += [f"Proposed retirement floor: `{self.floor}`", ""]
        skipped = []
        if self.candidates.yanked:
            skipped.append(f"yanked: {', '.join(self.candidates.yanked)}")
        if self.candidates.prereleases:
            skipped.append(f"pre-releases: {len(self.candidates.prereleases)}")
        if self.candidates.out_of_range:
            skipped.append(f"outside the range: {len(self.candidates.out_of_range)}")
        if skipped:
            lines += [f"Skipped releases — {'; '.join(skipped)}.", ""]
        lines += [
            "| version | result | reproducer outcome | seconds | note |",
            "|---|---|---|---|---|",
        ]
        for run in sorted(self.probes, key=lambda r: Version(r.version)):
            note = "cached" if run.cached else ""
            if run.detail:
                note = f"{note}; {run.detail}" if note else run.detail
            lines.append(
                f"| {run.version} | {run.state} | {run.outcome} | {run.duration_s:.2f} | "
                f"{mdsafe.text(note)} |"
            )
        for label, version in (
            ("before (last broken)", self.last_broken),
            ("after (first fixed)", self.first_fixed),
        ):
            shown = self.run_of(version)
            if shown and shown.output_tail:
                lines += [
                    "",
                    f"Reproducer `--mode without`, {label}: `{self.distribution}=={version}`",
                    "",
                    # the reproducer's output is data: no line of it may close the fence
                    mdsafe.fence(shown.output_tail.strip()[-1500:], ""),
                ]
        return "\n".join(lines) + "\n"
