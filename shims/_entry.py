"""An index entry: what activation needs from one shim's manifest.

:mod:`shims._index` builds the entries and caches them; the runtime (``shims/__init__.py``) reads
them. An entry is a plain tuple, because that is what the marshal cache stores; the constants
below name its fields' positions. No imports (``import shims`` loads this module, so it stays
free), and the annotations are strings so that nothing of ``typing`` is loaded at run time.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["DIST", "ENV", "ERROR", "FIX_CLASS", "HAS_PATCH", "ID", "MODULE", "Entry"]

#: id, target module, distribution, fix class, env pairs, has patch.py, error or None.
Entry = tuple[str, str, str, str, tuple[tuple[str, str], ...], bool, str | None]

ID: "Final" = 0
MODULE: "Final" = 1
DIST: "Final" = 2
FIX_CLASS: "Final" = 3
ENV: "Final" = 4
HAS_PATCH: "Final" = 5
ERROR: "Final" = 6
