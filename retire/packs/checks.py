"""The readiness check of a pack: the seed's pre-flight checklist as pure functions.

Each rule returns :class:`Blocker` values whose ``str()`` is one line saying what to fix. The
evidence that the reproducer passed comes from validation records only, never from the body's
text ("we do not trust the date in the markdown body"). No I/O here: the caller reads files.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import NormalizedName, canonicalize_name

from retire.evidence.validation import Mode, RunOutcome, ValidationRecord
from retire.packs.model import Pack, github_repository, pinned_ref
from shims import tomlreader
from shims.model import ShimManifest
from shims.reproducer import Sentinel

__all__ = [
    "DEFAULT_MAX_CODE_LINES",
    "DEFAULT_WINDOW",
    "RULES",
    "Blocker",
    "DenyRule",
    "check_deny",
    "check_markdown",
    "check_pasted",
    "check_target",
    "check_validation",
    "parse_deny",
    "readiness",
]

#: "The reproducer passes today on a host we can name. Not last week."
DEFAULT_WINDOW = _dt.timedelta(days=1)
#: A fenced block longer than this is a pasted program, not an illustration.
DEFAULT_MAX_CODE_LINES = 12
#: Lines a block may share with the reproducer before it counts as pasting it.
DUPLICATE_LINES = 3

RULES = (
    "manifest",
    "reproducer",
    "validation",
    "markdown",
    "deny-list",
    "pasted",
    "upstream-state",
    "target",
    "against",
    "command",
)


@dataclass(frozen=True)
class Blocker:
    """One reason a pack is not ready; ``str()`` is one line: ``rule: problem — fix``."""

    # one of RULES
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {' '.join(self.message.split())}"


@dataclass(frozen=True)
class DenyRule:
    """A pattern of non-public language: internal host names, branch codes, people."""

    pattern: re.Pattern[str]
    why: str


# ---------------------------------------------------------------------------------------------
# deny-list


def parse_deny(text: str, path: str | Path) -> tuple[DenyRule, ...]:
    """``packs/deny.toml``: ``[[deny]]`` entries with ``pattern`` (a regex) or ``literal``, and
    ``why``.

    Literals match case-insensitively; patterns as written (``(?i)`` makes one insensitive), so
    a ticket-code pattern like ``[A-Z]+-[0-9]+`` does not catch ordinary hyphenated words.
    """
    doc = tomlreader.loads(text, str(path)).check_keys(
        ("deny",), fix="the file holds [[deny]] entries only"
    )
    rules = []
    entries = doc.get("deny")
    for entry in entries.tables(fix="write [[deny]] entries") if entries is not None else ():
        entry.check_keys(("pattern", "literal", "why"), fix="use pattern or literal, and why")
        if ("pattern" in entry) == ("literal" in entry):
            raise entry.error(
                None,
                "needs exactly one of pattern or literal",
                'add pattern = "…" (a regex) or literal = "…"',
            )
        why = entry.string(
            "why", missing='say what the entry catches, e.g. why = "internal host name"'
        )
        kind = "pattern" if "pattern" in entry else "literal"
        raw = entry.string(kind, empty_ok=True)
        if not raw:
            raise entry.error(kind, "must be a non-empty string", "write what to catch")
        source = raw if kind == "pattern" else "(?i)" + re.escape(raw)
        try:
            compiled = re.compile(source)
        except (re.error, RecursionError, OverflowError, ValueError) as exc:
            raise entry.error(
                kind, f"bad regular expression: {exc}", "fix the pattern (Python re syntax)"
            ) from None
        rules.append(DenyRule(compiled, why.strip()))
    return tuple(rules)


def check_deny(texts: Iterable[tuple[str, str]], rules: Sequence[DenyRule]) -> list[Blocker]:
    """Every line of each ``(name, text)`` that matches a deny rule."""
    found = []
    for name, text in texts:
        for number, line in enumerate(text.splitlines(), start=1):
            for rule in rules:
                match = rule.pattern.search(line)
                if match:
                    found.append(
                        Blocker(
                            "deny-list",
                            f"{name} line {number}: {match.group(0)!r} looks like {rule.why} "
                            "— rewrite it in public terms",
                        )
                    )
    return found


# ---------------------------------------------------------------------------------------------
# GitHub Markdown structure

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DELIMITER_CELL = re.compile(r"\s*:?-+:?\s*")
_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]*)")


@dataclass(frozen=True)
class _Block:
    # 1-based line of the opening fence
    start: int
    lines: tuple[str, ...]


def _cells(row: str) -> list[str]:
    """Split a table row on unescaped pipes, without the optional outer pipes."""
    text = row.strip()
    text = text.removeprefix("|")
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return re.split(r"(?<!\\)\|", text)


def _scan(body: str) -> tuple[list[_Block], list[tuple[int, str]], list[Blocker]]:
    """Fenced blocks, the (number, line) pairs outside them, and unclosed-fence problems."""
    blocks: list[_Block] = []
    outside: list[tuple[int, str]] = []
    problems: list[Blocker] = []
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        opened = _FENCE.match(lines[index])
        if opened is None or (opened["fence"][0] == "`" and "`" in opened["info"]):
            outside.append((index + 1, lines[index]))
            index += 1
            continue
        fence = opened["fence"]
        start, index, content = index + 1, index + 1, []
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if (
                closing
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            content.append(lines[index])
            index += 1
        else:
            problems.append(
                Blocker(
                    "markdown",
                    f"body line {start}: code fence {fence} is never closed "
                    f"— add a closing {fence} line",
                )
            )
        blocks.append(_Block(start, tuple(content)))
        index += 1
    return blocks, outside, problems


def check_markdown(body: str) -> list[Blocker]:
    """Fences balanced, tables well formed (header, delimiter, same cell count), links absolute."""
    _, outside, problems = _scan(body)
    rows = dict(outside)
    numbers = [number for number, _ in outside]
    position = 0
    while position < len(numbers):
        number = numbers[position]
        line = rows[number]
        if not line.lstrip().startswith("|"):
            for link in _LINK.finditer(line):
                target = link["target"]
                if target and not target.startswith(("https://", "http://", "#", "mailto:")):
                    problems.append(
                        Blocker(
                            "markdown",
                            f"body line {number}: relative link {target!r} does not resolve "
                            "in an issue — use an absolute https:// URL",
                        )
                    )
            position += 1
            continue
        # A table: consecutive rows starting with '|'; the second must be the delimiter row.
        table: list[tuple[int, str]] = []
        while (
            position < len(numbers)
            and rows[numbers[position]].lstrip().startswith("|")
            and (not table or numbers[position] == table[-1][0] + 1)
        ):
            table.append((numbers[position], rows[numbers[position]]))
            position += 1
        header = _cells(table[0][1])
        if len(table) < 2 or not all(
            _DELIMITER_CELL.fullmatch(cell) for cell in _cells(table[1][1])
        ):
            problems.append(
                Blocker(
                    "markdown",
                    f"body line {table[0][0]}: table row without a |---| delimiter row "
                    "under its header — add one, or escape the leading |",
                )
            )
            continue
        delimiter = _cells(table[1][1])
        if len(delimiter) != len(header):
            problems.append(
                Blocker(
                    "markdown",
                    f"body line {table[1][0]}: the delimiter row has {len(delimiter)} cells, "
                    f"the header has {len(header)} — GitHub will not render it as a table",
                )
            )
            continue
        for row_number, row in table[2:]:
            count = len(_cells(row))
            if count != len(header):
                problems.append(
                    Blocker(
                        "markdown",
                        f"body line {row_number}: table row has {count} cells, the header has "
                        f"{len(header)} — escape | inside cells as \\| or fix the row",
                    )
                )
    return problems


def check_pasted(
    body: str, reproducer_text: str | None, max_code_lines: int = DEFAULT_MAX_CODE_LINES
) -> list[Blocker]:
    """The reproducer is attached, not pasted: no long code block, no block copied from it."""
    blocks, _, _ = _scan(body)
    source = {
        line.strip() for line in (reproducer_text or "").splitlines() if len(line.strip()) >= 8
    }
    problems = []
    for block in blocks:
        if len(block.lines) > max_code_lines:
            problems.append(
                Blocker(
                    "pasted",
                    f"body line {block.start}: a {len(block.lines)}-line code block "
                    f"(limit {max_code_lines}) — attach the code as a file and say how to run it",
                )
            )
            continue
        shared = sum(1 for line in block.lines if line.strip() in source)
        if shared >= DUPLICATE_LINES:
            problems.append(
                Blocker(
                    "pasted",
                    f"body line {block.start}: code block repeats {shared} lines of the "
                    "reproducer — it is attached; show only the command",
                )
            )
    return problems


# ---------------------------------------------------------------------------------------------
# evidence, state and targeting


def _pin(against: str | None) -> tuple[NormalizedName, str] | None:
    """(canonical distribution, version) when ``against`` pins a release (``dist==1.2``)."""
    if not against or "==" not in against:
        return None
    dist, _, version = against.partition("==")
    return canonicalize_name(dist.strip()), version.strip()


def _matches_pin(record: ValidationRecord, pinned: tuple[NormalizedName, str] | None) -> bool:
    """A run counts against a pin unless it recorded another version of that distribution."""
    if pinned is None:
        return True
    recorded = {canonicalize_name(name): v for name, v in record.versions.items()}
    return pinned[0] not in recorded or recorded[pinned[0]] == pinned[1]


def _host_named(record: ValidationRecord) -> bool:
    hostname = record.host.get("hostname")
    return isinstance(hostname, str) and bool(hostname.strip())


@dataclass(frozen=True)
class _Sifted:
    """A shim's ``--mode without`` runs, narrowed step by step to the ones that prove the bug."""

    runs: Sequence[ValidationRecord]
    # printed BUG_REPRODUCED
    reproduced: Sequence[ValidationRecord]
    # … on a named host
    named: Sequence[ValidationRecord]
    # … against the version the body names
    pinned: Sequence[ValidationRecord]


