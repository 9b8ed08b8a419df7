"""The mirrors of one gather: each opened and read once, shared by every shim's probes."""

from __future__ import annotations

import threading

from retire.evidence.values import Ancestry, BranchTip, MirrorPull, ProbeFailure, TagContainment
from retire.mirrors.config import MirrorSet
from retire.mirrors.repo import MirrorRepo, open_mirror

__all__ = ["OpenMirrors"]


class OpenMirrors:
    """Look-ups in local mirrors; a mirror opens on its first look-up (thread-safe)."""

    def __init__(self, mirrors: MirrorSet) -> None:
        self.mirrors = mirrors
        self._open: dict[str, MirrorRepo | ProbeFailure] = {}
        self._lock = threading.Lock()

    def has(self, repository: str) -> bool:
        return self.mirrors.for_repository(repository) is not None

    def _repo(self, repository: str) -> MirrorRepo | ProbeFailure:
        mirror = self.mirrors.for_repository(repository)
        if mirror is None:
            return ProbeFailure(
                "git",
                repository,
                f"no mirror of {repository}: declare one in patchlane.toml "
                "([[mirrors.repository]]) and run `patchlane mirrors sync`, or pass --mirrors DIR",
            )
        with self._lock:
            if mirror.repository not in self._open:
                self._open[mirror.repository] = open_mirror(mirror, self.mirrors.cache)
            return self._open[mirror.repository]

    def repo(self, repository: str) -> MirrorRepo | ProbeFailure:
        """The opened mirror of ``repository`` (shared), or why there is none."""
        return self._repo(repository)

    def pull(self, repository: str, number: int) -> MirrorPull | ProbeFailure:
        repo = self._repo(repository)
        return repo if isinstance(repo, ProbeFailure) else repo.probe_pull(number)

    def commit(self, repository: str, commit: str) -> TagContainment | ProbeFailure:
        repo = self._repo(repository)
        return repo if isinstance(repo, ProbeFailure) else repo.probe_commit(commit)

    def tip(self, repository: str, commit: str) -> BranchTip | ProbeFailure:
        repo = self._repo(repository)
        return repo if isinstance(repo, ProbeFailure) else repo.probe_tip(commit)

    def ancestry(self, repository: str, rev: str) -> Ancestry | ProbeFailure:
        repo = self._repo(repository)
        return repo if isinstance(repo, ProbeFailure) else repo.probe_ancestry(rev)
