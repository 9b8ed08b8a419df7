"""The result of one bisection: the boundary found (or why there is none), every probe, the floor."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from packaging.version import Version

from retire.bisect.search import UNKNOWN, CandidateRun, Candidates

__all__ = ["BisectResult"]


@dataclass(frozen=True)
class BisectResult:
    """The boundary found (or why there is none), every probe made, and the floor it proposes.

    ``status``: ``found`` (last broken and first fixed are neighbours), ``unpinned`` (unknown
    candidates lie between them: the first fixed release is one of those or ``first_fixed``),
    or ``no-transition`` (``reason`` says which end did not behave).
    """

    shim: str
    distribution: str
    status: str
    reason: str
    first_fixed: str | None
    last_broken: str | None
    unknown_between: tuple[str, ...]
    runs: int  # reproducer runs made now (cached answers cost none)
    probes: tuple[CandidateRun, ...]  # in the order they were asked
    candidates: Candidates
    base: str  # fingerprint of the base environment
    seconds: float = 0.0

    @property
    def releases_available(self) -> int:
        return len(self.candidates.versions)

    @property
    def run_bound(self) -> int:
        """ceil(log2(n)) + 2: the binary search plus the two endpoint checks."""
        n = self.releases_available
        return (math.ceil(math.log2(n)) if n > 1 else 0) + 2

    @property
    def floor(self) -> str | None:
        """The retirement floor, ``<dist>>=<first fixed>``, when a fixed release was proven."""
        if self.status in ("found", "unpinned") and self.first_fixed:
            return f"{self.distribution}>={self.first_fixed}"
        return None

    @property
    def unknown(self) -> tuple[CandidateRun, ...]:
        return tuple(p for p in self.probes if p.state == UNKNOWN)

    def run_of(self, version: str | None) -> CandidateRun | None:
        return next((p for p in self.probes if p.version == version), None)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["candidates"] = asdict(self.candidates)
        data.update(floor=self.floor, releases_available=self.releases_available, run_bound=self.run_bound)
        return data

    def summary(self) -> str:
        if self.status == "found":
            head = f"{self.distribution} {self.first_fixed} is the first fixed release (last broken: {self.last_broken})"
        elif self.status == "unpinned":
            head = (f"{self.distribution}: last broken {self.last_broken}, first proven fixed {self.first_fixed}; "
                    f"boundary not pinned, unknown in between: {', '.join(self.unknown_between)}")
        else:
            head = f"{self.distribution}: no transition — {self.reason}"
        return (f"{head}. {self.runs} reproducer run(s) for {self.releases_available} release(s) "
                f"(bound {self.run_bound}); {len(self.probes) - self.runs} from cache.")

    def markdown(self) -> str:
        """Evidence for a PR body: the boundary, every probe, and the output before / after."""
        lines = [f"### Release bisection of `{self.distribution}` for shim `{self.shim}`", "", self.summary(), ""]
        if self.floor:
            lines += [f"Proposed retirement floor: `{self.floor}`", ""]
        skipped = []
        if self.candidates.yanked:
            skipped.append(f"yanked: {', '.join(self.candidates.yanked)}")
        if self.candidates.prereleases:
            skipped.append(f"pre-releases: {len(self.candidates.prereleases)}")
        if skipped:
            lines += [f"Skipped releases — {'; '.join(skipped)}.", ""]
        lines += ["| version | result | reproducer outcome | seconds | note |", "|---|---|---|---|---|"]
        for run in sorted(self.probes, key=lambda r: Version(r.version)):
            note = "cached" if run.cached else ""
            if run.detail:
                note = f"{note}; {run.detail}" if note else run.detail
            lines.append(f"| {run.version} | {run.state} | {run.outcome} | {run.duration_s:.2f} | {note.replace('|', '/')} |")
        for label, version in (("before (last broken)", self.last_broken), ("after (first fixed)", self.first_fixed)):
            run = self.run_of(version)
            if run and run.output_tail:
                lines += ["", f"Reproducer `--mode without`, {label}: `{self.distribution}=={version}`", "",
                          "```", run.output_tail.strip()[-1500:], "```"]
        return "\n".join(lines) + "\n"
