"""Deciding 100 shims on an air-gapped host: local git mirrors, a loopback index, no code host.

Each shim has a ``pr-released`` condition on its own pull request (five upstream repositories,
twenty squash-merged pull requests each, tagged releases) and a recorded clean run without the
shim; the code host is a closed port, as on a cluster that cannot reach it. The mirrors must
answer for it: every shim retires, and the whole gather stays within 1 s (goal). Side by side,
the same gather with the code host up (the loopback stand-in) shows what the mirrors cost.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from bench import interleaved, median, quick, row

SHIMS = 100
REPOS = 5


def _upstreams(root: Path) -> dict[str, Path]:
    """Five bare mirrors, each with 20 squash-merged PRs: PR #k lands, then release v1.k is
    tagged."""
    from tests.support.gitrepos import commit, git

    mirrors = {}
    for r in range(REPOS):
        work = root / "work" / f"repo{r}"
        work.mkdir(parents=True)
        git(work, "init", "-q", "-b", "main")
        commit(work, "README", "0\n", "Initial import")
        git(work, "tag", "v1.0")
        for k in range(1, SHIMS // REPOS + 1):
            commit(work, f"fix{k}.py", f"{k}\n", f"Fix bug {k} (#{k})")
            git(work, "tag", f"v1.{k}")
        path = root / "mirrors" / "org" / f"repo{r}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        git(path.parent, "clone", "-q", "--mirror", str(work), str(path))
        mirrors[f"repo{r}"] = path
    return mirrors


def run() -> list[dict]:
    from retire.evidence.validation import ValidationRecord, append
    from retire.probes.http import RetryPolicy
    from retire.verdicts.gather import GatherOptions, gather
    from tests.support.codehost import CodeHost, CodeHostServer
    from tests.support.faults import FaultyIndexServer, unused_port
    from tests.support.index import PackageIndex
    from tests.support.retirement import NOW, Project, pr_released
    from tests.support.wheels import build_wheel

    root = Path(tempfile.mkdtemp(prefix="patchlane-bench-verdicts-"))
    try:
        _upstreams(root)
        index, host = PackageIndex(), CodeHost()
        per_repo = SHIMS // REPOS
        for r in range(REPOS):
            for k in range(per_repo + 1):
                index.add(
                    build_wheel(root / "wheels", f"repo{r}", f"1.{k}"), f"2026-01-{k + 1:02d}"
                )
            for k in range(1, per_repo + 1):
                host.add_pull(
                    "org",
                    f"repo{r}",
                    k,
                    state="closed",
                    merged=True,
                    merged_at=f"2026-01-{k:02d}T12:00:00",
                    updated_at="2026-06-01",
                )
        project = Project(root / "project")
        shims, records = [], []
        for n in range(SHIMS):
            r, k = divmod(n, per_repo)
            url = f"https://github.com/org/repo{r}/pull/{k + 1}"
            shim = f"shim{n:03d}"
            project.shim(shim, pr_released(url), links=(("fix", url),), distribution=f"repo{r}")
            records.append(
                ValidationRecord(
                    shim=shim,
                    mode="without",
                    lane="bench",
                    host={"hostname": "h100-1", "gpu": "H100"},
                    versions={f"repo{r}": f"1.{per_repo}"},
                    sentinel="FIX_VALIDATED",
                    outcome="fix-validated",
                    exit_code=0,
                    duration_s=1.0,
                    started_at="2026-06-01T00:00:00+00:00",
                )
            )
            shims.append(shim)
        append(project.validation, records)
        with FaultyIndexServer(index) as index_server, CodeHostServer(host) as api:
            project.lane(
                "bench",
                shims,
                index_url=index_server.url,
                packages=[f"repo{r}" for r in range(REPOS)],
            )
            manifests, lanes = project.manifests(), project.lanes()
            policy = RetryPolicy(attempts=1, timeout=5.0)
            dead = f"http://127.0.0.1:{unused_port()}"

            def decide(api_base: str, mirrors) -> float:
                started = time.perf_counter()
                verdicts = gather(
                    manifests,
                    lanes,
                    project.root / "locks",
                    project.validation,
                    GatherOptions(
                        api_base=api_base,
                        token=None,
                        mirrors=mirrors,
                        policy=policy,
                        clock=lambda: NOW,
                        # the probes are measured here; trial re-locks have their own row
                        resolve=False,
                    ),
                )
                elapsed = time.perf_counter() - started
                wrong = [v for v in verdicts if v.decision != "retire"]
                if wrong:
                    raise RuntimeError(
                        f"{len(wrong)} shims not retired, e.g. {wrong[0].shim}: {wrong[0].why}"
                    )
                return elapsed

            samples = interleaved(
                {
                    "air-gapped": lambda: decide(dead, root / "mirrors"),
                    "online": lambda: decide(api.url, None),
                },
                repeats=1 if quick() else 3,
            )
        offline, online = median(samples["air-gapped"]), median(samples["online"])
        return [
            row(
                "verdicts.air-gapped-100",
                offline,
                "<= 1 s",
                "s",
                offline <= 1.0,
                f"{SHIMS} shims, {REPOS} mirrors, code host unreachable: every shim decided from "
                f"the mirrors "
                f"(median of {len(samples['air-gapped'])})",
            ),
            row(
                "verdicts.air-gapped-vs-online",
                offline / online,
                "report",
                "x",
                True,
                f"mirrors without the code host {offline:.2f} s vs the code host without mirrors "
                f"{online:.2f} s",
            ),
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    for item in run():
        print(item)
