"""The reproducer protocol, shared by every ``shims/<id>/reproduce.py`` and by the engine.

A reproducer is a standalone program::

    python shims/<id>/reproduce.py [--mode without|with]

1. Its first stdout line is ``PATCHLANE-HOST {json}`` (see :func:`host_stamp`).
2. Then exactly one sentinel line: ``BUG_REPRODUCED``, ``FIX_VALIDATED``,
   ``MEMORY_SAVE_VERIFIED`` or ``SKIPPED: <reason>``. Diagnostics may follow line 1.
3. Exit code: 0 fixed / memory save verified, 10 bug reproduced, 77 skipped, anything else crashed.

A reproducer is written as::

    from shims import reproducer

    def check(with_shim: bool) -> str:
        reproducer.require_cuda(min_cc="9.0")      # raises Skip on hosts without it
        target = reproducer.require("target_library.ops", dist="target-library")  # or Skip
        ...
        return reproducer.BUG_REPRODUCED if broken else reproducer.FIX_VALIDATED

    if __name__ == "__main__":
        reproducer.run("my_shim", check, packages=["torch", "target-library"])

:func:`parse_output` is the one implementation that reads these outputs back.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable
from enum import StrEnum
from importlib import metadata
from types import ModuleType

__all__ = [
    "BUG_REPRODUCED",
    "EXIT_BUG",
    "EXIT_CRASH",
    "EXIT_FIXED",
    "EXIT_SKIPPED",
    "FIX_VALIDATED",
    "HOST_PREFIX",
    "MEMORY_SAVE_VERIFIED",
    "MODES",
    "SENTINELS",
    "SKIPPED",
    "Mode",
    "Sentinel",
    "Skip",
    "exit_code_for",
    "host_stamp",
    "parse_output",
    "require",
    "require_cuda",
    "run",
]


class Sentinel(StrEnum):
    """The line a reproducer prints to say what it showed (the text is the protocol)."""

    BUG_REPRODUCED = "BUG_REPRODUCED"
    FIX_VALIDATED = "FIX_VALIDATED"
    MEMORY_SAVE_VERIFIED = "MEMORY_SAVE_VERIFIED"
    #: Printed as ``SKIPPED: <reason>``; :func:`parse_output` returns ``SKIPPED`` plus the reason.
    SKIPPED = "SKIPPED"


class Mode(StrEnum):
    """``--mode``: does upstream still break (without the shim)? does the shim fix it (with)?"""

    WITHOUT = "without"
    WITH = "with"


BUG_REPRODUCED, FIX_VALIDATED, MEMORY_SAVE_VERIFIED, SKIPPED = Sentinel
SENTINELS = tuple(Sentinel)
MODES = tuple(Mode)
#: What a check may return (a skip is raised, not returned).
_RESULTS = (BUG_REPRODUCED, FIX_VALIDATED, MEMORY_SAVE_VERIFIED)

EXIT_FIXED = 0
EXIT_BUG = 10
# the automake / meson convention for "skipped"
EXIT_SKIPPED = 77
EXIT_CRASH = 1

HOST_PREFIX = "PATCHLANE-HOST "


def _catalogue_importable() -> None:
    """A reproducer may import its own shim's modules (``from shims.<id>.helpers import …``) in
    ``--mode without`` too, before any activation: put the catalogue on the package's path now."""
    import shims

    try:
        from shims import _index
        from shims.errors import InputError
    # the protocol helper alone, as `patchlane pack export` attaches it
    except ImportError:
        return

    # a bad patchlane.toml: activate() says so, in one line, where it matters
    with contextlib.suppress(InputError):
        _index.extend_path(shims.__path__)


_catalogue_importable()

_EXIT_CODES: dict[str, int] = {
    FIX_VALIDATED: EXIT_FIXED,
    MEMORY_SAVE_VERIFIED: EXIT_FIXED,
    BUG_REPRODUCED: EXIT_BUG,
    SKIPPED: EXIT_SKIPPED,
}


# The protocol's name, as reproducers have always raised it (`raise reproducer.Skip(reason)`):
# a skip is not an error.
class Skip(Exception):  # noqa: N818
    """Raised by a check when the host lacks what the reproducer needs; the message is the
    reason."""


def exit_code_for(sentinel: str) -> int:
    """The exit code the protocol pairs with ``sentinel`` (``"SKIPPED"`` for any skip)."""
    return _EXIT_CODES[sentinel]


# ---------------------------------------------------------------------------------------------
# Host stamp