def _sift(runs: Sequence[ValidationRecord], against: str | None) -> _Sifted:
    reproduced = [
        r
        for r in runs
        if r.outcome == RunOutcome.BUG_REPRODUCED and r.sentinel == Sentinel.BUG_REPRODUCED
    ]
    named = [r for r in reproduced if _host_named(r)]
    pin = _pin(against)
    return _Sifted(runs, reproduced, named, [r for r in named if _matches_pin(r, pin)])


#: What to do when the latest run printed no BUG_REPRODUCED, by its outcome.
_NOT_REPRODUCED_HINTS: Mapping[str, str] = {
    RunOutcome.FIX_VALIDATED: "upstream may have fixed it — re-check and set state = "
    '"already-fixed"',
    RunOutcome.SKIPPED: "run it on a host that meets its needs (see the skip reason)",
}


def _not_proven(sifted: _Sifted, against: str | None, window: _dt.timedelta) -> Blocker:
    """Why no fresh run proves the bug: the first step of the sifting that came up short."""
    if sifted.pinned:
        hours = window.total_seconds() / 3600
        limit = f"{hours:g} hours" if hours < 48 else f"{hours / 24:g} days"
        last = max(sifted.pinned, key=lambda r: r.started_at)
        return Blocker(
            "validation",
            f"last BUG_REPRODUCED run was {last.started_at[:16]}Z on "
            f"{last.host.get('hostname')}, older than {limit} — rerun the reproducer today",
        )
    if sifted.named:
        return Blocker(
            "validation",
            f"no BUG_REPRODUCED run against {against}: the runs recorded other versions "
            "— run it against the version the body names",
        )
    if sifted.reproduced:
        return Blocker(
            "validation",
            "BUG_REPRODUCED runs carry no host name in their host stamp "
            "— rerun with the reproducer protocol so the host is named",
        )
    latest = max(sifted.runs, key=lambda r: r.started_at)
    what = latest.sentinel or latest.outcome
    hint = _NOT_REPRODUCED_HINTS.get(latest.outcome, "fix the reproducer and run it again")
    detail = f" ({latest.detail})" if latest.detail else ""
    return Blocker(
        "validation",
        f"the reproducer never printed BUG_REPRODUCED without the shim; latest run "
        f"{latest.started_at[:16]}Z: {what}{detail} — {hint}",
    )


