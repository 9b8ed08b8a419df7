"""The overlay runner: a shim's reproducer ``--mode without`` against one candidate release.

Per candidate, a throwaway venv sees a base interpreter's packages and has only the target
distribution changed to the candidate version (``uv pip install --no-deps``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.bisect.cache import ResultCache, reproducer_hash
from retire.bisect.search import BROKEN, FIXED, UNKNOWN, CandidateRun, normal
from retire.core.errors import PatchlaneError
from retire.runs import envs

__all__ = ["BaseEnv", "OverlayRunner", "base_fingerprint", "inspect_base"]

#: How a reproducer outcome reads for the search.
_STATE_OF = {
    "bug-reproduced": BROKEN,
    "fix-validated": FIXED,
    "memory-save-verified": FIXED,
}


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
            record = run_reproducer(self.manifest, "without", python=python, env=self.env,
                                    lane=f"bisect:{self.distribution}=={version}", timeout=self.timeout)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        state = _STATE_OF.get(record.outcome, UNKNOWN)
        detail = record.detail
        seen = {str(canonicalize_name(k)): v for k, v in record.versions.items()}.get(str(canonicalize_name(self.distribution)))
        if seen is not None and normal(seen) != normal(version):
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
