"""The weekly retirement report (``patchlane report``, ``retire.commands.report``).

Gathers a verdict for every shim (``retire.verdicts.gather``: probes of indexes, the code host,
local git mirrors, and the validation manifest), reads the validation records, the previous
reports and the git history of ``shims/``, and writes ``reports/<ISO year>-W<week>.md`` (a
GitHub issue body), ``.html`` (a page for people) and ``.json`` (for machines and next week's
report), each atomically; then prints the short version.

Faults never cost the report: a failed probe makes that shim *unknown* with the reason, a
corrupted previous report or unreadable records become a one-line note, a missing git history
an empty burn-down. Only bad input (a bad ``--week``, a broken manifest or lane file) stops it.

``--no-probe`` uses cached evidence only: the HTTP cache of earlier runs (answered without a
request), local mirrors and the records; whatever is not cached is *unknown*, nothing is fetched.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gc
import html
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from retire.core.atomic import atomic_write
from retire.core.errors import InputError, PatchlaneError
from retire.core.project import Project, contained
from retire.lanes import lanefile
from retire.report import build as report_build
from retire.report import html as report_html
from retire.report import jsontext
from retire.report import markdown as report_render
from retire.report import model as report_model
from retire.verdicts.model import Decision, Verdict
from shims import times

if TYPE_CHECKING:
    from retire.evidence.validation import ValidationRecord
    from retire.history.window import Window
    from retire.lanes.model import Lane
    from retire.packs.store import QueueEntry
    from shims.model import ShimManifest


class Packs(Protocol):
    """What the report needs of ``retire.packs.store`` (tests hand in a stand-in)."""

    def filing_queue(self, root: Path, /) -> Sequence[QueueEntry]: ...

    def markdown_section(self, entries: Sequence[QueueEntry], /) -> str: ...


#: Gathers the verdicts: ``retire.verdicts.gather``'s signature.
Gather = Callable[..., Iterable[Verdict]]
#: Runs the candidate bisections of these verdicts within a budget (``patchlane report
#: --bisect-budget``: :func:`retire.commands.bisect.candidate_bisections`).
BisectCandidates = Callable[[Sequence[Verdict]], report_model.Bisections]

# the filing-queue section exists only where retire.packs does
_packs: Packs | None
try:
    from retire.packs import store as _store

    _packs = _store
    _PACKS_PROBLEM: str | None = None
except ImportError as _exc:
    _packs = None
    _PACKS_PROBLEM = (
        None
        if getattr(_exc, "name", None) == "retire.packs.store"
        else f"filing queue left out: {_exc}"
    )

__all__ = ["CacheOnlyTransport", "Written", "documents", "generate", "write_report"]


class CacheOnlyTransport(httpx.BaseTransport):
    """An httpx transport that never touches the network, for ``--no-probe``.

    The probes' ``Fetcher`` asks conditionally (``If-None-Match`` / ``If-Modified-Since``)
    exactly when its HTTP cache holds the answer: this transport says "not modified", so the
    cached body is served. Anything else fails at once as not cached.
    """

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if "if-none-match" in request.headers or "if-modified-since" in request.headers:
            return httpx.Response(304, request=request)
        raise httpx.ConnectError(
            "not in the HTTP cache, and --no-probe makes no requests", request=request
        )


@dataclass(frozen=True)
class Written:
    report: report_model.Report
    paths: tuple[Path, ...]
    markdown: str
    json_text: str


def _records(path: Path) -> tuple[list[ValidationRecord], str | None]:
    from retire.evidence import validation

    try:
        records, damaged = validation.load_checked(path)
    except InputError as exc:
        return [], str(exc)
    if not damaged:
        return records, None
    first = damaged[0]
    return records, (
        f"{path}: {len(damaged)} damaged line(s) left out, copied to "
        f"{validation.quarantine_path(path).name} "
        f"(line {first.number}: {first.problem})"
    )


def _engine_gather() -> Gather:
    # loaded when a report gathers: the probes and their HTTP stack are not needed otherwise
    from retire.verdicts.gather import gather

    return gather


#: The note of a report made with ``--no-probe`` (advice on the page: it is what was asked for).
CACHE_ONLY = "evidence from the cache only (--no-probe): whatever was never fetched is unknown"


def gather_verdicts(
    project: Project,
    manifests: Sequence[ShimManifest],
    lanes: Sequence[Lane],
    records_path: Path,
    *,
    probe: bool = True,
    gather: Gather | None = None,
    # GatherOptions' keywords, passed through (the commands' and the tests' dicts)
    **options: Any,
) -> tuple[list[Verdict], list[str]]:
    """Verdicts for every shim, and notes. ``gather`` defaults to ``retire.verdicts.gather``;
    without ``probe`` it runs on a :class:`CacheOnlyTransport`. Never raises."""
    from retire.evidence.values import ProbeFailure
    from retire.probes.http import RetryPolicy, make_client
    from retire.verdicts.options import GatherOptions

    run = gather if gather is not None else _engine_gather()
    notes = []
    options.setdefault("cache_dir", project.http_cache)
    client = None
    if not probe:
        client = make_client(transport=CacheOnlyTransport())
        options.setdefault("client", client)
        # a trial re-lock asks the index: with no request at all, a raise stays "not re-locked"
        options["resolve"] = False
        options.setdefault("policy", RetryPolicy(attempts=1, json_attempts=1))
        notes.append(CACHE_ONLY)
    try:
        verdicts = list(
            run(manifests, lanes, project.locks_dir, records_path, GatherOptions(**options))
        )
    # a broken engine still leaves a report with every row unknown
    except Exception as exc:  # noqa: BLE001
        failure = ProbeFailure("engine", "gather", f"internal error: {type(exc).__name__}: {exc}")
        verdicts = [
            Verdict(m.id, Decision.UNKNOWN, str(failure), failures=(failure,)) for m in manifests
        ]
        notes.append(f"gathering verdicts failed: {type(exc).__name__}: {exc}")
    finally:
        if client is not None:
            client.close()
    return verdicts, notes


def filing_queue_section(
    project: Project, packs: Packs | None = None
) -> tuple[str | None, str | None]:
    """The Markdown of ``retire.packs`` (section, note); (None, None) where that module is
    absent."""
    packs = packs if packs is not None else _packs
    if packs is None:
        return None, _PACKS_PROBLEM
    try:
        section = packs.markdown_section(packs.filing_queue(project.root))
    # the queue is a bonus, the report is the point
    except Exception as exc:  # noqa: BLE001
        return None, f"filing queue left out: {type(exc).__name__}: {exc}"
    return (section or None), None


def write_report(
    out: Path, week: str, files: Sequence[tuple[str, str]], *, within: Path | None = None
) -> tuple[Path, ...]:
    """Write ``(suffix, text)`` files as ``<out>/<week><suffix>``, each atomically, in order,
    never through a link below ``within`` (the project's root; default ``out`` itself).

    Callers render everything first, so a rendering failure writes nothing; the JSON goes last
    because it is what next week's report reads: it never describes files that were not written.
    """
    paths = []
    for suffix, text in files:
        # a committed link is refused, never written through
        path = contained(within or out, out / f"{week}{suffix}")
        try:
            atomic_write(path, text, within=within or out)
        except OSError as exc:
            raise PatchlaneError(f"cannot write {path}: {exc.strerror or exc}") from None
        paths.append(path)
    return tuple(paths)


def _week_label(week: str | None, now: _dt.datetime) -> str:
    try:
        return report_model.parse_week(week) if week else report_model.iso_week(now.date())
    except ValueError as exc:
        raise InputError(None, "--week", str(exc), "e.g. --week 2026-W47") from None


def _out_dir(project: Project, out: str | Path | None) -> tuple[Path, Path]:
    """The report folder (``--out``, relative to the root; default ``reports/``) and the folder
    writes stay inside; a link on the way inside the project is refused before anything is
    read or written."""
    return project.output(Path(out) if out is not None else Path("reports"))


def _history(
    project: Project, out_dir: Path, label: str, now: _dt.datetime
) -> tuple[report_model.PreviousReport | None, list[report_model.BurnPoint], list[str], list[str]]:
    """The previous report, the burn-down so far (git's counts, then the reports'), notes, and
    why git's counts are missing (advice, not a fault: empty when they are not)."""
    from retire.report.history import git_burndown, read_previous_reports, report_points

    history = read_previous_reports(out_dir, label)
    as_of = min(now.date(), report_model.week_bounds(label)[1])
    git_points, git_note = git_burndown(project.root, until=as_of)
    points = [*git_points, *report_points(history.reports)]
    return history.previous, points, list(history.notes), [git_note] if git_note else []


def _render(
    report: report_model.Report, out_dir: Path, lanes: Sequence[Lane], root: Path
) -> tuple[str, str, str]:
    """Markdown, HTML and JSON of ``report``, with index URLs replaced by their names and paths
    in the project named relative to it."""
    names = index_names(lanes)
    full_report = f"{out_dir.name}/{report.week}.html (and .json)"
    markdown, json_text, page = documents(report, full_report=full_report)
    markdown, page, json_text = (
        relative_paths(name_indexes(text, names), root) for text in (markdown, page, json_text)
    )
    return markdown, page, json_text


def documents(
    report: report_model.Report, *, full_report: str | None = None, drawn: bool = True
) -> tuple[str, str, str]:
    """The Markdown (pointing at ``full_report``), the JSON and the HTML of ``report``
    (``drawn``: see ``html.to_html``)."""
    with _settled():
        markdown = report_render.to_markdown(report, full_report=full_report)
        json_text = jsontext.dumps(report_render.to_json(report)) + "\n"
        page = report_html.to_html(report, drawn=drawn)
    return markdown, json_text, page


@contextmanager
def _settled() -> Iterator[None]:
    """The collector leaves what is alive now alone until the block ends: the renderers only add
    to the inputs and the model, and a report of 500 shims made the collector walk those again
    and again (a fifth of the rendering time)."""
    # objects someone else froze stay frozen: only a freeze of our own is undone
    ours = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if ours:
            gc.unfreeze()


def _sort_notes(said: Sequence[str], notes: list[str], advice: list[str]) -> None:
    """Each note gathering said, once, among the faults or the advice (evidence from the cache
    only is what was asked for: advice, not a fault)."""
    for note in said:
        into = advice if note == CACHE_ONLY else notes
        if note not in into:
            into.append(note)


def generate(
    project: Project,
    *,
    week: str | None = None,
    out: str | Path | None = None,
    probe: bool = True,
    now: _dt.datetime | None = None,
    verdicts: Sequence[Verdict] | None = None,
    gather: Gather | None = None,
    gather_options: dict[str, object] | None = None,
    records_path: str | Path | None = None,
    packs: Packs | None = None,
    bisect: BisectCandidates | None = None,
) -> Written:
    """Build, render and write the report of ``week`` (default: this ISO week).

    ``verdicts`` skips gathering (cached or synthetic verdicts); ``gather`` replaces
    ``retire.verdicts.gather`` and ``gather_options`` go to it (client, api_base, mirrors …).
    ``bisect`` runs the candidate bisections of the verdicts (within its budget); when one
    made a run, the verdicts are gathered again, so the report reads the new evidence.
    Raises ``InputError`` for bad input and ``PatchlaneError`` when a file cannot be written.
    """
    now = now or times.now()
    label = _week_label(week, now)
    out_dir, within = _out_dir(project, out)
    manifests, lanes = list(project.manifests().values()), lanefile.project_lanes(project)
    records_file = Path(records_path) if records_path else project.validation
    # faults, and advice (nothing wrong: what the report cannot show yet)
    notes, advice = list[str](), list[str]()

    def gathered() -> list[Verdict]:
        found, gather_notes = gather_verdicts(
            project, manifests, lanes, records_file, probe=probe, gather=gather,
            **(gather_options or {}),
        )  # fmt: skip
        _sort_notes(gather_notes, notes, advice)
        return found

    given = verdicts is not None
    verdicts = verdicts if verdicts is not None else gathered()
    bisections = bisect(verdicts) if bisect is not None else None
    if bisections is not None and bisections.runs and not given:
        # the new runs are evidence: decide again on them
        verdicts = gathered()
    records, records_problem = _records(records_file)
    if records_problem:
        notes.append(f"validation records unreadable, runs left out: {records_problem}")
    previous, history, history_notes, git_advice = _history(project, out_dir, label, now)
    notes += history_notes
    advice += git_advice
    queue, queue_note = filing_queue_section(project, packs)
    notes += [queue_note] if queue_note else []
    report = report_build.build(
        manifests,
        lanes,
        verdicts,
        records,
        week=label,
        now=now,
        previous=previous,
        history=history,
        notes=notes,
        advice=advice,
        records_failure=records_problem,
        filing_queue=queue,
        bisections=bisections,
        windows=_windows(project, manifests, records, verdicts),
    )
    report = _with_regressions(project, report, records, records_file)
    markdown, page, json_text = _render(report, out_dir, lanes, project.root)
    paths = write_report(
        out_dir,
        label,
        [(".md", markdown), (".html", page), (".json", json_text)],
        within=within,
    )
    return Written(report, paths, markdown, json_text)


def _windows(
    project: Project,
    manifests: Sequence[ShimManifest],
    records: Sequence[ValidationRecord],
    verdicts: Sequence[Verdict],
) -> dict[str, Window | None]:
    """The window of each shim whose verdict carries none (verdicts made elsewhere): the one
    reading of the records, the fix commit named where the target is mirrored on this host
    (retire.history.mirrored). A gathered verdict's window is the row's as it is."""
    from retire.history.mirrored import project_window

    carried = {v.shim for v in verdicts if v.window is not None}
    return {m.id: project_window(project, m, records) for m in manifests if m.id not in carried}


def _with_regressions(
    project: Project,
    report: report_model.Report,
    records: Sequence[ValidationRecord],
    records_file: Path,
) -> report_model.Report:
    """The report with its "Regressions" section: regressed guards and recorded culprits."""
    from retire.report import regressions

    culprits = regressions.read_culprits(records_file.parent / "culprits.jsonl")
    newly = [(shim, lane, str(outcome)) for shim, lane, outcome in report.changes.newly_broken]
    found = regressions.find_regressions(list(project.guards().values()), records, culprits, newly)
    return dataclasses.replace(report, regressions=found)


def index_names(lanes: Sequence[Lane]) -> dict[str, str]:
    """Index URL → the name the lanes and uv's configuration give it.

    Reports are committed; like everything else in the repository they name indexes, never
    registry hosts (the URLs are host configuration).
    """
    from retire.core import uv

    names: dict[str, str] = {}
    try:
        names.update({url: name for name, url in uv.host_indexes().named.items()})
        default = uv.default_index()
    except (InputError, OSError):
        default = None
    names = {url: f"index {name!r}" for url, name in names.items()}
    for lane in lanes:
        names.update({index.url: f"index {index.name!r}" for index in lane.indexes if index.url})
    if default:
        names[default] = "the default index"
    return names


def relative_paths(text: str, root: Path) -> str:
    """``text`` with the project's absolute path taken off every path in it (as written, and as
    the page escapes it): a report is committed and read elsewhere, so a path in it is relative
    to the project (a mirror's ``.patchlane/mirrors/…``), never this machine's."""
    for path in sorted({str(root), str(root.resolve())}, key=len, reverse=True):
        for written in (f"{path}/", html.escape(f"{path}/")):
            text = text.replace(written, "")
    return text


def name_indexes(text: str, names: dict[str, str]) -> str:
    # longest first: a URL may prefix another
    for url in sorted(names, key=len, reverse=True):
        text = text.replace(url.rstrip("/"), names[url])
    return text
