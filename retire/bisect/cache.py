"""Conclusive candidate results on disk, so asking the same question again costs no reproducer run.

The key is (shim, reproducer source hash, distribution, version, base environment fingerprint):
an edited reproducer or another base asks again. Broken, fixed and not-applicable results of a
reproducer run are kept (each is a property of that key); unknown ones are not (a crash or a
timeout may be transient) and are retried next time, and neither are releases that could not be
installed (the runner does not store them: the index may gain a file for them).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from packaging.utils import canonicalize_name

from retire.bisect.search import UNKNOWN, CandidateRun, normal
from retire.core.atomic import atomic_write
from shims.model import ShimManifest

__all__ = ["CACHE_VERSION", "ResultCache", "reproducer_hash"]

#: Bump when what a cached entry means changes, so old entries stop matching.
# 2: not-applicable results are kept
CACHE_VERSION = 2


class ResultCache:
    """Candidate results that will not change on disk, one JSON file per key, written atomically."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    @staticmethod
    def key(shim: str, reproducer_hash: str, distribution: str, version: str, base: str) -> str:
        blob = json.dumps(
            [
                CACHE_VERSION,
                shim,
                reproducer_hash,
                str(canonicalize_name(distribution)),
                normal(version),
                base,
            ],
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> CandidateRun | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            run = CandidateRun(**data["run"])
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            # missing or unreadable: just run it again
            return None
        return None if run.state == UNKNOWN else run

    def put(self, key: str, run: CandidateRun, inputs: Mapping[str, str]) -> None:
        if run.state != UNKNOWN:
            atomic_write(
                self._path(key),
                json.dumps({"inputs": dict(inputs), "run": asdict(run)}, indent=1, sort_keys=True),
                within=self.directory,
            )


def reproducer_hash(manifest: ShimManifest) -> str:
    return "sha256:" + hashlib.sha256(Path(manifest.reproducer_path).read_bytes()).hexdigest()
