"""Wheelhouses: every file a lane's lock needs, gathered into a folder an offline host can install
from.

GPU clusters often have no network at all. ``patchlane wheelhouse gather LANE`` downloads the
wheels (or, where the lock has none, the sdists) the lane's lock names — each checked against the
lock's sha256 — into a folder, optionally in parts of a bounded size for transports that limit
what one transfer carries (a file larger than a part is split into chunks). ``wheelhouse.json``
records every file, its hash, size and part, and the lock it was made from. On the host,
``patchlane wheelhouse join`` reassembles the parts (verifying every hash) and
``patchlane run LANE --wheelhouse DIR`` builds the lane from the folder with no index.

For an overlay lane (a GPU image that already carries torch, Triton, the CUDA libraries), pass
the base's packages (``--base FILE``: ``pip list --format json`` run on the host): what the base
already has at the locked release is left out, as an overlay build would leave it out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion

from retire.core.atomic import atomic_stream, atomic_write, make_folder
from retire.core.errors import InputError, PatchlaneError
from retire.core.project import contained
from retire.locks.overlay import overlay_lock
from shims.filereading import read_text
from shims.tomlreader import Table, loads_json

__all__ = [
    "MANIFEST_NAME",
    "Artifact",
    "Wheelhouse",
    "gather",
    "join",
    "plan",
    "read_base",
    "requirements",
]

MANIFEST_NAME = "wheelhouse.json"
FORMAT = 1
_CHUNK = 1 << 20
_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.(whl|tar\.gz|zip|tar\.bz2)")
# a file name's limit is 255 bytes, and a chunk adds ".partNNN"
_MAX_NAME = 240
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: wheelhouse.json lists every file of a lock: a few hundred entries, well under a MiB each
MAX_MANIFEST_BYTES = 64 << 20
_MAX_PARTS = 100_000
_REGATHER = "gather the wheelhouse again (`patchlane wheelhouse gather LANE`)"
_HOUSE_KEYS = ("lane", "lock_sha256", "artifacts", "skipped", "parts", "version", "from_mirrors")
_ARTIFACT_KEYS = (
    "package",
    "version",
    "filename",
    "url",
    "sha256",
    "size",
    "kind",
    "part",
    "chunks",
)


@dataclass(frozen=True)
class Artifact:
    """One file of the wheelhouse."""

    # canonical name
    package: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int | None = None
    # wheel | sdist | build (a wheel that builds a lane revision, found by --find-links)
    kind: str = "wheel"
    # which part folder holds it (0: unsplit wheelhouse)
    part: int = 0
    # > 0: stored as <filename>.partNNN pieces across parts
    chunks: int = 0


@dataclass(frozen=True)
class Wheelhouse:
    lane: str
    lock_sha256: str
    artifacts: tuple[Artifact, ...]
    # packages the base carries (overlay)
    skipped: tuple[str, ...] = ()
    parts: int = 0
    version: int = FORMAT
    # packages the lock takes from a git revision: carried as the mirror
    from_mirrors: tuple[str, ...] = ()

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, indent=1) + "\n"

    @classmethod
    def load(cls, folder: Path) -> Wheelhouse:
        """The wheelhouse described by ``folder/wheelhouse.json``; every entry is checked as input
        (a carried file can be edited on the way): one :class:`InputError` naming the file and
        the entry otherwise."""
        path = folder / MANIFEST_NAME
        text = read_text(path, _shown(path), missing_ok=True, max_bytes=MAX_MANIFEST_BYTES)
        if text is None:
            raise InputError(
                _shown(path),
                None,
                "no wheelhouse here",
                "run `patchlane wheelhouse gather LANE --out DIR` "
                "(and `patchlane wheelhouse join` for parts)",
            )
        return _from_document(loads_json(text, _shown(path), fix=_REGATHER).table(fix=_REGATHER))


def _from_document(doc: Table) -> Wheelhouse:
    """A :class:`Wheelhouse` from the JSON object ``gather`` wrote, each field checked."""
    doc.check_keys(_HOUSE_KEYS, fix=_REGATHER)
    return Wheelhouse(
        doc.need("lane", fix=_REGATHER).string(fix=_REGATHER),
        doc.need("lock_sha256", fix=_REGATHER).string(fix=_REGATHER),
        tuple(_artifact(entry) for entry in doc.need("artifacts").tables(fix=_REGATHER)),
        tuple(doc.get("skipped", []).strings(fix=_REGATHER)),
        int(doc.get("parts", 0).number(integer=True, minimum=0, maximum=_MAX_PARTS, fix=_REGATHER)),
        int(doc.get("version", 0).number(integer=True, minimum=0, fix=_REGATHER)),
        tuple(doc.get("from_mirrors", []).strings(fix=_REGATHER)),
    )


def _artifact(entry: Table) -> Artifact:
    """One ``artifacts[i]`` entry; its file name must be one ``gather`` writes (never a path)."""
    entry.check_keys(_ARTIFACT_KEYS, fix=_REGATHER)
    filename = entry.need("filename", fix=_REGATHER).string(fix=_REGATHER)
    if not carried_name(filename):
        raise entry.error(
            "filename",
            f"{filename[:100]!r} is not a wheel or sdist file name",
            "gather the wheelhouse again; a carried file name is never a path",
        )
    digest = entry.need("sha256", fix=_REGATHER).string(fix=_REGATHER)
    if not _SHA256.fullmatch(digest):
        raise entry.error("sha256", "not a sha256 (64 lowercase hex digits)", _REGATHER)
    size = entry.get("size")
    return Artifact(
        entry.need("package", fix=_REGATHER).string(fix=_REGATHER),
        entry.need("version", fix=_REGATHER).string(fix=_REGATHER, empty_ok=True),
        filename,
        entry.need("url", fix=_REGATHER).string(fix=_REGATHER, empty_ok=True),
        digest,
        None
        if size is None or size.raw is None
        else int(size.number(integer=True, minimum=0, fix=_REGATHER)),
        entry.choice("kind", ("wheel", "sdist", "build"), "wheel"),
        int(entry.get("part", 0).number(integer=True, minimum=0, maximum=_MAX_PARTS)),
        int(entry.get("chunks", 0).number(integer=True, minimum=0, maximum=_MAX_PARTS)),
    )


def carried_name(filename: str) -> bool:
    """Whether ``filename`` is a file name ``gather`` writes: a wheel's or an sdist's name as
    ``packaging.utils`` parses it, in plain characters (never a path, never hidden)."""
    if not _FILENAME.fullmatch(filename) or len(filename) > _MAX_NAME:
        return False
    try:
        if filename.endswith(".whl"):
            parse_wheel_filename(filename)
        else:
            # a legacy .tar.bz2 sdist is named as a .tar.gz one is
            parse_sdist_filename(re.sub(r"\.tar\.bz2$", ".tar.gz", filename))
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return False
    return True


def _shown(path: Path) -> str:
    """A path as errors name it: relative to the working folder when inside it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    # outside it, or no working folder any more
    except (ValueError, OSError):
        return str(path)