def host_stamp(packages: Iterable[str] = ()) -> dict[str, object]:
    """Describe this host: python, platform, GPU, compute capability, driver, package versions.

    torch is imported only here (never at module import) and only if it is installed; a
    missing GPU reads as ``gpu: null``, ``compute_capability: null``.
    """
    gpu, capability, cuda = _torch_cuda()
    driver = _nvidia_driver()
    if gpu is None and driver is not None:
        # No torch (or a CPU build) on a GPU host: still name the card for the record.
        gpu = _nvidia_smi("name")
    stamp: dict[str, object] = {
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "gpu": gpu,
        "compute_capability": capability,
        "driver": driver,
        "cuda": cuda,
        "packages": {name: _version(name) for name in packages},
        "hostname": socket.gethostname(),
    }
    # the GPUs this run was given (patchlane run packs lanes onto a host's GPUs): which ones
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        stamp["visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    revisions = {name: rev for name in packages if (rev := vcs_revision(name))}
    # a package built from an upstream revision, not a release: say which commit
    if revisions:
        stamp["revisions"] = revisions
    return stamp


def vcs_revision(distribution: str) -> str | None:
    """``<repository>@<commit>`` when ``distribution`` was installed from a VCS checkout (PEP 610
    ``direct_url.json`` with ``vcs_info``), else None: a version number alone cannot tell a
    release from a branch build that carries the same version."""
    try:
        text = metadata.distribution(distribution).read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError):
        return None
    try:
        data = json.loads(text or "null")
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("vcs_info"), dict):
        return None
    commit = data["vcs_info"].get("commit_id")
    url = data.get("url")
    return f"{url}@{commit}" if isinstance(url, str) and isinstance(commit, str) else None


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _torch_cuda() -> tuple[str | None, str | None, str | None]:
    """(gpu name, "major.minor", torch's CUDA runtime) or Nones; imports torch lazily."""
    if "torch" not in sys.modules:
        from importlib.util import find_spec

        if find_spec("torch") is None:
            return None, None, None
    try:
        # the lane's, never the engine's environment: no types to check against
        torch = importlib.import_module("torch")
        cuda = getattr(torch.version, "cuda", None)
        if not torch.cuda.is_available():
            return None, None, cuda
        index = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return torch.cuda.get_device_name(index), f"{major}.{minor}", cuda
    # a broken CUDA install must not stop the stamp; the check will say more
    except Exception:  # noqa: BLE001
        return None, None, None


def _nvidia_driver() -> str | None:
    # The kernel module reports the driver without spawning anything.
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as handle:
            first = handle.readline()
    except OSError:
        return _nvidia_smi("driver_version")
    for word in first.split():
        if word[:1].isdigit() and "." in word:
            return word
    return _nvidia_smi("driver_version")


