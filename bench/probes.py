"""Probing 100 shims against loopback upstreams that add 50 ms to every request.

Each shim has a version floor on its own distribution (one index request) and links its own
upstream issue (one code-host request): 200 distinct requests, nothing shared between shims.

- cold, concurrent: empty HTTP cache (goal <= 1.5 s);
- warm: the cache from the cold run, every request conditional (If-None-Match → 304), still
  paying the 50 ms per request (goal <= 0.3 s);
- warm, fresh: as warm, but the servers send ``Cache-Control: max-age`` like the real ones, so a
  run inside that window makes no request at all;
- cold, sequential: the same work one probe at a time, the baseline the ratios are taken against;
- the 100 links alone, cold, with a token (GraphQL: one batched request) side by side with the
  anonymous REST path (100 requests in flight), interleaved (goal <= 0.3 s for GraphQL).

The servers run in a child process: a real index and API run on other machines, and here their
CPU would otherwise compete with the probes for one interpreter's GIL. The warm run was CPU-bound
in httpcore's connection pool, which looks at all of its connections (and polls every idle one)
whenever a request comes or goes: with 100 connections in one pool that bookkeeping was most of
its 0.5-0.6 s (profiled, issue 37). Clients now spread their threads over several pools
(``retire.probes.client.POOLS``); the row times the warm run through one pool too, side by side.
What is left is httpx's and h11's own work, about 1 ms of CPU a request under one GIL, and two
rounds of 50 ms.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench import interleaved, median, quick, row

SHIMS = 100
LATENCY = 0.05


def _serve(root: str, connection) -> None:
    """In a child process, so the servers' CPU never competes with the probes for the GIL (a real
    index and API are on other machines): serve until the parent says stop."""
    from tests.support.codehost import CodeHost, CodeHostServer
    from tests.support.faults import FaultyIndexServer
    from tests.support.index import PackageIndex
    from tests.support.wheels import build_wheel

    index, host = PackageIndex(latency=LATENCY), CodeHost(latency=LATENCY)
    for dist in _names():
        index.add(build_wheel(Path(root), dist, "1.0"), "2026-01-01")
        index.add(build_wheel(Path(root), dist, "1.2"), "2026-04-01")
        host.add_issue("org", dist, 1, state="open", updated_at="2026-06-01")
    with FaultyIndexServer(index) as index_server, CodeHostServer(host) as api:
        connection.send((index_server.url, api.url))
        while True:
            message = connection.recv()
            if message == "stop":
                break
            # send max-age like the real services (API 60 s, index 600 s)
            if message == "fresh":
                host.max_age, index_server.max_age = 60, 600
                connection.send("ok")
            # what the code host answered since the last ask
            if message == "statuses":
                connection.send(list(host.statuses))
                host.statuses.clear()
            # nodes per GraphQL request since the last ask
            if message == "graphql":
                connection.send(list(host.graphql_nodes))
                host.graphql_nodes.clear()


@contextlib.contextmanager
def _one_pool() -> Iterator[None]:
    """Clients made meanwhile keep one connection pool (``retire.probes.client.POOLS`` = 1)."""
    from retire.probes import client

    before = client.POOLS
    client.POOLS = 1
    try:
        yield
    finally:
        client.POOLS = before


def _names() -> list[str]:
    return [f"dist{n:03d}" for n in range(SHIMS)]


def run() -> list[dict]:
    import multiprocessing

    from retire.probes.http import RetryPolicy
    from retire.verdicts.gather import GatherOptions, gather
    from tests.support.retirement import NOW, VERSION_FLOOR, Project

    root = Path(tempfile.mkdtemp(prefix="patchlane-bench-probes-"))
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=_serve, args=(str(root / "wheels"), child), daemon=True)
    server.start()
    try:
        if not parent.poll(120):
            raise RuntimeError("the loopback servers did not start within 120 s")
        index_url, api_url = parent.recv()
        project = Project(root / "project")
        for n, dist in enumerate(_names()):
            project.shim(
                f"shim{n:03d}",
                VERSION_FLOOR,
                links=(("report", f"https://github.com/org/{dist}/issues/1"),),
                distribution=dist,
            )
        project.lane(
            "bench", [f"shim{n:03d}" for n in range(SHIMS)], index_url=index_url, packages=_names()
        )
        manifests, lanes = project.manifests(), project.lanes()
        policy = RetryPolicy(attempts=1, timeout=10.0)
        repeats = 1 if quick() else 3

        def probe(cache: Path | None, workers: int) -> float:
            started = time.perf_counter()
            verdicts = gather(
                manifests,
                lanes,
                project.root / "locks",
                project.validation,
                GatherOptions(
                    api_base=api_url,
                    token=None,
                    cache_dir=cache,
                    policy=policy,
                    workers=workers,
                    clock=lambda: NOW,
                    # the probes are measured here; trial re-locks have their own row
                    resolve=False,
                ),
            )
            elapsed = time.perf_counter() - started
            failed = [v for v in verdicts if v.failures]
            if failed:
                raise RuntimeError(f"{len(failed)} shims had probe failures, e.g. {failed[0].why}")
            return elapsed

        def statuses() -> list[int]:
            parent.send("statuses")
            return parent.recv()

        cold, warm, one_pool, cpu, answers = [], [], [], [], []
        for attempt in range(repeats):
            cache = root / f"cache{attempt}"
            cold.append(probe(cache, 100))
            statuses()
            began = time.process_time()
            warm.append(probe(cache, 100))
            cpu.append(time.process_time() - began)
            answers = statuses()
            # the same warm run through one connection pool, as before issue 37
            with _one_pool():
                one_pool.append(probe(cache, 100))
            statuses()
        sequential = probe(None, 1)
        parent.send("fresh")
        parent.recv()
        fresh = []
        for attempt in range(repeats):
            cache = root / f"fresh{attempt}"
            probe(cache, 100)
            fresh.append(probe(cache, 100))
        links_rows = _links(api_url, parent, repeats=3 if quick() else 7)
        cold_s, warm_s = median(cold), median(warm)
        not_modified = answers.count(304)
        requests = 2 * SHIMS
        return [
            row(
                "probes.cold-concurrent",
                cold_s,
                "<= 1.5 s",
                "s",
                cold_s <= 1.5,
                f"{SHIMS} shims, {requests} requests at {LATENCY * 1000:.0f} ms each, 100 in "
                f"flight (median of {repeats})",
            ),
            row(
                "probes.warm-etag",
                warm_s,
                "<= 0.3 s",
                "s",
                warm_s <= 0.3,
                f"every request conditional: {not_modified}/{SHIMS} code-host answers were 304 "
                f"(median of {repeats}); {median(cpu):.2f} CPU-s of it in this process (the GIL: "
                f"httpx and h11 take about 1 ms a request); through one connection pool, as "
                f"before, {median(one_pool):.2f} s in the same run",
            ),
            row(
                "probes.warm-fresh",
                median(fresh),
                "<= 0.3 s",
                "s",
                median(fresh) <= 0.3,
                "servers send Cache-Control max-age like the real ones (API 60 s, index 600 s): a "
                "warm run "
                f"inside it makes no request (median of {repeats})",
            ),
            row(
                "probes.sequential-vs-cold",
                sequential / cold_s,
                ">= 5x",
                "x",
                sequential / cold_s >= 5,
                f"sequential cold {sequential:.2f} s vs concurrent cold {cold_s:.2f} s",
            ),
            row(
                "probes.sequential-vs-warm",
                sequential / warm_s,
                ">= 20x",
                "x",
                sequential / warm_s >= 20,
                f"sequential cold {sequential:.2f} s vs warm {warm_s:.2f} s",
            ),
            *links_rows,
        ]
    finally:
        parent.send("stop")
        server.join(10)
        if server.is_alive():
            server.terminate()
        shutil.rmtree(root, ignore_errors=True)


def _links(api_url: str, parent, *, repeats: int) -> list[dict]:
    """The 100 shims' links alone, cold (a new client, no cache): GraphQL with a token vs REST."""
    from retire.probes.codehost import probe_links
    from retire.probes.http import Fetcher, RetryPolicy, make_client

    urls = [f"https://github.com/org/{dist}/issues/1" for dist in _names()]
    policy = RetryPolicy(attempts=1, timeout=10.0)

    def probe(token: str | None) -> float:
        with make_client(timeout=policy.timeout) as client:
            started = time.perf_counter()
            found = probe_links(
                Fetcher(client, policy=policy, secrets=(token,) if token else ()),
                urls,
                api_base=api_url,
                token=token,
            )
            elapsed = time.perf_counter() - started
        failed = [state for state in found.values() if not hasattr(state, "state")]
        if failed:
            raise RuntimeError(f"{len(failed)} links failed, e.g. {failed[0]}")
        return elapsed

    samples = interleaved(
        {"graphql": lambda: probe("ghp_benchtoken"), "rest": lambda: probe(None)}, repeats
    )
    parent.send("graphql")
    nodes = parent.recv()
    graphql_s, rest_s = median(samples["graphql"]), median(samples["rest"])
    per_run = len(nodes) // repeats if repeats else 0
    return [
        row(
            "probes.links-graphql-cold",
            graphql_s,
            "<= 0.3 s",
            "s",
            graphql_s <= 0.3,
            f"{SHIMS} links with a token, {per_run} GraphQL request(s) of <= 100 nodes at "
            f"{LATENCY * 1000:.0f} ms "
            f"(median of {repeats}, interleaved with REST)",
        ),
        row(
            "probes.links-rest-vs-graphql",
            rest_s / graphql_s,
            ">= 2x",
            "x",
            rest_s / graphql_s >= 2,
            f"anonymous REST cold {rest_s:.3f} s ({SHIMS} requests, 100 in flight) vs GraphQL cold "
            f"{graphql_s:.3f} s",
        ),
    ]


if __name__ == "__main__":
    for item in run():
        print(item)
