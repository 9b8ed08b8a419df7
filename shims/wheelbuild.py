"""A named build: how to turn a source checkout of a target at one commit into a wheel, for a
target uv cannot build from source cheaply (compiled extensions: Transformer Engine, mamba-ssm,
TileLang).

A shim names it under ``[target]``, as an argument list or a table::

    build = ["bash", "{here}/build-wheel.sh"]
    build = { command = ["bash", "{here}/build-wheel.sh"], timeout = 7200 }

The command is an argument list, never a shell line; it runs with the checkout (the package's
subdirectory) as its working folder and writes one wheel into ``$PATCHLANE_WHEEL_DIR``.
``{here}``, at the start of an argument, is the folder of the file that names the build (the
shim's folder), so a script kept beside the manifest is found; no argument may climb out of it
with ``..``. Standard library only: the manifest reader uses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from shims.tomlreader import Value

__all__ = ["DEFAULT_BUILD_TIMEOUT", "HERE", "MAX_BUILD_TIMEOUT", "WheelBuild", "read_wheel_build"]

#: Seconds a named build may take unless it says otherwise (a CUDA extension takes long).
DEFAULT_BUILD_TIMEOUT = 3600.0
#: The longest a build may be given (a day): more is a typo.
MAX_BUILD_TIMEOUT = 86400.0
#: The placeholder for the folder of the file that names the build.
HERE = "{here}"
_EXAMPLE = 'write build = ["bash", "{here}/build-wheel.sh"]'


@dataclass(frozen=True)
class WheelBuild:
    """``command`` (an argument list) builds a wheel of the checkout it runs in, within
    ``timeout`` seconds; ``here`` is what ``{here}`` stands for; ``origin`` says where it was
    named (``shims/te_fix/manifest.toml [target] build``)."""

    command: tuple[str, ...]
    timeout: float = DEFAULT_BUILD_TIMEOUT
    here: Path = field(default=Path("."), compare=False)
    origin: str = field(default="", compare=False)

    def argv(self) -> list[str]:
        """The command with ``{here}`` made the named file's folder."""
        return [
            str(self.here / arg[len(HERE) :].lstrip("/")) if arg.startswith(HERE) else arg
            for arg in self.command
        ]

    def describe(self) -> str:
        """``bash {here}/build-wheel.sh (shims/x/manifest.toml [target] build)``."""
        text = " ".join(self.command)
        return f"{text} ({self.origin})" if self.origin else text


def read_wheel_build(value: Value, here: Path, origin: str) -> WheelBuild:
    """A ``build`` key: an argument list, or a table of ``command`` and ``timeout``; one-line
    InputError otherwise."""
    timeout: float = DEFAULT_BUILD_TIMEOUT
    command = value
    if isinstance(value.raw, dict):
        table = value.table()
        table.check_keys(("command", "timeout"))
        command = table.need("command", fix=_EXAMPLE)
        if "timeout" in table:
            timeout = float(
                table.need("timeout").number(
                    positive=True,
                    maximum=MAX_BUILD_TIMEOUT,
                    what=f"a positive number of seconds up to {MAX_BUILD_TIMEOUT:.0f}",
                    fix="write timeout = 3600",
                )
            )
    items = command.items(what="an argument list", fix=_EXAMPLE)
    if not items:
        raise command.error("is empty", _EXAMPLE)
    argv = tuple(_argument(item) for item in items)
    return WheelBuild(argv, timeout, here, origin)


def _argument(item: Value) -> str:
    """One argument: a non-empty string, ``{here}`` only at its start and never climbing out."""
    text = item.string(fix=_EXAMPLE)
    if "\0" in text:
        raise item.error("holds a NUL character", "remove it")
    rest = text.removeprefix(HERE)
    if HERE in text[1:] or (text.startswith(HERE) and rest and not rest.startswith("/")):
        raise item.error(
            f"{HERE} may only start an argument, as {HERE} or {HERE}/path: {text[:80]!r}",
            _EXAMPLE,
        )
    if text.startswith(HERE) and ".." in PurePosixPath(rest).parts:
        raise item.error(
            f"{text[:80]!r} leaves the folder of the file that names the build",
            f"keep the script inside it, like {HERE}/build-wheel.sh",
        )
    return text