def _nvidia_smi(field: str) -> str | None:
    try:
        result = subprocess.run(
            ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else None


def require_cuda(min_cc: str | None = None) -> tuple[int, int]:
    """Return the device's ``(major, minor)``, or raise :class:`Skip` saying what is missing."""
    try:
        # the lane's, never the engine's environment: no types to check against
        torch = importlib.import_module("torch")
    except ImportError:
        raise Skip("torch is not installed") from None
    if not torch.cuda.is_available():
        raise Skip("no CUDA device")
    major, minor = torch.cuda.get_device_capability(torch.cuda.current_device())
    have = (int(major), int(minor))
    if min_cc is not None:
        need = tuple(int(part) for part in min_cc.split("."))
        if have < need:
            raise Skip(f"needs compute capability >= {min_cc}, this host has {have[0]}.{have[1]}")
    return have


def require(
    module: str, dist: str | None = None, *, packages: Iterable[str] = (), hint: str = ""
) -> ModuleType:
    """Import ``module`` and return it, or skip the reproducer saying exactly why.

    The prologue every reproducer repeated (``try: import …; except ImportError: raise Skip``)
    as one call. ``dist`` is the distribution that ships ``module`` (default: its top-level
    name). The reason is ``<dist> is not installed`` when the top-level package is absent, else
    ``<module> is not importable with <dist> <version>: <the ImportError>``, then ``hint`` (what a
    person can do about it) when given.

    Inside :func:`run`'s check this raises :class:`Skip`. Called anywhere else (at the top of a
    script, before ``run``), it prints the host stamp and ``SKIPPED: <reason>`` itself and exits
    77, so the output still follows the protocol. ``packages`` are stamped in that case.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = _missing(module, dist or module.split(".")[0], exc) + (f"; {hint}" if hint else "")
    if _running:
        raise Skip(reason)
    stamp = list(dict.fromkeys([*packages, dist or module.split(".")[0]]))
    print(HOST_PREFIX + json.dumps(host_stamp(stamp), sort_keys=True), flush=True)
    print(f"{SKIPPED}: {reason}", flush=True)
    raise SystemExit(EXIT_SKIPPED)


def _missing(module: str, dist: str, exc: ImportError) -> str:
    from importlib.util import find_spec

    top = module.split(".")[0]
    try:
        absent = find_spec(top) is None
    except (ImportError, ValueError):
        absent = True
    if absent:
        return f"{dist} is not installed"
    detail = " ".join(str(exc).split()) or type(exc).__name__
    version = _version(dist)
    where = f"{dist} {version}" if version else dist
    return f"{module} is not importable with {where}: {detail}"


# ---------------------------------------------------------------------------------------------
# Running a check

#: True while :func:`run` is calling the check (so :func:`require` raises :class:`Skip`).
_running = False


def run(
    shim_id: str,
    check: Callable[[bool], str],
    *,
    packages: Iterable[str] = (),
    argv: list[str] | None = None,
) -> None:
    """Run ``check`` under the protocol and exit with the matching code (never returns)."""
    global _running
    import argparse

    parser = argparse.ArgumentParser(description=f"Reproducer for shim {shim_id}")
    parser.add_argument(
        "--mode",
        choices=[mode.value for mode in Mode],
        default=Mode.WITHOUT.value,
        help="without: does upstream still break? with: does the shim fix it? (default: without)",
    )
    args = parser.parse_args(argv)
    with_shim = args.mode == Mode.WITH

    print(HOST_PREFIX + json.dumps(host_stamp(packages), sort_keys=True), flush=True)
    try:
        if with_shim:
            import shims

            state = shims.activate(only={shim_id})[shim_id]
            if state.state == "disabled":
                raise Skip(f"shim {shim_id} is disabled here ({state.reason})")
            if state.state == "error":
                # A "with" run of a shim that cannot even load proves nothing: crash, don't report a
                # bug.
                raise RuntimeError(f"shim {shim_id} could not be activated: {state.reason}")
        _running = True
        try:
            sentinel = check(with_shim)
        finally:
            _running = False
        if sentinel not in _RESULTS:
            raise TypeError(
                f"check() returned {sentinel!r}; return BUG_REPRODUCED, FIX_VALIDATED or "
                "MEMORY_SAVE_VERIFIED, or raise Skip(reason)"
            )
    except Skip as skip:
        reason = " ".join(str(skip).split()) or "no reason given"
        print(f"{SKIPPED}: {reason}", flush=True)
        raise SystemExit(EXIT_SKIPPED) from None
    # whatever the check raised is the run's crash: its traceback, then the crash's exit code
    except Exception:  # noqa: BLE001
        sys.stdout.flush()
        traceback.print_exc()
        sys.stderr.flush()
        raise SystemExit(EXIT_CRASH) from None
    if with_shim:
        _report_shim_state(shim_id)
    print(sentinel, flush=True)
    raise SystemExit(exit_code_for(sentinel))


def _report_shim_state(shim_id: str) -> None:
    # A diagnostic (after line 1, so allowed): says whether the shim actually applied.
    import shims

    state = shims.status().get(shim_id)
    if state is not None:
        print(f"# shim {shim_id}: {state.state} ({state.reason})", flush=True)


# ---------------------------------------------------------------------------------------------
# Reading outputs back (the engine side)


def parse_output(text: str) -> tuple[dict[str, object] | None, Sentinel | None, str | None]:
    """Read a reproducer's stdout: ``(host stamp or None, sentinel or None, skip reason or None)``.

    The host stamp counts only on the first line. The sentinel is ``None`` unless exactly one
    sentinel line was printed: none, two different ones, or the same one twice are all off the
    protocol (the run counts as crashed). A skip comes back as ``(Sentinel.SKIPPED, reason)``.
    Lines end at ``\\n`` only (a U+2028 in a diagnostic does not start a line).
    """
    lines = text.replace("\r\n", "\n").split("\n")
    host: dict[str, object] | None = None
    if lines and lines[0].startswith(HOST_PREFIX):
        try:
            parsed = json.loads(lines[0][len(HOST_PREFIX) :])
        # not JSON, or nested too deeply: no stamp
        except (ValueError, RecursionError):
            parsed = None
        host = parsed if isinstance(parsed, dict) else None

    found: list[tuple[Sentinel, str | None]] = []
    for raw in lines[1:] if host is not None else lines:
        line = raw.rstrip()
        if line in _RESULTS:
            found.append((Sentinel(line), None))
        elif line.startswith(SKIPPED + ":"):
            found.append((SKIPPED, line[len(SKIPPED) + 1 :].strip() or "no reason given"))
    if len(found) != 1:
        return host, None, None
    sentinel, reason = found.pop()
    return host, sentinel, reason
