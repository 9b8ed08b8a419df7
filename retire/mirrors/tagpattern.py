"""Release-tag patterns that cannot hang a run: checked when ``patchlane.toml`` is read, and
matched only against tags of a bounded length.

Python's ``re`` backtracks: a pattern such as ``v(\\d+)+x`` takes exponential time on a tag
like ``v1111111111111111111111111111!``, and ``verdicts`` would run without end. So a pattern is
tried, when the configuration is read, against adversarial tags made from its own characters
(each character and pair of characters repeated up to :data:`MAX_TAG_LENGTH`, after the
pattern's literal prefix, with a character it cannot end on): a pattern that spends more than
:data:`MATCH_LIMIT_S` of CPU on one such tag is refused in one line. A tag longer than
:data:`MAX_TAG_LENGTH` is never a release tag, so no tag is longer than those tried.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from collections.abc import Iterator

__all__ = ["MATCH_LIMIT_S", "MAX_TAG_LENGTH", "pattern_problem"]

#: Characters of the longest tag that can be a release tag (``core_v0.19.0rc7`` is 15).
MAX_TAG_LENGTH = 128
#: CPU seconds one adversarial tag may take to match before the pattern is refused.
MATCH_LIMIT_S = 0.002
#: Wall-clock seconds the whole check may take (a safety net on the main thread).
CHECK_LIMIT_S = 1.0
#: Characters every pattern is tried with, besides its own (digits, words, separators).
_COMMON = "1a. -_A"
#: The step by which an adversarial tag grows: small, so a pattern whose time doubles with each
#: character is caught before one try costs much.
_STEP = 4
_METACHARACTERS = frozenset("\\.^$*+?{}[]|()")


class _TooSlowError(Exception):
    """The check's own wall-clock limit passed (raised by its alarm)."""


def _literal_prefix(pattern: str) -> str:
    """The literal characters a pattern starts with (``core_v`` of ``core_v(?P<…>…)``)."""
    prefix: list[str] = []
    for char in pattern:
        if char in _METACHARACTERS:
            # a quantifier after the last literal applies to it alone
            if char in "*+?{" and prefix:
                prefix.pop()
            break
        prefix.append(char)
    return "".join(prefix)


def _pumps(pattern: str) -> Iterator[str]:
    """The strings repeated to build adversarial tags: each character the pattern names (and a
    digit, a letter, separators), and each pair of the common ones."""
    own = [c for c in dict.fromkeys(pattern) if c.isprintable() and c not in _METACHARACTERS]
    singles = list(dict.fromkeys([*_COMMON, *own[:24]]))
    yield from singles
    for first in _COMMON:
        for second in _COMMON:
            if first != second:
                yield first + second


def _cpu_seconds(compiled: re.Pattern[str], text: str) -> float:
    began = time.thread_time()
    compiled.fullmatch(text)
    return time.thread_time() - began


def _slowest(compiled: re.Pattern[str], pattern: str) -> tuple[float, str]:
    """The CPU time of the slowest adversarial tag (stopping at the first over the limit)."""
    prefix = _literal_prefix(pattern)
    worst, worst_tag = 0.0, ""
    for pump in _pumps(pattern):
        for length in range(_STEP, MAX_TAG_LENGTH - len(prefix) + 1, _STEP):
            body = (pump * length)[:length]
            for end in ("\x00", "\n"):
                tag = prefix + body + end
                spent = _cpu_seconds(compiled, tag)
                if spent > MATCH_LIMIT_S:
                    # a busy host can stall one match: the best of three decides
                    spent = min(spent, *(_cpu_seconds(compiled, tag) for _ in range(2)))
                if spent > worst:
                    worst, worst_tag = spent, tag
                if worst > MATCH_LIMIT_S:
                    return worst, worst_tag
    return worst, worst_tag


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise :class:`_TooSlowError` after ``seconds`` (main thread only; ``re`` checks signals
    while it backtracks). Elsewhere, the slow growth of the tags bounds the check."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise _TooSlowError

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def pattern_problem(compiled: re.Pattern[str]) -> str | None:
    """Why ``compiled`` must not match release tags (it backtracks catastrophically on a tag of
    at most :data:`MAX_TAG_LENGTH` characters), or None."""
    try:
        with _alarm(CHECK_LIMIT_S):
            worst, tag = _slowest(compiled, compiled.pattern)
    except _TooSlowError:
        return (
            f"matching adversarial tags of up to {MAX_TAG_LENGTH} characters took over "
            f"{CHECK_LIMIT_S:g}s: the pattern backtracks catastrophically"
        )
    if worst <= MATCH_LIMIT_S:
        return None
    shown = tag if len(tag) <= 40 else tag[:37] + "…"
    return (
        f"matching the {len(tag)}-character tag {shown!r} took {worst * 1000:.0f} ms (a tag "
        f"must match in under {MATCH_LIMIT_S * 1000:g} ms): the pattern backtracks "
        "catastrophically (a quantifier inside a quantified group, such as (\\d+)+, "
        "or alternatives that overlap)"
    )
