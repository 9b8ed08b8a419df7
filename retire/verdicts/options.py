"""How one gather probes: the client, the indexes, the code host, the cache, the mirrors (no I/O).

:class:`GatherOptions` groups what :func:`retire.verdicts.gather.gather` takes beside the shims,
lanes, locks and records; every field has a default that works on a connected host.
"""

from __future__ import annotations

import datetime as _dt
import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from retire.lanes.model import Lane
from retire.locks.trial import RaiseTrial
from retire.mirrors.config import MirrorSet
from retire.probes.fetched import RetryPolicy
from retire.verdicts.rules import DEFAULT_STALE_DAYS
from shims import times

__all__ = ["FROM_ENV", "FromEnv", "GatherOptions", "Mirrors", "Resolver"]


class FromEnv(enum.Enum):
    """The token is read from ``GITHUB_TOKEN`` / ``GH_TOKEN`` (None would mean: no token)."""

    TOKEN = "from-env"


FROM_ENV = FromEnv.TOKEN

#: A :class:`MirrorSet`, ``{repository URL: path}``, a folder of ``<owner>/<repo>`` clones, or None.
Mirrors = MirrorSet | Mapping[str, str | os.PathLike[str]] | str | Path | None


#: A trial re-lock: would ``lane`` resolve with ``floors`` ({distribution: version}) raised?
#: (:func:`retire.locks.trial.try_raise` with its folders and mirrors bound.)
Resolver = Callable[[Lane, Mapping[str, str]], RaiseTrial]


@dataclass(frozen=True)
class GatherOptions:
    #: an injected client (one is made and closed when None)
    client: httpx.Client | None = None
    #: the default index where neither the lane nor the host's uv configuration names one
    index_url: str | None = None
    #: the code host's REST/GraphQL base (None: GitHub's)
    api_base: str | None = None
    #: the host of issue and pull-request web URLs (None: github.com)
    web_host: str | None = None
    token: str | FromEnv | None = FROM_ENV
    #: the HTTP cache (None: no cache)
    cache_dir: str | os.PathLike[str] | None = None
    mirrors: Mirrors = None
    #: retries, deadline and size cap of every probe (None: the defaults)
    policy: RetryPolicy | None = None
    clock: Callable[[], _dt.datetime] = times.now
    stale_after_days: int = DEFAULT_STALE_DAYS
    #: probes in flight at once
    workers: int = 100
    #: run a trial re-lock for every raise a lane is proposed (False: a raise stays "not
    #: re-locked", as `patchlane verdicts --no-resolve` and the pre-commit hook leave it)
    resolve: bool = True
    #: the trial re-lock (None: :func:`retire.locks.trial.try_raise` with the gather's locks
    #: folder, ``scratch_dir``, ``trial_cache``, the mirrors and the indexes)
    resolver: Resolver | None = None
    #: where trial locks are written (None: a temporary folder, removed afterwards)
    scratch_dir: str | os.PathLike[str] | None = None
    #: where the answers of frozen lanes' trials are kept (None: asked every time)
    trial_cache: str | os.PathLike[str] | None = None
    #: trial re-locks at once
    trial_workers: int = 4
