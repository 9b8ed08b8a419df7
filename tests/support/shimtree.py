"""A throwaway shims tree on disk: a toy target library with a real bug, shims for it, and
helpers to run Python in a fresh interpreter pointed at that tree (so import hooks are real)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

#: toylib 1.0: add() subtracts. The bug the toy shim exists for.
BUGGY_TARGET = '''
"""toylib: a library whose add() is broken in 1.0."""
__version__ = "1.0"

def add(a, b):
    return a - b
'''
#: toylib 1.1: upstream fixed add(); the shim's probe must notice and stand down.
FIXED_TARGET = """
__version__ = "1.1"

def add(a, b):
    return a + b
"""
#: toylib 2.0: add() was renamed its parameters; the patch no longer fits.
RESHAPED_TARGET = """
__version__ = "2.0"

def add(x, y, *, strict=False):
    return x - y
"""

TOY_PATCH = """
def check_shape(module):
    add = getattr(module, "add", None)
    if add is None:
        return "add() is missing"
    if add.__code__.co_varnames[:add.__code__.co_argcount] != ("a", "b"):
        return "add() signature changed"
    return None


def probe(module):
    return "add(2, 2) returns %r, not 4" % (module.add(2, 2),) if module.add(2, 2) != 4 else None


def apply(module):
    def add(a, b):
        return a + b

    module.add = add
    module.APPLIED = getattr(module, "APPLIED", 0) + 1
"""

TOY_REPRODUCER = """
from shims import reproducer


def check(with_shim):
    import toylib

    return reproducer.FIX_VALIDATED if toylib.add(2, 2) == 4 else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""

#: The same test of a newer API, ``toylib.arith.add``, imported with ``require()``: on a release
#: without that module it prints SKIPPED (what bisection reads as "not applicable").
ARITH_REPRODUCER = """
from shims import reproducer


def check(with_shim):
    arith = reproducer.require("toylib.arith", "toylib")
    return reproducer.FIX_VALIDATED if arith.add(2, 2) == 4 else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


def manifest_text(
    shim_id: str,
    *,
    module: str = "toylib",
    distribution: str = "toylib",
    fix_class: str = "source-patch",
    env: dict[str, str] | None = None,
) -> str:
    """A complete, valid manifest; tests break it with ``str.replace`` to build the bad corpus."""
    text = f'''
id = "{shim_id}"
title = "toylib add() subtracts"
fix-class = "{fix_class}"
explanation = "add() returns a - b in toylib 1.0."
numerics = "Exact: integers, no rounding involved."
owner = "kernels@example.org"
created = 2026-04-14

[target]
distribution = "{distribution}"
module = "{module}"
affected = ">=1.0,<1.1"

[upstream]
status = "submitted"

[[upstream.links]]
role = "report"
url = "https://example.org/toylib/issues/1"

[[upstream.links]]
role = "fix"
url = "https://example.org/toylib/pull/2"

[retirement]
mode = "any"

[[retirement.conditions]]
kind = "version-floor"
version = ">=1.1"

[[retirement.conditions]]
kind = "pr-released"
url = "https://example.org/toylib/pull/2"

[[retirement.conditions]]
kind = "commit-in-tag"
repository = "https://example.org/toylib"
commit = "0123456789abcdef0123456789abcdef01234567"

[[retirement.conditions]]
kind = "reproducer-clean"

[reproducer]
path = "reproduce.py"
needs-cuda = false
packages = ["toylib"]
timeout = 60
'''
    if env:
        text += "\n[env]\n" + "".join(f'{name} = "{value}"\n' for name, value in env.items())
    return text


def write_target(
    site: Path, source: str = BUGGY_TARGET, *, name: str = "toylib", version: str = "1.0"
) -> Path:
    """Write module ``name`` (and a dist-info so importlib.metadata knows its version)."""
    site.mkdir(parents=True, exist_ok=True)
    module = site / f"{name}.py"
    module.write_text(textwrap.dedent(source))
    # an "upgrade": one version installed at a time
    for stale in site.glob(f"{name}-*.dist-info"):
        for item in stale.iterdir():
            item.unlink()
        stale.rmdir()
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return module


def write_shim(
    root: Path,
    shim_id: str,
    *,
    manifest: str | None = None,
    patch: str | None = TOY_PATCH,
    reproducer: str | None = TOY_REPRODUCER,
    **manifest_options: object,
) -> Path:
    folder = root / shim_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.toml").write_text(
        manifest if manifest is not None else manifest_text(shim_id, **manifest_options)
    )  # type: ignore[arg-type]
    if patch is not None:
        (folder / "patch.py").write_text(textwrap.dedent(patch))
    if reproducer is not None:
        (folder / "reproduce.py").write_text(
            textwrap.dedent(reproducer).replace("{shim_id}", shim_id)
        )
    return folder


def subprocess_env(tmp_path: Path, root: Path, site: Path, **extra: str) -> dict[str, str]:
    """An environment for a fresh interpreter: repo + toy site on the path, shims from ``root``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(site)])
    env["PATCHLANE_SHIMS_PATH"] = str(root)
    # never touch the real user cache
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def run_python(
    code: str,
    env: dict[str, str],
    *,
    args: list[str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    command = (
        [sys.executable, "-c", textwrap.dedent(code)] if args is None else [sys.executable, *args]
    )
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd
    )
