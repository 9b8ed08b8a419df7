"""Fuzzing every reader of user files: the only exception is the one input-error type, in one line.

Generated inputs — random TOML documents, valid documents with values swapped for odd ones
(NaN, infinities, huge integers, dates out of range, long names, wrong types), edits of valid
text, random bytes, deep nesting — go through the lane/matrix reader (and, apart, fed matrices
only), the shim manifest reader and the pack readers (``pack.toml``, the deny-list, the pack
state). Each must either accept the input or raise :class:`shims.errors.InputError` whose message
is one line starting with the file. ``tests/test_fuzz_records.py`` fuzzes the validation manifest
and the run summaries.

About 5,000 inputs in about ten seconds; ``PATCHLANE_FUZZ_EXAMPLES=2000`` fuzzes longer (each
example
is five inputs).
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import os
import random
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retire.lanes.lanefile import load_lanes
from retire.packs.store import load_deny, load_pack, load_state
from retire.packs.waves import Approval, Filing, FilingState, dumps_state
from shims import tomlreader
from shims.errors import InputError
from shims.manifest import load_manifest
from tests.support.packtree import DENY, github_manifest, pack_toml
from tests.support.shimtree import TOY_PATCH, manifest_text, write_shim

REPO = Path(__file__).resolve().parents[1]
#: Deny-list patterns such as "[[" compile with a FutureWarning; that is not what is tested here.
# Thousands of generated documents (about 14 s in all): the full suite's, not the fast tier's.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning")]
FUZZ = settings(
    max_examples=int(os.environ.get("PATCHLANE_FUZZ_EXAMPLES", "60")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------------------------------------
# The readers, each fed one file of a throwaway project


class FuzzProject:
    """``root/lanes/fuzz.toml``, ``root/shims/toy_add/{manifest,pack}.toml``, ``root/packs/*``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "lanes").mkdir(parents=True, exist_ok=True)
        (root / "packs").mkdir(exist_ok=True)
        self.shim = write_shim(
            root / "shims", "toy_add", manifest=github_manifest("toy_add"), patch=TOY_PATCH
        )
        self.good_manifest = (self.shim / "manifest.toml").read_bytes()
        (self.shim / "pack.toml").write_text(pack_toml())

    def write(self, path: Path, data: bytes | str) -> None:
        path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)

    def lanes(self, data: bytes | str) -> None:
        self.write(self.root / "lanes" / "fuzz.toml", data)
        expect_input_error("lanes/fuzz.toml", self._lanes)

    def _lanes(self) -> None:
        for lane in load_lanes(
            self.root / "lanes", root=self.root, known_shims={"toy_add", "a_shim"}
        ):
            # a lane that loads can be locked
            assert lane.digest.startswith("sha256:")
            json.dumps(lane.lock_inputs())

    # the same reader, fed matrix seeds only: mutations land in axes, excludes, includes
    matrix = lanes

    def manifest(self, data: bytes | str) -> None:
        path = self.shim / "manifest.toml"
        self.write(path, data)
        try:
            expect_input_error(str(path), lambda: load_manifest(path))
        finally:
            path.write_bytes(self.good_manifest)

    def pack(self, data: bytes | str) -> None:
        self.write(self.shim / "pack.toml", data)
        expect_input_error(
            "shims/toy_add/pack.toml", lambda: load_pack(self.root, "toy_add").pack.body
        )

    def deny(self, data: bytes | str) -> None:
        self.write(self.root / "packs" / "deny.toml", data)
        expect_input_error("packs/deny.toml", lambda: load_deny(self.root))

    def state(self, data: bytes | str) -> None:
        self.write(self.root / "packs" / "state.json", data)
        expect_input_error("packs/state.json", lambda: load_state(self.root))


def expect_input_error(name: str, read) -> None:
    """``read()`` succeeds or raises InputError in one line naming ``name``; nothing else
    escapes."""
    try:
        read()
    except InputError as exc:
        message = str(exc)
        assert message.startswith(name), message
        assert "\n" not in message and len(message.splitlines()) == 1, message
        assert len(message) < 20_000


@pytest.fixture(scope="module")
def fuzz_project(tmp_path_factory) -> FuzzProject:
    return FuzzProject(tmp_path_factory.mktemp("fuzz"))


# ---------------------------------------------------------------------------------------------
# Seeds: valid documents of every kind


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


LANE_SEEDS = [_text(p) for p in sorted((REPO / "lanes").glob("*.toml"))] + [
    (
        '[lane]\npython = "3.12"\nrequirements = ["torchlike==2.1.0"]\nexclude-newer = '
        '2026-11-01\nshims = ["toy_add"]\n'
        '[lane.indexes.nightly]\nurl = "http://127.0.0.1:9/simple"\n[lane.sources]\ntorchlike = '
        '"nightly"\n'
        '[lane.env]\nA = "1"\n[[lane.static-metadata]]\nname = "cudaext"\nversion = '
        '"1.0.0"\nrequires-dist = ["helper"]\n'
    ),
    (
        '[matrix]\nname = "t{torch}-h{helper}"\n[matrix.base]\npython = "3.12"\nrequirements = '
        '["kernels"]\n'
        '[matrix.axes.torch."2.1"]\nrequirements = '
        '["torchlike==2.1.0"]\n[matrix.axes.torch.nightly]\n'
        'requirements = ["torchlike>=2.3.0.dev0"]\nprerelease = "allow"\n[matrix.axes.helper."1"]\n'
        '[matrix.axes.helper."2"]\n[[matrix.exclude]]\ntorch = '
        '"nightly"\n[[matrix.include]]\ntorch = '
        '"nightly"\n'
        'helper = "2"\nlane = { description = "the nightly cell" }\n'
    ),
]
LANE_SEEDS.append(
    '[lane]\npython = "3.12"\nrequirements = ["torchlike"]\ngpus = { count = 2, '
    'min-compute-capability = "9.0", min-memory-gib = 80, name = "h200", share = true }\n'
)
MATRIX_SEEDS = [seed for seed in LANE_SEEDS if "[matrix]" in seed] + [
    (
        '[matrix]\nname = "c{a}"\n[matrix.base]\npython = "3.12"\nrequirements = '
        '["x"]\n[matrix.axes.a."1"]\n'
        '[matrix.axes.a."2"]\n[[matrix.exclude]]\na = "1"\n'
    ),
]
MANIFEST_SEEDS = [
    github_manifest("toy_add"),
    manifest_text("toy_add"),
    manifest_text("toy_add", fix_class="env-constraint", env={"TL_X": "1"}),
]
MANIFEST_SEEDS.append(
    manifest_text("toy_add").replace(
        "needs-cuda = false", 'gpus = { count = 2, min-memory-gib = 80, name = "h100" }'
    )
)
MANIFEST_SEEDS += [
    _text(p).replace(f'id = "{p.parent.name}"', 'id = "toy_add"')
    for p in sorted((REPO / "shims").glob("*/manifest.toml"))
]
PACK_SEEDS = [
    pack_toml(),
    pack_toml(state="overlap", thread="https://github.com/toyorg/toylib/pull/2"),
]
PACK_SEEDS += [_text(p) for p in sorted((REPO / "shims").glob("*/pack.toml"))]
DENY_SEEDS = [DENY, _text(REPO / "packs" / "deny.toml")]
STATE_SEEDS = [
    dumps_state(
        FilingState()
        .approve("toy_add", Approval("Ann", "2026-11-20T10:00:00Z", "ab" * 32))
        .file("toy_add", Filing("https://github.com/o/r/issues/1", "2026-11-21T10:00:00Z", "o/r"))
    )
]


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    return set()


