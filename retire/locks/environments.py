"""Where a lock applies: PEP 751 ``environments`` for a lane's platform and Python.

A lane is locked for one ``--python-platform`` target and one CPython minor version; its wheels
install nowhere else. The lock says so in the standard's own key, one marker, so that pip (26) and
uv (0.13) refuse it elsewhere with "the environment is not supported by the lock" — not a missing
wheel halfway through an install — and patchlane's own env build names the platform it is for.

The marker names what markers can express: the operating system (``sys_platform``), the machine
(``platform_machine``, spelled as each system reports it), CPython and its minor version. A
glibc or macOS floor (``manylinux_2_28``) has no marker; the wheels carry it.
"""

from __future__ import annotations

import re

from retire.lanes.model import Lane

__all__ = ["ENVIRONMENTS_KEY", "describe", "environment_marker", "inserted"]

ENVIRONMENTS_KEY = "environments"

# uv's aliases: `linux`, `windows` and `macos` are its default target of each system
_ALIASES = {
    "linux": "x86_64-unknown-linux-gnu",
    "windows": "x86_64-pc-windows-msvc",
    "macos": "aarch64-apple-darwin",
}
# (system in the target, sys_platform, a human name)
_SYSTEMS = (
    ("linux", "linux", "Linux"),
    ("darwin", "darwin", "macOS"),
    ("windows", "win32", "Windows"),
)
# platform_machine as each system reports the target's architecture
_MACHINES = {
    "linux": {"x86_64": "x86_64", "aarch64": "aarch64", "riscv64": "riscv64"},
    "darwin": {"x86_64": "x86_64", "aarch64": "arm64"},
    "win32": {"x86_64": "AMD64", "aarch64": "ARM64", "i686": "x86"},
}
_FIRST_TABLE = re.compile(r"^\[", re.MULTILINE)


def _target(platform: str) -> tuple[str, str, str]:
    """(sys_platform, platform_machine, system name) of a uv ``--python-platform`` target."""
    target = _ALIASES.get(platform, platform)
    architecture = target.split("-", 1)[0]
    for word, sys_platform, name in _SYSTEMS:
        if word in target or (word == "linux" and "manylinux" in target):
            return sys_platform, _MACHINES[sys_platform][architecture], name
    raise ValueError(f"no environment marker for platform {platform!r}")


def environment_marker(lane: Lane) -> str:
    """The one PEP 508 marker of the environments ``lane``'s lock installs into."""
    sys_platform, machine, _name = _target(lane.platform)
    return (
        f"sys_platform == '{sys_platform}' and platform_machine == '{machine}' and "
        f"implementation_name == 'cpython' and python_version == '{lane.python}'"
    )


def describe(lane: Lane) -> str:
    """``Linux x86_64 (x86_64-manylinux_2_28), CPython 3.12``: for people."""
    _sys_platform, machine, name = _target(lane.platform)
    return f"{name} {machine} ({lane.platform}), CPython {lane.python}"


def inserted(lock_text: str, lane: Lane) -> str:
    """uv's lock with ``environments`` for ``lane`` among its top-level keys (before the first
    table); a lock that declares them already is returned as it is."""
    if re.search(rf"^{ENVIRONMENTS_KEY}\s*=", lock_text, re.MULTILINE):
        return lock_text
    line = f'{ENVIRONMENTS_KEY} = ["{environment_marker(lane)}"]\n'
    first = _FIRST_TABLE.search(lock_text)
    if first is None:
        return lock_text.rstrip("\n") + "\n" + line
    head = lock_text[: first.start()].rstrip("\n")
    return f"{head}\n{line}\n{lock_text[first.start() :]}"