def read_base(path: Path) -> dict[str, str]:
    """A base interpreter's packages from ``pip list --format json`` (or ``{name: version}``)."""
    fix = "write it on the host with `python -m pip list --format json > base.json`"
    text = read_text(path, _shown(path), max_bytes=MAX_MANIFEST_BYTES) or ""
    data = loads_json(text, _shown(path), fix=fix).raw
    pairs: Iterable[tuple[object, object]]
    if isinstance(data, dict):
        pairs = data.items()
    elif isinstance(data, list) and all(
        isinstance(d, dict) and "name" in d and "version" in d for d in data
    ):
        pairs = ((d["name"], d["version"]) for d in data)
    else:
        raise InputError(
            path,
            None,
            "expected pip's JSON list of {name, version} (or a {name: version} object)",
            "write it with `python -m pip list --format json`",
        )
    return {canonicalize_name(str(name)): str(version) for name, version in pairs}


def _pick(package: Mapping) -> tuple[str, Mapping] | None:
    """The one file to carry: the lock's wheel (it was locked for the lane's target), else its
    sdist."""
    wheels = package.get("wheels") or []
    if wheels:
        return "wheel", wheels[0]
    sdist = package.get("sdist")
    return ("sdist", sdist) if sdist else None


def plan(
    lane_name: str, lock: Mapping, lock_sha256: str, *, base: Mapping[str, str] | None = None
) -> Wheelhouse:
    """Which files the lock needs (pure). Raises InputError for a lock entry with nothing to
    carry."""
    packages = list(lock.get("packages", []))
    skipped: list[str] = []
    if base is not None:
        cut, kept = overlay_lock(dict(lock), dict(base))
        keep = {canonicalize_name(name) for name in kept}
        skipped = sorted(
            canonicalize_name(p["name"])
            for p in packages
            if canonicalize_name(p["name"]) not in keep
        )
        packages = cut["packages"]
    artifacts, from_mirrors = [], []
    for package in packages:
        name = canonicalize_name(str(package.get("name", "")))
        # a lane revision: the host installs it from its copy of the mirror
        if "vcs" in package:
            from_mirrors.append(name)
            continue
        picked = _pick(package)
        if picked is None:
            kind = "a local path" if ("directory" in package or "archive" in package) else "no file"
            raise InputError(
                None,
                f"packages.{name}",
                f"the lock gives {kind} for {name}, not a wheel or sdist",
                "lock it from an index or a lane revision (see docs/offline.md)",
            )
        kind, entry = picked
        url = str(entry.get("url") or "")
        filename = _entry_name(entry)
        digest = (entry.get("hashes") or {}).get("sha256")
        if not url or not digest or not carried_name(filename):
            raise InputError(
                None,
                f"packages.{name}",
                "the lock's file has no URL, sha256 or usable file name",
                "re-lock the lane",
            )
        artifacts.append(
            Artifact(
                name,
                str(package.get("version", "")),
                filename,
                url,
                str(digest),
                entry.get("size"),
                kind,
            )
        )
    return Wheelhouse(
        lane_name, lock_sha256, tuple(artifacts), tuple(skipped), from_mirrors=tuple(from_mirrors)
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(client: httpx.Client, artifact: Artifact, target: Path, within: Path) -> None:
    """Stream one file to ``target`` (atomically, never through a link below ``within``),
    checking its sha256; an existing good file is kept."""
    if target.is_file() and _sha256(target) == artifact.sha256:
        return
    try:
        atomic_stream(target, _checked_body(client, artifact), within=within)
    except (PatchlaneError, InputError):
        raise
    except Exception as exc:
        raise PatchlaneError(
            f"{artifact.filename}: download failed: {type(exc).__name__}: {exc}"
        ) from None


def _checked_body(client: httpx.Client, artifact: Artifact) -> Iterator[bytes]:
    """The body of ``artifact``'s URL, block by block; raises (so nothing is kept) on an HTTP
    error or when its sha256 is not the lock's."""
    digest = hashlib.sha256()
    with client.stream("GET", artifact.url) as response:
        if response.status_code != 200:
            raise PatchlaneError(
                f"{artifact.filename}: the index answered {response.status_code} for "
                f"{artifact.url}"
            )
        for block in response.iter_bytes(_CHUNK):
            digest.update(block)
            yield block
    if digest.hexdigest() != artifact.sha256:
        raise PatchlaneError(
            f"{artifact.filename}: sha256 {digest.hexdigest()[:16]}… is not the lock's "
            f"{artifact.sha256[:16]}…: refusing it"
        )


def _file_blocks(paths: Iterable[Path]) -> Iterator[bytes]:
    """The bytes of ``paths``, one after the other, block by block."""
    for path in paths:
        with path.open("rb") as handle:
            yield from iter(lambda: handle.read(_CHUNK), b"")


def _assign_parts(
    artifacts: Iterable[Artifact], part_size: int | None
) -> tuple[list[Artifact], int]:
    """Pack files into parts of at most ``part_size`` bytes (first fit, largest first); a file
    larger than a part is split into chunks that take whole parts of their own."""
    if not part_size:
        return list(artifacts), 0
    placed: list[Artifact] = []
    free: list[int] = []
    for artifact in sorted(artifacts, key=lambda a: -(a.size or 0)):
        size = artifact.size or 0
        if size > part_size:
            chunks = -(-size // part_size)
            first = len(free) + 1
            free += [0] * chunks
            placed.append(Artifact(**{**asdict(artifact), "part": first, "chunks": chunks}))
            continue
        slot = next((i for i, room in enumerate(free) if room >= size), None)
        if slot is None:
            free.append(part_size)
            slot = len(free) - 1
        free[slot] -= size
        placed.append(Artifact(**{**asdict(artifact), "part": slot + 1}))
    return sorted(placed, key=lambda a: (a.part, a.filename)), len(free)


def _part_dir(out: Path, part: int) -> Path:
    return out if part == 0 else out / f"part-{part:03d}"


def gather(
    house: Wheelhouse,
    out: Path,
    *,
    client: httpx.Client,
    within: Path | None = None,
    part_size: int | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> Wheelhouse:
    """Download every file of ``house`` into ``out`` (in parts when ``part_size`` is given),
    never through a link below ``within`` (the project's root, or ``out`` outside it; default
    ``out``)."""
    within = within or out
    artifacts, parts = _assign_parts(house.artifacts, part_size)
    out = make_folder(out, within=within)
    staging = make_folder(out / ".downloads", within=within)
    done = 0
    for number, artifact in enumerate(artifacts, 1):
        progress(
            f"[{number}/{len(artifacts)}] {artifact.filename} ({(artifact.size or 0) / 1e6:.1f} MB)"
        )
        placed = contained(within, _part_dir(out, artifact.part) / artifact.filename)
        if not artifact.chunks and placed.is_file() and _sha256(placed) == artifact.sha256:
            # gathered before (an interrupted or repeated gather): kept
            done += artifact.size or 0
            continue
        whole = staging / artifact.filename
        _download(client, artifact, whole, within)
        if artifact.chunks:
            with whole.open("rb") as source:
                for index in range(artifact.chunks):
                    folder = make_folder(_part_dir(out, artifact.part + index), within=within)
                    atomic_write(
                        folder / f"{artifact.filename}.part{index:03d}",
                        source.read(part_size),
                        within=within,
                    )
            whole.unlink()
        else:
            make_folder(placed.parent, within=within)
            os.replace(whole, placed)
        done += artifact.size or 0
    staging.rmdir()
    result = Wheelhouse(
        house.lane,
        house.lock_sha256,
        tuple(artifacts),
        house.skipped,
        parts,
        from_mirrors=house.from_mirrors,
    )
    for part in range(parts + 1) if parts else (0,):
        folder = _part_dir(out, part)
        # every part carries the manifest, so any one tells what the set is
        if folder.is_dir():
            atomic_write(folder / MANIFEST_NAME, result.to_json(), within=within)
    progress(
        f"{len(artifacts)} file(s), {done / 1e6:.1f} MB"
        + (f" in {parts} part(s) of ≤ {part_size / 1e6:.0f} MB" if parts and part_size else "")
    )
    return result


def join(sources: Iterable[Path], out: Path, *, within: Path | None = None) -> Wheelhouse:
    """Reassemble a wheelhouse from its part folders (or folders holding their files) into ``out``,
    verifying every file's sha256. Raises InputError naming what is missing or damaged.

    Nothing is written outside ``out``, nor through a link below ``within`` (default ``out``):
    file names come from ``wheelhouse.json``, which :meth:`Wheelhouse.load` checks."""
    within = within or out
    sources = [Path(s) for s in sources]
    manifest = next((s / MANIFEST_NAME for s in sources if (s / MANIFEST_NAME).is_file()), None)
    if manifest is None:
        raise InputError(
            sources[0] if sources else None,
            None,
            "no wheelhouse.json in the given folders",
            "pass the part folders made by `patchlane wheelhouse gather --part-size`",
        )
    house = Wheelhouse.load(manifest.parent)
    out = make_folder(out, within=within)

    def find(name: str) -> Path:
        for source in sources:
            for candidate in (source / name, *source.glob(f"part-*/{name}")):
                if candidate.is_file():
                    return candidate
        raise InputError(
            None, name, "missing from every given folder", "carry every part, then join again"
        )

    for artifact in house.artifacts:
        # a checked name, and no link there either
        target = contained(out, out / artifact.filename)
        if target.is_file() and _sha256(target) == artifact.sha256:
            continue
        if artifact.chunks:
            pieces = [find(f"{artifact.filename}.part{i:03d}") for i in range(artifact.chunks)]
            atomic_stream(target, _file_blocks(pieces), within=within)
        elif find(artifact.filename).resolve() != target.resolve():
            atomic_stream(target, _file_blocks([find(artifact.filename)]), within=within)
        if _sha256(target) != artifact.sha256:
            target.unlink()
            raise InputError(
                target, None, "sha256 does not match the lock", "carry that file (or part) again"
            )
    joined = Wheelhouse(
        house.lane,
        house.lock_sha256,
        tuple(Artifact(**{**asdict(a), "part": 0, "chunks": 0}) for a in house.artifacts),
        house.skipped,
        0,
        from_mirrors=house.from_mirrors,
    )
    atomic_write(out / MANIFEST_NAME, joined.to_json(), within=within)
    return joined


def localize(
    lock: Mapping, house: Wheelhouse, folder: Path, *, lane: str, lock_sha256: str
) -> dict:
    """The lock (a dict) with each package's files replaced by the one file ``folder`` carries
    for it, under the lock's own sha256, so uv installs from the folder alone (``--offline
    --no-index``).

    Packages taken from a git revision keep their ``vcs`` entry (they install from the local
    mirror). Raises InputError when the wheelhouse was gathered for another lane or lock, or
    lacks a file.
    """
    where = folder / MANIFEST_NAME
    _check_made_for(house, where, lane=lane, lock_sha256=lock_sha256)
    # build: found by --find-links
    carried = {a.package: a for a in house.artifacts if a.kind != "build"}
    packages = []
    for package in lock.get("packages", []):
        if "vcs" in package:
            packages.append(dict(package))
            continue
        name = canonicalize_name(str(package.get("name", "")))
        artifact = carried.get(name)
        if artifact is None:
            overlaid = name in house.skipped
            raise InputError(
                where,
                f"artifacts.{name}",
                f"{name} {package.get('version', '')} is "
                f"{'left out as the base’s' if overlaid else 'not in it'}, but this build needs it",
                "gather the wheelhouse again"
                + (
                    " with the base this host has (--base), or run with --overlay"
                    if overlaid
                    else ""
                ),
            )
        packages.append(_local_package(package, artifact, folder, where, lane))
    return {**{k: v for k, v in lock.items() if k != "tool"}, "packages": packages}


def _check_made_for(house: Wheelhouse, where: Path, *, lane: str, lock_sha256: str) -> None:
    """InputError unless ``house`` was gathered for this lane from this very lock."""
    if house.lane != lane:
        raise InputError(
            where,
            "lane",
            f"the wheelhouse was gathered for lane {house.lane!r}, not {lane!r}",
            f"gather one for {lane}: `patchlane wheelhouse gather {lane}`",
        )
    if house.lock_sha256 != lock_sha256:
        raise InputError(
            where,
            "lock_sha256",
            f"the wheelhouse was gathered from another lock of lane {lane}",
            "gather it again from the lock this host has "
            f"(`patchlane wheelhouse gather {lane}`), or carry that lock",
        )


def _local_package(
    package: Mapping, artifact: Artifact, folder: Path, where: Path, lane: str
) -> dict:
    """One lock package whose files are the one file the wheelhouse carries for it, checked
    against the lock's sha256."""
    name = artifact.package
    kind = "wheels" if artifact.kind == "wheel" else "sdist"
    entries = (package.get("wheels") or []) if kind == "wheels" else [package.get("sdist") or {}]
    locked = next((e for e in entries if _entry_name(e) == artifact.filename), None)
    digest = ((locked or {}).get("hashes") or {}).get("sha256")
    if locked is None or digest != artifact.sha256:
        raise InputError(
            where,
            f"artifacts.{name}",
            f"{artifact.filename} is not a file of the lock",
            f"gather the wheelhouse again (`patchlane wheelhouse gather {lane}`)",
        )
    path = folder / artifact.filename
    if not path.is_file():
        raise InputError(
            path,
            None,
            "missing from the wheelhouse",
            "carry every part and run `patchlane wheelhouse join PART… --out DIR`",
        )
    # uv checks again as it installs; this names the file and the fix
    if _sha256(path) != digest:
        raise InputError(
            path,
            None,
            "sha256 does not match the lock",
            "carry that file (or its part) again and join",
        )
    entry = {
        "name": artifact.filename,
        "path": str(path.resolve()),
        "hashes": {"sha256": digest},
        **({"size": locked["size"]} if "size" in locked else {}),
    }
    local = {k: v for k, v in package.items() if k not in ("wheels", "sdist")}
    local[kind] = [entry] if kind == "wheels" else entry
    return local


def _entry_name(entry: Mapping) -> str:
    return str(entry.get("name") or str(entry.get("url") or "").rsplit("/", 1)[-1].split("#", 1)[0])


def requirements(house: Wheelhouse) -> str:
    """``name==version --hash=sha256:…`` lines for ``uv pip sync --no-index --find-links``."""
    return "".join(f"{a.package}=={a.version} --hash=sha256:{a.sha256}\n" for a in house.artifacts)