#: Every key the seeds use, so random documents reach past the unknown-key checks.
KNOWN_KEYS = sorted(
    set().union(
        *(
            _keys(tomllib.loads(seed))
            for seed in LANE_SEEDS + MANIFEST_SEEDS + PACK_SEEDS + DENY_SEEDS
        )
    )
)


# ---------------------------------------------------------------------------------------------
# Odd values, and a TOML writer that can also write what Python values cannot hold


class Raw(str):
    """TOML text written as is (values no Python object round-trips: year 0, 5000-digit ints)."""


RAW = [
    Raw("0000-01-01"),
    Raw("9999-12-31T23:59:59-23:59"),
    Raw("0001-01-01T00:00:00+01:00"),
    Raw("1" * 5000),
    Raw("1e400"),
    Raw("-inf"),
    Raw("nan"),
    Raw("-nan"),
    Raw("[" * 3000 + "]" * 3000),
    Raw("{a = " * 1500 + "1" + "}" * 1500),
    Raw("9223372036854775808"),
    Raw("0x7fffffffffffffffff"),
    Raw("23:59:60"),
    Raw("1979-05-27T00:32:00.999999999-07:00"),
]
ODD_STRINGS = [
    "",
    " ",
    "\t",
    "3.12",
    "3",
    "torch==2.9.1",
    "torch=2.9",
    ">=1.0",
    "=>1",
    ">=1,<2,",
    "==1.*",
    "https://github.com/toyorg/toylib/pull/2",
    "https://[",
    "http://:99999",
    "http://",
    "file:///x",
    "ftp://x",
    "toy_add",
    "a_shim",
    "../x.py",
    "/etc/passwd",
    "C:x",
    "\\x",
    "shape",
    "manifest",
    "tomlreader",
    "9.0",
    "sm90",
    "2026-13-45",
    "2026-11-01T12:00:00Z",
    "9999-12-31T23:59:59-23:59",
    "0001-01-01T00:00:00+01:00",
    "a\nb",
    "\u2028",
    "\x00",
    "\x7f",
    "x" * 3000,
    "torch==" + "1" * 5000,
    ">=" + "9" * 5000,
    "torch===x",
    "NVIDIA/Megatron-LM",
    "overlap",
    "already-fixed",
    "new-report",
    "source-patch",
    "env-constraint",
    "version-floor",
    "reproducer-clean",
    "(unclosed",
    "(" * 600 + ")" * 600,
    "a{99999999999}",
    "x{2,1}",
    "{nope}",
    "{torch}",
    "nightly",
    "allow",
    "UPPER",
    "lower",
    "0123456789abcdef0",
    "python reproduce.py",
    "toylib==1.0",
    "o/r@0123456",
]
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
scalars = st.one_of(
    text,
    st.sampled_from(ODD_STRINGS),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63, max_value=10**100),
    st.integers(max_value=0),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1.0]),
    st.dates(),
    st.times(),
    st.datetimes(
        timezones=st.sampled_from(
            [
                None,
                _dt.UTC,
                _dt.timezone(_dt.timedelta(hours=-23, minutes=-59)),
                _dt.timezone(_dt.timedelta(hours=14)),
            ]
        )
    ),
    st.sampled_from(RAW),
)
keys = st.one_of(st.sampled_from(KNOWN_KEYS), text)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=4,
)


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def emit(value: object) -> str:
    """One TOML value (inline tables and arrays all the way down)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(emit(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string(k)} = {emit(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def document(doc: dict) -> str:
    return "".join(f"{_string(key)} = {emit(value)}\n" for key, value in doc.items())


def mutated(rnd: random.Random, seed: dict, pool: list) -> dict:
    """``seed`` with one to three values replaced (from ``pool``), keys deleted or added,
    anywhere."""
    doc = copy.deepcopy(seed)

    def drawn() -> object:
        # a copy: a pool value put in twice (or into itself) would make the document a cycle,
        # and a later mutation would change the pool for the examples after it
        return copy.deepcopy(rnd.choice(pool))

    for _ in range(rnd.choice([1, 1, 1, 2, 3])):
        container: dict | list = doc
        # walk down to a random container
        while True:
            slots = list(container) if isinstance(container, dict) else list(range(len(container)))
            if not slots:
                break
            child = container[rnd.choice(slots)]
            if not isinstance(child, (dict, list)) or not child or rnd.random() < 0.4:
                break
            container = child
        action = rnd.choice(["replace", "replace", "delete", "add"]) if slots else "add"
        if action == "add" and isinstance(container, dict):
            container[rnd.choice(KEY_POOL)] = drawn()
        elif action == "add":
            container.append(drawn())
        else:
            slot = rnd.choice(slots)
            if action == "delete":
                del container[slot]
            else:
                container[slot] = drawn()
    return doc


SYNTAX = ["[", "]", "{", "}", "=", '"', "\n", "'" * 3, "\\", "#", "[[", "]]", ".", ","]


def edited(rnd: random.Random, text: str, pieces: list[str]) -> str:
    """``text`` with a few characters inserted, deleted or the end cut off."""
    for _ in range(rnd.randint(1, 3)):
        at = rnd.randint(0, len(text))
        action = rnd.choice(["insert", "insert", "delete", "cut"])
        if action == "insert":
            text = text[:at] + rnd.choice(pieces + SYNTAX) + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + rnd.randint(1, 20) :]
        else:
            text = text[:at]
    return text


KEY_POOL = [*KNOWN_KEYS, "", "x" * 500, "a.b", "pythn", "ownr", "categroy", "\u2028", "\n"]
#: Each example draws a few odd values with Hypothesis, then builds several inputs from them and
#: the fixed odd values with a seeded Random: Hypothesis draws are slow, and this keeps a few
#: thousand inputs within seconds.
pools = st.lists(values, min_size=1, max_size=6).map(lambda drawn: drawn + RAW + ODD_STRINGS)
chunks = st.lists(text | st.binary(max_size=40), min_size=1, max_size=6)
INPUTS_PER_EXAMPLE = 5


# ---------------------------------------------------------------------------------------------
# The fuzz tests

READERS = {
    "lanes": (FuzzProject.lanes, LANE_SEEDS),
    "matrix": (FuzzProject.matrix, MATRIX_SEEDS),
    "manifest": (FuzzProject.manifest, MANIFEST_SEEDS),
    "pack": (FuzzProject.pack, PACK_SEEDS),
    "deny": (FuzzProject.deny, DENY_SEEDS),
}
PARSED = {reader: [tomllib.loads(seed) for seed in seeds] for reader, (_, seeds) in READERS.items()}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_the_seeds_are_valid(fuzz_project, reader):
    feed = READERS[reader][0]
    for seed in PARSED[reader]:
        # the writer round-trips them
        feed(fuzz_project, document(seed))


@pytest.mark.parametrize("start", ["valid", "empty"])
@pytest.mark.parametrize("reader", sorted(READERS))
@FUZZ
@given(pool=pools, rnd=st.randoms(use_true_random=True))
def test_documents_with_odd_values(fuzz_project, reader, start, pool, rnd):
    """Valid documents with values swapped, keys dropped or added; or documents built from
    nothing."""
    feed = READERS[reader][0]
    for _ in range(INPUTS_PER_EXAMPLE):
        feed(
            fuzz_project,
            document(mutated(rnd, rnd.choice(PARSED[reader]) if start == "valid" else {}, pool)),
        )


@pytest.mark.parametrize("reader", sorted(READERS))
@FUZZ
@given(parts=chunks, rnd=st.randoms(use_true_random=True))
def test_edited_text_and_random_bytes(fuzz_project, reader, parts, rnd):
    feed, seeds = READERS[reader]
    pieces = [part for part in parts if isinstance(part, str)] or ["x"]
    raw = [
        part if isinstance(part, bytes) else part.encode("utf-8", "surrogatepass") for part in parts
    ]
    for _ in range(INPUTS_PER_EXAMPLE):
        choice = rnd.choice(["edit", "edit", "bytes", "append"])
        if choice == "edit":
            feed(fuzz_project, edited(rnd, rnd.choice(seeds), pieces))
        elif choice == "bytes":
            feed(fuzz_project, b"".join(rnd.sample(raw, len(raw))))
        else:
            feed(fuzz_project, rnd.choice(seeds).encode() + rnd.choice(raw))


@FUZZ
@given(pool=pools, parts=chunks, rnd=st.randoms(use_true_random=True))
def test_pack_state_json(fuzz_project, pool, parts, rnd):
    seed = json.loads(STATE_SEEDS[0])
    pieces = [part for part in parts if isinstance(part, str)] or ["x"]
    for _ in range(INPUTS_PER_EXAMPLE):
        choice = rnd.choice(["mutate", "mutate", "edit", "bytes"])
        if choice == "mutate":
            fuzz_project.state(json.dumps(mutated(rnd, seed, pool), default=emit))
        elif choice == "edit":
            fuzz_project.state(edited(rnd, STATE_SEEDS[0], pieces))
        else:
            fuzz_project.state(
                b"".join(
                    p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass") for p in parts
                )
            )


# ---------------------------------------------------------------------------------------------
# Deterministic corners: deep nesting, huge files, paths that are not regular files


@pytest.mark.parametrize("reader", [*sorted(READERS), "state"])
@pytest.mark.parametrize("depth", [10, 200, 1000, 5000])
def test_deep_nesting_is_an_input_error(fuzz_project, reader, depth):
    feed = getattr(FuzzProject, reader)
    if reader == "state":
        feed(fuzz_project, "[" * depth + "]" * depth)
        feed(
            fuzz_project,
            '{"version": 1, "packs": {"toy_add": {"approval": {"by": '
            + "[" * depth
            + "]" * depth
            + "}}}}",
        )
        return
    feed(fuzz_project, "a = " + "[" * depth + "]" * depth + "\n")
    feed(fuzz_project, "a = " + "{b = " * depth + "1" + "}" * depth + "\n")
    # deep tables need no recursion to parse
    feed(fuzz_project, "[" + ".".join(["a"] * depth) + "]\nb = 1\n")


@pytest.mark.parametrize("reader", [*sorted(READERS), "state"])
def test_oversized_files_are_refused(fuzz_project, reader, tmp_path):
    getattr(FuzzProject, reader)(fuzz_project, "# " + "x" * tomlreader.MAX_BYTES + "\n")
    (tmp_path / "big.toml").write_text("# " + "x" * tomlreader.MAX_BYTES + "\n")
    with pytest.raises(InputError, match=r"^big.toml: larger than 1024 KiB — "):
        tomlreader.read(tmp_path / "big.toml", "big.toml")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_or_a_folder_is_one_error_never_a_block(tmp_path):
    lanes = tmp_path / "lanes"
    lanes.mkdir()
    # nobody writes to it: an open() for reading would wait forever
    os.mkfifo(lanes / "pipe.toml")
    with pytest.raises(InputError) as caught:
        load_lanes(lanes, root=tmp_path)
    assert str(caught.value) == "lanes/pipe.toml: not a regular file (a FIFO) — point it at a file"
    os.unlink(lanes / "pipe.toml")
    (lanes / "folder.toml").mkdir()
    with pytest.raises(InputError, match=r"^lanes/folder.toml: not a regular file \(a directory\)"):
        load_lanes(lanes, root=tmp_path)
    shim = write_shim(tmp_path / "shims", "toy_add")
    (shim / "manifest.toml").unlink()
    os.mkfifo(shim / "manifest.toml")
    with pytest.raises(InputError, match="not a regular file"):
        load_manifest(shim / "manifest.toml")


# ---------------------------------------------------------------------------------------------
# Carried and project files (issue 20): wheelhouse.json through `wheelhouse join`, and
# patchlane.toml's [mirrors] section. No traceback, nothing written outside --out or the project.

_WHEEL_DATA = b"not really a wheel\n"
_WHEEL = "toylib-1.0-py3-none-any.whl"
WHEELHOUSE_SEEDS = [
    {
        "lane": "cpu",
        "lock_sha256": "0" * 64,
        "artifacts": [
            {
                "package": "toylib",
                "version": "1.0",
                "filename": _WHEEL,
                "url": "http://127.0.0.1/toylib-1.0-py3-none-any.whl",
                "sha256": __import__("hashlib").sha256(_WHEEL_DATA).hexdigest(),
                "size": len(_WHEEL_DATA),
                "kind": "wheel",
                "part": 1,
                "chunks": 0,
            }
        ],
        "skipped": [],
        "parts": 1,
        "version": 1,
        "from_mirrors": [],
    }
]
#: Names a hostile wheelhouse.json would carry: paths, links, hidden files, chunk names.
PATHY = [
    "../" + _WHEEL,
    "../../" + _WHEEL,
    "/tmp/" + _WHEEL,
    "part-001/../../" + _WHEEL,
    "." + _WHEEL,
    _WHEEL + ".part000",
    _WHEEL.replace("any", "../x"),
    "toylib-1.0.tar.gz",
    "toylib-1.0-py3-none-any.whl\x00.txt",
    "C:\\\\x\\\\" + _WHEEL,
    "~/" + _WHEEL,
    "x" * 300 + ".whl",
]
MIRROR_SEEDS = [
    _text(REPO / "patchlane.toml"),
    (
        '[mirrors]\nfolder = ".patchlane/mirrors"\n[[mirrors.repository]]\n'
        "url = \"https://github.com/o/r\"\ntags = 'v(?P<version>\\d+(?:\\.\\d+)*)'\n"
        'branches = ["main", "release/*"]\npath = "mirrors/r.git"\n'
        'fetch = "https://github.com/o/r.git"\n'
    ),
]


class CarriedSandbox:
    """``root/part-001`` (a carried part), ``root/out`` (where join writes), ``root/project``
    (patchlane.toml) and files beside them that must never change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.part, self.out, self.project = root / "part-001", root / "out", root / "project"
        for folder in (self.part, self.project / ".patchlane"):
            folder.mkdir(parents=True, exist_ok=True)
        (self.part / _WHEEL).write_bytes(_WHEEL_DATA)
        (self.part / f"{_WHEEL}.part000").write_bytes(_WHEEL_DATA)
        (root / _WHEEL).write_bytes(b"outside: keep me\n")
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, bytes]:
        """Every file but the ones join may write (under ``out``) and the inputs fed."""
        return {
            str(p.relative_to(self.root)): p.read_bytes()
            for p in sorted(self.root.rglob("*"))
            if p.is_file()
            and not p.is_relative_to(self.out)
            and p.name not in ("wheelhouse.json", "patchlane.toml")
        }

    def wheelhouse(self, data: bytes | str) -> None:
        from retire.locks import wheelhouse

        (self.part / "wheelhouse.json").write_bytes(
            data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        )
        try:
            wheelhouse.join([self.part], self.out, within=self.out)
        except InputError as exc:
            message = str(exc)
            assert "\n" not in message and len(message) < 20_000, message
        assert self.snapshot() == self.before
        if self.out.exists():
            # only names gather writes, right under --out
            for path in self.out.rglob("*"):
                assert path.parent == self.out and (
                    path.name == "wheelhouse.json" or wheelhouse.carried_name(path.name)
                ), path
            import shutil

            shutil.rmtree(self.out)

    def mirrors(self, data: bytes | str) -> None:
        from retire.mirrors.config import load_mirrors

        path = self.project / "patchlane.toml"
        path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        expect_input_error(str(path), lambda: load_mirrors(self.project))
        assert self.snapshot() == self.before
        assert sorted(p.name for p in self.project.iterdir()) == [".patchlane", "patchlane.toml"]

    def slurm(self, data: bytes | str) -> None:
        from retire.runs.slurmconfig import load_slurm

        path = self.project / "patchlane.toml"
        path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        expect_input_error("patchlane.toml", lambda: load_slurm(self.project))


