"""Helpers for probe tests: a fetcher with a fast retry policy, and a toy release universe."""

from __future__ import annotations

from pathlib import Path

from retire.probes.http import Fetcher, HttpCache, RetryPolicy, make_client
from tests.support.index import PackageIndex
from tests.support.wheels import build_wheel

#: Retries that finish in well under a second; the shape (attempts, backoff) is the real one.
FAST = RetryPolicy(attempts=3, backoff=0.02, max_backoff=0.1, budget=5.0, max_wait=2.0, timeout=2.0)


def fetcher(
    cache_dir: Path | None = None, *, policy: RetryPolicy = FAST, secrets=(), **options
) -> Fetcher:
    client = make_client(timeout=policy.timeout)
    return Fetcher(
        client,
        cache=HttpCache(cache_dir) if cache_dir else None,
        policy=policy,
        secrets=secrets,
        **options,
    )


def toylib_index(root: Path) -> PackageIndex:
    """toylib: 1.0 (Jan), 1.1 yanked (Mar), 1.2 (Apr, wheel + sdist), 1.3rc1, a nightly."""
    index = PackageIndex()
    index.add(build_wheel(root, "toylib", "1.0"), "2026-01-10")
    index.add(build_wheel(root, "toylib", "1.1"), "2026-03-01", yanked="wrong wheel tag")
    index.add(build_wheel(root, "toylib", "1.2"), "2026-04-01T12:00:00")
    index.add(build_wheel(root, "toylib", "1.2", tag="py312-none-any"), "2026-04-02")
    index.add(build_wheel(root, "toylib", "1.3rc1"), "2026-05-01")
    index.add(build_wheel(root, "toylib", "1.4.dev20260601"), "2026-06-01")
    return index