def check_validation(
    shim: str,
    records: Sequence[ValidationRecord],
    *,
    now: _dt.datetime,
    window: _dt.timedelta = DEFAULT_WINDOW,
    against: str | None = None,
) -> list[Blocker]:
    """A ``--mode without`` run printed ``BUG_REPRODUCED`` on a named host within ``window``.

    When ``against`` pins a release (``dist==1.2``) and a run recorded that distribution's
    version, only runs against that version count: the body names it.
    """
    runs = [r for r in records if r.shim == shim and r.mode == Mode.WITHOUT]
    if not runs:
        return [
            Blocker(
                "validation",
                "the reproducer never ran (no --mode without record in the validation manifest) "
                "— run it on a host (`patchlane run`) and record the result",
            )
        ]
    sifted = _sift(runs, against)
    # a clock a few minutes ahead on the host is not a run from the future
    latest_allowed = now + _dt.timedelta(minutes=5)
    if any(
        (started := r.started) is not None and now - window <= started <= latest_allowed
        for r in sifted.pinned
    ):
        return []
    return [_not_proven(sifted, against, window)]


def check_target(pack: Pack, manifest: ShimManifest) -> list[Blocker]:
    """The target repository matches the manifest's report/fix links and the overlap thread."""
    repo = pack.spec.repository.lower()
    problems = []
    for link in manifest.upstream.links:
        if link.role == "related":
            # context may live anywhere (a compiler issue next to a kernel bug)
            continue
        found = github_repository(link.url)
        if found is None or found.lower() != repo:
            problems.append(
                Blocker(
                    "target",
                    f"manifest {link.role} link {link.url} is not in {pack.spec.repository} "
                    "— fix repository in pack.toml or the link in the manifest",
                )
            )
    thread = pack.spec.upstream.thread
    if thread and (github_repository(thread) or "").lower() != repo:
        problems.append(
            Blocker(
                "target",
                f"upstream-state thread {thread} is not in {pack.spec.repository} "
                "— point it at the target repository's thread",
            )
        )
    return problems