SLURM_SEEDS = [
    (
        '[slurm]\npartition = "gpu"\naccount = "ml"\nqos = "normal"\nconstraint = "hopper&ib"\n'
        'time-limit = "1-04:00:00"\nbuild-minutes = 30\ngpu-type = true\ncpus-per-lane = 8\n'
        'sbatch-args = ["--exclusive"]\npatchlane = ["/x/patchlane"]\npoll-seconds = 2.5\n'
    )
]


@pytest.fixture(scope="module")
def carried(tmp_path_factory) -> CarriedSandbox:
    return CarriedSandbox(tmp_path_factory.mktemp("carried"))


def test_the_carried_seeds_are_valid(carried):
    from retire.locks import wheelhouse
    from retire.mirrors.config import load_mirrors

    for seed in WHEELHOUSE_SEEDS:
        carried.wheelhouse(json.dumps(seed))
    # the seed really joins: a fuzzed document starts from something that works
    (carried.part / "wheelhouse.json").write_text(json.dumps(WHEELHOUSE_SEEDS[0]))
    assert wheelhouse.join([carried.part], carried.out, within=carried.out).artifacts
    for seed in MIRROR_SEEDS:
        (carried.project / "patchlane.toml").write_text(seed)
        assert load_mirrors(carried.project).mirrors
    from retire.runs.slurmconfig import load_slurm

    (carried.project / "patchlane.toml").write_text(SLURM_SEEDS[0])
    assert load_slurm(carried.project).gpu_type


