"""Release bisection: the first release of a shim's target in which the bug is gone.

``patchlane bisect <shim>`` (``retire.commands.bisect``) orders the target distribution's releases (yanked ones skipped,
pre-releases only when asked), and binary-searches them for the boundary between "reproducer
prints BUG_REPRODUCED" and "it does not", running the reproducer ``--mode without`` once per
candidate in an *overlay environment*: a venv that sees a base interpreter's packages and has
only the target distribution changed to the candidate version (``uv pip install --no-deps``).

The search assumes the bug is monotonic (present up to some release, fixed from then on). It
first checks that assumption at the ends: the oldest candidate must reproduce and the newest
must not; otherwise it reports *no transition* instead of inventing one. A candidate whose run
crashed, timed out, was skipped or whose environment could not be built is *unknown*: it is
reported, never read as broken or fixed; the search steps around it to the nearest untested
neighbour, and if unknowns sit right at the boundary the result says so (*unpinned*) and
proposes the conservative floor (the first release proven fixed).

Each conclusive run is cached on disk under a key of (shim, reproducer source hash,
distribution, version, base environment fingerprint), so a re-run costs no reproducer runs;
unknown results are not cached (a crash may be transient) and are retried next time.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from retire.runs import envs
from retire.core.atomic import atomic_write
from retire.core.errors import PatchlaneError
from retire.evidence.validation import Mode, RunOutcome

__all__ = [
    "BROKEN",
    "FIXED",
    "UNKNOWN",
    "BisectResult",
    "CandidateRun",
    "Candidates",
    "OverlayRunner",
    "ResultCache",
    "base_fingerprint",
    "bisect",
    "list_releases",
    "search",
    "select_candidates",
]

BROKEN, FIXED, UNKNOWN = "broken", "fixed", "unknown"
#: How a reproducer outcome reads for the search.
_STATE_OF = {
    RunOutcome.BUG_REPRODUCED: BROKEN,
    RunOutcome.FIX_VALIDATED: FIXED,
    RunOutcome.MEMORY_SAVE_VERIFIED: FIXED,
}
#: Bump when what a cached entry means changes, so old entries stop matching.
CACHE_VERSION = 1
#: Unknown candidates tolerated before the search stops and reports what it has.
DEFAULT_MAX_UNKNOWN = 4


# ---------------------------------------------------------------------------------------------
# Values (no I/O)


@dataclass(frozen=True)
class Candidates:
    """The ordered releases a bisection searches, and what was left out and why."""

    versions: tuple[str, ...]  # ascending, PEP 440 order
    yanked: tuple[str, ...] = ()
    prereleases: tuple[str, ...] = ()  # skipped pre-releases / dev releases (nightlies)
    out_of_range: tuple[str, ...] = ()  # outside --since / --until
    invalid: tuple[str, ...] = ()  # not PEP 440 versions
    listed: int = 0


@dataclass(frozen=True)
class CandidateRun:
    """What one candidate release showed. ``state`` is broken, fixed or unknown."""

    version: str
    state: str
    outcome: str  # the reproducer's outcome, or "env-failed"
    detail: str = ""
    duration_s: float = 0.0
    cached: bool = False
    output_tail: str = ""


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


def select_candidates(
    versions: Iterable[str],
    yanked: Iterable[str] = (),
    *,
    include_prereleases: bool = False,
    since: str | None = None,
    until: str | None = None,
) -> Candidates:
    """Order releases by PEP 440 and drop the yanked (and pre-releases unless asked)."""
    listed = list(dict.fromkeys(versions))
    yanked_set = {_normal(v) for v in yanked}
    low = Version(since) if since else None
    high = Version(until) if until else None
    parsed, invalid = [], []
    for text in listed:
        try:
            parsed.append((Version(text), text))
        except InvalidVersion:
            invalid.append(text)
    parsed.sort()
    keep, dropped_yanked, dropped_pre, outside = [], [], [], []
    seen: set[Version] = set()
    for version, text in parsed:
        if version in seen:  # "1.0" and "1.0.0" are one release
            continue
        seen.add(version)
        if str(version) in yanked_set:
            dropped_yanked.append(text)
        elif (version.is_prerelease or version.is_devrelease) and not include_prereleases:
            dropped_pre.append(text)
        elif (low and version < low) or (high and version > high):
            outside.append(text)
        else:
            keep.append(text)
    return Candidates(tuple(keep), tuple(dropped_yanked), tuple(dropped_pre), tuple(outside), tuple(invalid), len(listed))


def _normal(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


# ---------------------------------------------------------------------------------------------
# The search (pure: ``probe`` does the work)


@dataclass
class _Search:
    versions: Sequence[str]
    probe: Callable[[str], CandidateRun]
    max_unknown: int
    runs: dict[int, CandidateRun] = field(default_factory=dict)
    order: list[CandidateRun] = field(default_factory=list)

    def ask(self, i: int) -> str:
        run = self.probe(self.versions[i])
        self.runs[i] = run
        self.order.append(run)
        return run.state

    @property
    def unknowns(self) -> int:
        return sum(1 for r in self.order if r.state == UNKNOWN)

    def first_known(self, indexes: Iterable[int]) -> int | None:
        for i in indexes:
            if self.unknowns >= self.max_unknown:
                return None
            if self.ask(i) != UNKNOWN:
                return i
        return None


def search(
    versions: Sequence[str], probe: Callable[[str], CandidateRun], *, max_unknown: int = DEFAULT_MAX_UNKNOWN
) -> tuple[str, str, int | None, int | None, list[CandidateRun]]:
    """Binary search for the broken → fixed boundary in ascending ``versions``.

    Returns ``(status, reason, last_broken_index, first_fixed_index, runs_in_order)``.
    """
    s = _Search(versions, probe, max_unknown)
    n = len(versions)
    if n == 0:
        return "no-transition", "no candidate releases", None, None, s.order
    lo = s.first_known(range(n))
    if lo is None:
        return "no-transition", _gave_up(s, "oldest"), None, None, s.order
    if s.runs[lo].state == FIXED:
        return "no-transition", f"the oldest testable candidate {versions[lo]} is already fixed (the bug does not reproduce there)", None, lo, s.order
    if lo == n - 1:
        return "no-transition", f"only {versions[lo]} could be tested and it still reproduces", lo, None, s.order
    hi = s.first_known(range(n - 1, lo, -1))
    if hi is None:
        return "no-transition", _gave_up(s, "newest"), lo, None, s.order
    if s.runs[hi].state == BROKEN:
        return "no-transition", f"the newest candidate {versions[hi]} still reproduces the bug", hi, None, s.order
    while True:
        untested = [i for i in range(lo + 1, hi) if i not in s.runs]
        if not untested:
            break
        if s.unknowns >= max_unknown:
            break
        middle = (lo + hi) / 2
        i = min(untested, key=lambda j: (abs(j - middle), j))
        state = s.ask(i)
        if state == BROKEN:
            lo = i
        elif state == FIXED:
            hi = i
    if hi - lo == 1:
        return "found", "", lo, hi, s.order
    untested = [versions[i] for i in range(lo + 1, hi) if i not in s.runs]
    why = f"{s.unknowns} candidate(s) could not be tested"
    if untested:
        why += f"; stopped before testing {', '.join(untested)}"
    return "unpinned", why, lo, hi, s.order


def _gave_up(s: _Search, end: str) -> str:
    if not s.order:
        return f"nothing left to test at the {end} end"
    tried = ", ".join(f"{r.version} ({r.outcome})" for r in s.order if r.state == UNKNOWN)
    return f"the {end} end could not be verified: unknown results for {tried} — narrow the range with --since/--until or fix the reproducer"


# ---------------------------------------------------------------------------------------------
# Overlay environments, the on-disk cache, and the runner tying them to the reproducer

_BASE_PROBE = (
    "import json, platform, site, sys, os;"
    "dirs = list(site.getsitepackages()) if hasattr(site, 'getsitepackages') else [];"
    "u = site.getusersitepackages() if site.ENABLE_USER_SITE else None;"
    "dirs += [u] if u and os.path.isdir(u) else [];"
    "print(json.dumps({'executable': sys.executable, 'site_dirs': [d for d in dirs if os.path.isdir(d)],"
    " 'machine': platform.machine(), 'system': platform.system(), 'implementation': sys.implementation.name}))"
)


@dataclass(frozen=True)
class BaseEnv:
    """The interpreter candidates are overlaid on, and its identity for the cache."""

    python: str
    executable: str
    site_dirs: tuple[str, ...]
    python_version: str
    packages: Mapping[str, str]
    fingerprint: str


def inspect_base(python: str | os.PathLike[str], distribution: str) -> BaseEnv:
    """Describe the base interpreter; the fingerprint ignores the distribution being bisected."""
    from retire.runs.envs import describe

    info = describe(python)
    proc = subprocess.run([os.fspath(python), "-c", _BASE_PROBE], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise PatchlaneError(f"cannot inspect the base interpreter {python}: {proc.stderr.strip()[-300:]}")
    extra = json.loads(proc.stdout)
    return BaseEnv(
        python=os.fspath(python), executable=extra["executable"], site_dirs=tuple(extra["site_dirs"]),
        python_version=info["python"], packages=info["packages"],
        fingerprint=base_fingerprint(info["python"], info["packages"], distribution,
                                     host=f"{extra['implementation']}-{extra['system']}-{extra['machine']}"),
    )


def base_fingerprint(python_version: str, packages: Mapping[str, str], distribution: str, *, host: str = "") -> str:
    """sha256 of what the base brings: interpreter, platform and every other package's version."""
    target = canonicalize_name(distribution)
    others = sorted((canonicalize_name(k), v) for k, v in packages.items() if canonicalize_name(k) != target)
    blob = json.dumps([python_version, host, others], separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


class ResultCache:
    """Conclusive candidate results on disk, one JSON file per key, written atomically."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(shim: str, reproducer_hash: str, distribution: str, version: str, base: str) -> str:
        blob = json.dumps([CACHE_VERSION, shim, reproducer_hash, str(canonicalize_name(distribution)),
                           _normal(version), base], separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> CandidateRun | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            run = CandidateRun(**data["run"])
        except (OSError, ValueError, TypeError, KeyError):
            return None  # missing or unreadable: just run it again
        return run if run.state in (BROKEN, FIXED) else None

    def put(self, key: str, run: CandidateRun, inputs: Mapping[str, str]) -> None:
        if run.state in (BROKEN, FIXED):
            atomic_write(self._path(key), json.dumps({"inputs": dict(inputs), "run": asdict(run)}, indent=1, sort_keys=True))


def reproducer_hash(manifest) -> str:
    return "sha256:" + hashlib.sha256(Path(manifest.reproducer_path).read_bytes()).hexdigest()


class OverlayRunner:
    """Runs a shim's reproducer ``--mode without`` against one candidate release.

    Per candidate: a throwaway venv of the base's interpreter whose ``.pth`` adds the base's
    site folders *after* its own (so a venv base works too, and the candidate wins), then
    ``uv pip install --no-deps <dist>==<version>`` — only that one distribution changes.
    """

    def __init__(
        self,
        manifest,
        base: BaseEnv,
        *,
        index_url: str | None = None,
        cache: ResultCache | None = None,
        work_dir: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.manifest = manifest
        self.base = base
        self.distribution = manifest.target.distribution
        self.index_url = index_url
        self.cache = cache
        self.work_dir = Path(work_dir) if work_dir else None
        self.timeout = timeout
        self.env = env
        self.runs = 0  # reproducer runs actually made
        self._repro_hash = reproducer_hash(manifest)

    def __call__(self, version: str) -> CandidateRun:
        key = ResultCache.key(self.manifest.id, self._repro_hash, self.distribution, version, self.base.fingerprint)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return CandidateRun(**{**asdict(hit), "cached": True, "version": version})
        run = self._run(version)
        if self.cache is not None:
            self.cache.put(key, run, {"shim": self.manifest.id, "reproducer": self._repro_hash,
                                      "distribution": self.distribution, "version": version, "base": self.base.fingerprint})
        return run

    def _run(self, version: str) -> CandidateRun:
        from retire.runs.reproduce import run_reproducer

        began = time.monotonic()
        parent = self.work_dir or Path(tempfile.gettempdir())
        parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"overlay-{canonicalize_name(self.distribution)}-", dir=parent))
        try:
            try:
                python = self.build_overlay(folder, version)
            except PatchlaneError as exc:
                return CandidateRun(version, UNKNOWN, "env-failed", str(exc), round(time.monotonic() - began, 3))
            self.runs += 1
            record = run_reproducer(self.manifest, Mode.WITHOUT, python=python, env=self.env,
                                    lane=f"bisect:{self.distribution}=={version}", timeout=self.timeout)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        state = _STATE_OF.get(record.outcome, UNKNOWN)
        detail = record.detail
        seen = {str(canonicalize_name(k)): v for k, v in record.versions.items()}.get(str(canonicalize_name(self.distribution)))
        if seen is not None and _normal(seen) != _normal(version):
            # The overlay did not take: whatever it printed is not about this release.
            state, detail = UNKNOWN, f"the reproducer saw {self.distribution} {seen}, not {version}"
        return CandidateRun(version, state, record.outcome, detail, record.duration_s, False, record.output_tail)

    def build_overlay(self, folder: Path, version: str) -> Path:
        """A venv in ``folder`` = the base's packages + ``<dist>==<version>``; returns its python."""
        envs.run_uv(["venv", "--quiet", "--python", self.base.executable, str(folder)], "cannot create the overlay venv")
        python = folder / "bin" / "python"
        major_minor = ".".join(self.base.python_version.split(".")[:2])
        purelib = folder / "lib" / f"python{major_minor}" / "site-packages"  # uv's POSIX venv layout
        if not purelib.is_dir():  # another layout (Windows, PyPy): ask the interpreter
            purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                          capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout.strip() or folder)
            if not purelib.is_dir() or purelib == folder:
                raise PatchlaneError("the overlay venv's interpreter does not start")
        envs.link_base(purelib, list(self.base.site_dirs))
        args = ["pip", "install", "--quiet", "--python", str(python), "--no-deps", f"{self.distribution}=={version}"]
        if self.index_url:
            args[2:2] = ["--default-index", self.index_url]
        envs.run_uv(args, f"cannot install {self.distribution}=={version}")
        return python