def readiness(
    pack: Pack,
    manifest: ShimManifest,
    *,
    reproducer_text: str | None,
    records: Sequence[ValidationRecord],
    deny: Sequence[DenyRule],
    now: _dt.datetime,
    window: _dt.timedelta = DEFAULT_WINDOW,
    max_code_lines: int = DEFAULT_MAX_CODE_LINES,
) -> tuple[Blocker, ...]:
    """Every reason ``pack`` is not ready to file; empty when it is."""
    spec = pack.spec
    problems: list[Blocker] = []
    if manifest.upstream.status == "not-applicable":
        problems.append(
            Blocker(
                "manifest",
                "the manifest's upstream status is not-applicable (a local policy) "
                "— delete pack.toml or change the status",
            )
        )
    if reproducer_text is None:
        problems.append(
            Blocker(
                "reproducer",
                f"{manifest.reproducer.path} not found in shims/{manifest.id} "
                "— a pack needs a reproducer to attach",
            )
        )
    if spec.upstream.state is None:
        problems.append(
            Blocker(
                "upstream-state",
                f"not filled — search {spec.repository} issues and pull requests, then "
                'set [upstream-state] state = "new-report", "overlap" or "already-fixed"',
            )
        )
    if not pinned_ref(spec.against):
        problems.append(
            Blocker(
                "against",
                f"{spec.against!r} is not a pinned upstream version or SHA "
                '— write "dist==1.2.3" or "owner/repo@<commit sha>"',
            )
        )
    if pack.reproducer_name not in spec.command.split() and not any(
        part.endswith("/" + pack.reproducer_name) for part in spec.command.split()
    ):
        problems.append(
            Blocker(
                "command",
                f"the command does not run the attached {pack.reproducer_name} "
                "— document the one command that runs it",
            )
        )
    problems += check_target(pack, manifest)
    problems += check_markdown(pack.body)
    problems += check_pasted(pack.body, reproducer_text, max_code_lines)
    problems += check_deny(
        [
            ("body", pack.body),
            ("command", spec.command),
            (pack.reproducer_name, reproducer_text or ""),
        ],
        deny,
    )
    if reproducer_text is not None:
        problems += check_validation(
            spec.shim, records, now=now, window=window, against=spec.against
        )
    return tuple(problems)
