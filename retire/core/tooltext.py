"""What a tool said, as the engine relays it: the lines it leaves on a terminal, with no control
sequence of its own.

uv, git, Slurm's commands, a named build, an interpreter being inspected: their output reaches
people through the engine's one-line errors, notes and logs' tails. A tool (or what it relays:
a server's message, a hook's output) may print ANSI colours, OSC sequences that set a terminal's
title or plant a link, cursor moves and carriage-return redraws. :func:`plain` is the one place
they are taken out — at each boundary where a tool's output comes in (:mod:`retire.core.git`,
:mod:`retire.core.uv`, ``runs.slurmclient``, ``runs.wheelbuild``, ``runs.envs``, ``runs.launcher``,
``bisect.runner``) — so no message, document or file the engine writes carries them.
"""

from __future__ import annotations

import re

__all__ = ["lines", "plain"]

# CSI (colours, cursor moves), OSC (a title, a hyperlink: ends at BEL or ST, or at the end), the
# string controls DCS/SOS/PM/APC (end at ST), any other two-character escape; and their 8-bit
# forms
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
)
# every other control character but a tab and the line ends
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def plain(text: str) -> str:
    """``text`` as the lines it leaves: escape sequences and control characters dropped, each line
    what its last carriage-return redraw said."""
    found = []
    for line in _SEQUENCE.sub("", text).replace("\r\n", "\n").split("\n"):
        segments = [part for part in line.split("\r") if part.strip()]
        if segments or line == "":
            found.append(_CONTROL.sub("", segments[-1] if segments else ""))
    return "\n".join(found)


def lines(text: str) -> list[str]:
    """The non-blank lines of :func:`plain` ``text``, stripped."""
    return [line.strip() for line in plain(text).splitlines() if line.strip()]