# ---------------------------------------------------------------------------------------------
# The whole thing


def bisect(
    manifest,
    versions: Iterable[str],
    *,
    yanked: Iterable[str] = (),
    include_prereleases: bool = False,
    since: str | None = None,
    until: str | None = None,
    base_python: str | os.PathLike[str] = sys.executable,
    index_url: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    max_unknown: int = DEFAULT_MAX_UNKNOWN,
    runner: Callable[[str], CandidateRun] | None = None,
    on_step: Callable[[int, CandidateRun], None] | None = None,
) -> BisectResult:
    """Bisect ``manifest``'s target over ``versions`` (any order; yanked ones are skipped).

    ``runner`` replaces the overlay runner (a callable version → CandidateRun), for callers
    that test somewhere else (a recorded manifest of another host, a remote GPU).
    """
    began = time.monotonic()
    distribution = manifest.target.distribution
    candidates = select_candidates(versions, yanked, include_prereleases=include_prereleases, since=since, until=until)
    fingerprint = ""
    if runner is None:
        base = inspect_base(base_python, distribution)
        fingerprint = base.fingerprint
        runner = OverlayRunner(manifest, base, index_url=index_url, work_dir=work_dir, timeout=timeout, env=env,
                               cache=ResultCache(cache_dir) if cache_dir is not None else None)
    step = 0

    def probe(version: str) -> CandidateRun:
        nonlocal step
        run = runner(version)
        step += 1
        if on_step:
            on_step(step, run)
        return run

    status, reason, lo, hi, order = search(candidates.versions, probe, max_unknown=max_unknown)
    last_broken = candidates.versions[lo] if lo is not None else None
    first_fixed = candidates.versions[hi] if hi is not None else None
    between = ()
    if lo is not None and hi is not None and status != "no-transition":
        tested = {r.version: r for r in order}
        between = tuple(v for v in candidates.versions[lo + 1:hi] if v not in tested or tested[v].state == UNKNOWN)
    return BisectResult(
        shim=manifest.id, distribution=distribution, status=status, reason=reason,
        first_fixed=first_fixed if status != "no-transition" else None,
        last_broken=last_broken if status != "no-transition" else None,
        unknown_between=between, runs=sum(1 for r in order if not r.cached and r.outcome != "env-failed"),
        probes=tuple(order), candidates=candidates, base=fingerprint, seconds=round(time.monotonic() - began, 3),
    )


# ---------------------------------------------------------------------------------------------
# Where releases come from


def list_releases(index_url: str, distribution: str, *, client=None) -> tuple[list[str], set[str]]:
    """(versions, yanked versions) of ``distribution``, through the index probe (PEP 691)."""
    from retire.evidence.values import ProbeFailure
    from retire.probes.http import Fetcher, make_client
    from retire.probes.index import probe_releases

    owned = client is None
    client = client or make_client()
    try:
        found = probe_releases(Fetcher(client), distribution, [index_url])
    finally:
        if owned:
            client.close()
    if isinstance(found, ProbeFailure):
        raise PatchlaneError(f"cannot list the releases of {distribution}: {found}")
    return [str(r.version) for r in found.releases], {str(r.version) for r in found.releases if r.yanked}