@FUZZ
@given(pool=pools, parts=chunks, rnd=st.randoms(use_true_random=True))
def test_wheelhouse_json(carried, pool, parts, rnd):
    pool = pool + PATHY
    pieces = [part for part in parts if isinstance(part, str)] or ["x"]
    for _ in range(INPUTS_PER_EXAMPLE):
        seed = rnd.choice(WHEELHOUSE_SEEDS)
        choice = rnd.choice(["mutate", "mutate", "name", "edit", "bytes"])
        if choice == "mutate":
            carried.wheelhouse(json.dumps(mutated(rnd, seed, pool), default=emit))
        elif choice == "name":
            # the one field that becomes a path, with the others left valid
            doc = copy.deepcopy(seed)
            doc["artifacts"][0]["filename"] = rnd.choice(PATHY + pieces)
            doc["artifacts"][0]["chunks"] = rnd.choice([0, 0, 1, 2])
            carried.wheelhouse(json.dumps(doc))
        elif choice == "edit":
            carried.wheelhouse(edited(rnd, json.dumps(seed), pieces))
        else:
            carried.wheelhouse(
                b"".join(
                    p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass") for p in parts
                )
            )


@pytest.mark.parametrize("depth", [10, 1000, 100_000])
def test_a_deep_wheelhouse_json_is_an_input_error(carried, depth):
    carried.wheelhouse("[" * depth + "]" * depth)
    carried.wheelhouse('{"artifacts": [' + "{" * depth + "}" * depth + "]}")


