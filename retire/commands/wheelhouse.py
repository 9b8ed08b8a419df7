"""``patchlane wheelhouse``: carry a lane to a host with no network (gather here, join there)."""

from __future__ import annotations

import argparse
import hashlib
import re
from pathlib import Path

from retire.commands.base import Command, ExitCode, say, shown
from retire.core.errors import InputError
from retire.core.project import Project

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "kib": 2**10,
    "m": 10**6,
    "mb": 10**6,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 2**30,
}


def byte_size(text: str) -> int:
    """argparse type: ``60M``, ``64MiB``, ``1G``, ``500000``."""
    found = _SIZE.fullmatch(text.strip())
    if not found or float(found.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}; write it like 60M or 64MiB")
    return int(float(found.group(1)) * _UNITS[(found.group(2) or "").lower()])


def add_arguments(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser(
        "gather", help="download every file LANE's lock needs (hash-checked) into a folder"
    )
    a.add_argument("lane", metavar="LANE", help="the lane whose lock names the files")
    a.add_argument("--out", type=Path, help="folder (default: .patchlane/wheelhouse/LANE)")
    a.add_argument(
        "--part-size",
        type=byte_size,
        metavar="SIZE",
        help="split into part-NNN folders of at most SIZE (60M, 64MiB); larger files are chunked",
    )
    a.add_argument(
        "--base",
        type=Path,
        metavar="FILE",
        help="the target host's packages (`pip list --format json`): leave out what it already has",
    )
    a = actions.add_parser(
        "join", help="reassemble parts into one wheelhouse, verifying every hash"
    )
    a.add_argument("parts", nargs="+", type=Path, metavar="PART", help="the part-NNN folders")
    a.add_argument("--out", type=Path, required=True, help="the joined wheelhouse")


def run(project: Project, args: argparse.Namespace) -> int:
    # deferred: `--help` loads none of these (start-up time; the runtime-only install lacks them)
    from retire.locks import locking, wheelhouse

    if args.action == "join":
        # inside the project, never through a link on the way
        out, within = project.output(args.out.absolute())
        house = wheelhouse.join(args.parts, out, within=within)
        say(
            f"{shown(args.out)}: {len(house.artifacts)} file(s) of lane {house.lane}, every sha256 "
            f"checked"
        )
        return ExitCode.OK
    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.lanes import lanefile

    # deferred: `patchlane --help` does not load it, and start-up time counts
    from retire.probes.http import make_client

    [lane] = lanefile.select(lanefile.project_lanes(project), [args.lane])
    state = locking.lock_state(lane, project.locks_dir)
    if not state.current:
        raise InputError(
            locking.lock_path(project.locks_dir, lane.name),
            None,
            state.summary,
            f"run `nox -s lock -- {lane.name}` first",
        )
    lock_file = locking.lock_path(project.locks_dir, lane.name)
    data = lock_file.read_bytes()
    base = wheelhouse.read_base(args.base) if args.base else None
    lock = locking.read_lock(lock_file) or {}
    house = wheelhouse.plan(lane.name, lock, hashlib.sha256(data).hexdigest(), base=base)
    # revisions build on the host: carry their build requirements' wheels too
    if house.from_mirrors:
        # deferred: `patchlane --help` does not load it, and start-up time counts
        from retire.locks.buildreqs import with_build_requirements
        from retire.mirrors.config import project_mirrors

        house = with_build_requirements(house, lane, lock, project_mirrors(project))
    out, within = project.output(
        args.out.absolute() if args.out else Path(".patchlane", "wheelhouse", lane.name)
    )
    size = sum(a.size or 0 for a in house.artifacts)
    say(
        f"wheelhouse for lane {lane.name}: {len(house.artifacts)} file(s), {size / 1e6:.1f} MB"
        + (
            f"; {len(house.skipped)} package(s) the base already has left out"
            if house.skipped
            else ""
        )
    )
    if house.from_mirrors:
        build = [a.filename for a in house.artifacts if a.kind == "build"]
        say(
            f"  {', '.join(house.from_mirrors)}: from a git revision, not gathered — carry the "
            f"lane's mirror too "
            f"(docs/offline.md); {len(build)} wheel(s) that build it gathered"
        )
    with make_client(timeout=60.0) as client:
        wheelhouse.gather(
            house,
            out,
            within=within,
            client=client,
            part_size=args.part_size,
            progress=lambda line: say(f"  {line}"),
        )
    say(
        f"wrote {shown(out)} — on the host: `patchlane wheelhouse join` (parts), then "
        f"`patchlane run {lane.name} --wheelhouse DIR`"
    )
    return ExitCode.OK


COMMAND = Command(
    "wheelhouse",
    "carry a lane to an offline host: gather its lock's files here, join them there",
    add_arguments,
    run,
    "Gather every wheel and sdist a lane's lock needs (checked against the lock's sha256) into a "
    "folder, "
    "optionally in parts of a bounded size; join the parts on the offline host and build the lane "
    "from "
    "them with `patchlane run LANE --wheelhouse DIR`. docs/offline.md has the whole path.",
)