@pytest.mark.parametrize("start", ["valid", "empty"])
@FUZZ
@given(pool=pools, parts=chunks, rnd=st.randoms(use_true_random=True))
def test_mirrors_section(carried, start, pool, parts, rnd):
    parsed = [tomllib.loads(seed) for seed in MIRROR_SEEDS]
    pool = pool + PATHY + ["..", "/", ".patchlane", "(a+)+$", "(?P<version>", "[", "*"]
    pieces = [part for part in parts if isinstance(part, str)] or ["x"]
    for _ in range(INPUTS_PER_EXAMPLE):
        if rnd.random() < 0.7:
            seed = rnd.choice(parsed) if start == "valid" else {"mirrors": {}}
            carried.mirrors(document(mutated(rnd, seed, pool)))
        else:
            carried.mirrors(edited(rnd, rnd.choice(MIRROR_SEEDS), pieces))


@pytest.mark.parametrize("start", ["valid", "empty"])
@FUZZ
@given(pool=pools, parts=chunks, rnd=st.randoms(use_true_random=True))
def test_slurm_section(carried, start, pool, parts, rnd):
    parsed = [tomllib.loads(seed) for seed in SLURM_SEEDS]
    pool = [*pool, "--exclusive", "-N2", "1-00:00", "gpu", "a;b", 0, -1, True]
    pieces = [part for part in parts if isinstance(part, str)] or ["x"]
    for _ in range(INPUTS_PER_EXAMPLE):
        if rnd.random() < 0.7:
            seed = rnd.choice(parsed) if start == "valid" else {"slurm": {}}
            carried.slurm(document(mutated(rnd, seed, pool)))
        else:
            carried.slurm(edited(rnd, rnd.choice(SLURM_SEEDS), pieces))
