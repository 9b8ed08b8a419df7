"""GPUs: what lanes and reproducers declare, which lane gets which GPUs (a pure choice over a
declared device list: no GPU needed), and, end to end, two lanes whose reproducers each see only
their own GPU through CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from jsonschema import Draft202012Validator

from retire.core import childenv
from retire.core.errors import InputError
from retire.evidence import validation
from retire.lanes import lanefile
from retire.runs import lanerun
from retire.runs.gpus import Gpu, discover, lane_needs, parse_declared
from retire.runs.packing import GpuPool, choose, unmet
from retire.schemas import load as load_schema
from shims.gpuneeds import GpuNeeds
from shims.manifest import parse_manifest
from tests.conftest import ROOT, run_cli, subprocess_env
from tests.support import shimtree

H100 = Gpu("0", "NVIDIA H100 80GB HBM3", "9.0", 79.6)
H200 = Gpu("1", "NVIDIA H200", "9.0", 139.8)
A100 = Gpu("2", "NVIDIA A100-SXM4-40GB", "8.0", 40.0)
HOST = (H100, H200, A100)


# -- the choice itself ---------------------------------------------------------------------------


def test_an_exclusive_lane_takes_only_gpus_nobody_holds():
    assert choose(GpuNeeds(1), HOST, {}) == (H100,)
    assert choose(GpuNeeds(1), HOST, {"0": 1}, frozenset({"0"})) == (H200,)
    assert choose(GpuNeeds(2), HOST, {"0": 1, "1": 1}, frozenset({"0", "1"})) is None
    assert choose(GpuNeeds(0), HOST, {"0": 1}) == ()


def test_a_lane_of_a_kind_gets_only_that_kind():
    assert choose(GpuNeeds(1, name="h200"), HOST, {}) == (H200,)
    assert choose(GpuNeeds(2, min_compute_capability="9.0"), HOST, {}) == (H100, H200)
    assert choose(GpuNeeds(1, min_memory_gib=100), HOST, {}) == (H200,)
    # a word of the name, never a part of one
    assert choose(GpuNeeds(1, name="h20"), HOST, {}) is None


def test_sharing_lanes_share_the_least_loaded_gpu_never_an_exclusive_one():
    shared = GpuNeeds(1, share=True)
    assert choose(shared, HOST, {"0": 2, "1": 1}) == (A100,)
    assert choose(shared, HOST, {"0": 2, "1": 1, "2": 3}) == (H200,)
    assert choose(shared, HOST, {"0": 1, "1": 1, "2": 1}, frozenset({"0", "2"})) == (H200,)
    assert choose(shared, (H100,), {"0": 1}, frozenset({"0"})) is None
    # an exclusive lane never takes a shared one's GPU
    assert choose(GpuNeeds(1), (H100,), {"0": 1}) is None


def test_a_need_the_host_can_never_meet_says_why():
    assert unmet(GpuNeeds(2), HOST) is None
    assert unmet(GpuNeeds(8), HOST) == "needs 8 GPUs, has 3 GPUs"
    assert unmet(GpuNeeds(1), ()) == "needs 1 GPU, has no GPU"
    why = unmet(GpuNeeds(2, min_memory_gib=100), HOST)
    assert why is not None and why.startswith(
        "needs 2 GPUs (≥ 100 GiB), has 3 GPUs, 1 of that kind"
    )
    assert "NVIDIA H100 80GB HBM3 has 79.6 GiB of memory" in why


@pytest.mark.slow
def test_the_pool_gives_side_by_side_lanes_their_own_gpus_and_a_pair_waits(tmp_path):
    pool = GpuPool((Gpu("0"), Gpu("1")), tmp_path)
    seen: list[tuple[str, ...]] = []
    first, second = pool.hold(GpuNeeds(1)), pool.hold(GpuNeeds(1))
    a, b = first.__enter__(), second.__enter__()
    assert {a[0].id, b[0].id} == {"0", "1"}

    waits: list[str] = []

    def pair() -> None:
        with pool.hold(GpuNeeds(2), waiting=lambda: waits.append("waiting")) as both:
            seen.append(tuple(gpu.id for gpu in both))

    waiter = threading.Thread(target=pair)
    waiter.start()
    time.sleep(0.2)
    # both GPUs are held: the pair waits
    assert not seen
    first.__exit__(None, None, None)
    time.sleep(0.2)
    assert not seen
    second.__exit__(None, None, None)
    waiter.join(5)
    assert seen == [("0", "1")]
    # it said so once
    assert waits == ["waiting"]
    with pytest.raises(ValueError, match="needs 3 GPUs, has 2 GPUs"):
        pool.hold(GpuNeeds(3)).__enter__()


HOLDER = """
import sys, time
from pathlib import Path
from retire.runs.gpus import Gpu
from retire.runs.packing import GpuPool
from shims.gpuneeds import GpuNeeds

pool = GpuPool((Gpu("0"), Gpu("1")), Path(sys.argv[1]))
with pool.hold(GpuNeeds(1, share=sys.argv[2] == "share")) as got:
    print(got[0].id, flush=True)
    sys.stdin.readline()
"""


@pytest.mark.slow
def test_another_process_holding_a_gpu_is_respected(tmp_path):
    """`nox -s lane -j N` runs one patchlane per lane: their GPUs come from one host-wide set of
    leases."""
    other = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), "alone"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "0"
        pool = GpuPool((Gpu("0"), Gpu("1")), tmp_path)
        with pool.hold(GpuNeeds(1)) as mine:
            assert [gpu.id for gpu in mine] == ["1"]
        # nor does a sharing lane take an exclusive one's GPU
        with pool.hold(GpuNeeds(1, share=True)) as mine:
            assert [gpu.id for gpu in mine] == ["1"]
        waited: list[str] = []
        pair = threading.Thread(
            target=lambda: waited.extend(g.id for g in pool.hold(GpuNeeds(2)).__enter__())
        )
        pair.start()
        time.sleep(0.6)
        # the pair waits for the other process
        assert not waited
        assert other.stdin is not None
        other.stdin.write("\n")
        other.stdin.flush()
        pair.join(10)
        assert waited == ["0", "1"]
    finally:
        other.kill()
        other.wait()


# -- the host's GPUs ------------------------------------------------------------------------------


def test_declared_gpus_by_count_list_and_id():
    assert parse_declared("none") == () and parse_declared("0") == ()
    assert [g.id for g in parse_declared("4")] == ["0", "1", "2", "3"]
    assert parse_declared("h100:9.0:80, 3=h200::141") == (
        Gpu("0", "h100", "9.0", 80.0),
        Gpu("3", "h200", None, 141.0),
    )
    for bad, problem in (("h100:nine", "not NAME"), ("0=a,0=b", "one CUDA id twice")):
        with pytest.raises(InputError) as caught:
            parse_declared(bad)
        line = str(caught.value)
        assert "PATCHLANE_GPUS" in line and problem in line and "\n" not in line
        assert "h100:9.0:80" in line


def test_the_engines_own_cuda_visible_devices_narrows_the_host():
    found = discover({"PATCHLANE_GPUS": "4", "CUDA_VISIBLE_DEVICES": "1,3"})
    assert [g.id for g in found.gpus] == ["1", "3"]
    assert len(discover({"PATCHLANE_GPUS": "h100,h100"}).gpus) == 2


def test_the_host_reads_declared_gpus_over_the_cuda_switch(monkeypatch):
    monkeypatch.setenv("PATCHLANE_HOST_CUDA", "0")
    monkeypatch.setenv("PATCHLANE_GPUS", "h200:9.0:141")
    host = lanerun.Host.detect()
    assert host.cuda and host.gpus == (Gpu("0", "h200", "9.0", 141.0),)
    assert host.description == "1 GPU(s): h200 (PATCHLANE_GPUS=h200:9.0:141)"
    monkeypatch.setenv("PATCHLANE_GPUS", "none")
    assert not lanerun.Host.detect().cuda


def test_a_lane_child_sees_the_gpus_its_lane_was_given():
    base = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "GITHUB_TOKEN": "x"}
    assert childenv.for_lane(base)["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    with childenv.visible_devices("2"):
        assert childenv.for_lane(base)["CUDA_VISIBLE_DEVICES"] == "2"
        assert childenv.for_uv(base)["CUDA_VISIBLE_DEVICES"] == "2"
        # a lane's own value never wins over the run's choice
        assert childenv.for_reproducer(base)["CUDA_VISIBLE_DEVICES"] == "2"
        assert "GITHUB_TOKEN" not in childenv.for_reproducer(base)
    with childenv.visible_devices(""):
        assert childenv.for_lane(base)["CUDA_VISIBLE_DEVICES"] == ""
    assert childenv.for_lane(base)["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


# -- declared needs -------------------------------------------------------------------------------

LANE = """
[lane]
python = "3.12"
requirements = ["torch"]
{extra}
"""


def _lane(tmp_path, extra: str):
    path = tmp_path / "lanes" / "gpu.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(LANE.format(extra=extra))
    return lanefile.load_file(path, tmp_path)[0]


def test_a_lane_declares_its_gpus(tmp_path):
    lane = _lane(tmp_path, 'gpus = { count = 2, min-compute-capability = "9.0", name = "h100" }')
    assert lane.gpus == GpuNeeds(2, "9.0", None, "h100")
    assert lane.needs_cuda and lane.tag == "gpu"
    assert _lane(tmp_path, "gpus = 4").gpus == GpuNeeds(4)
    assert _lane(tmp_path, "needs-cuda = true").gpus is None


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ("gpus = -1", "lane.gpus", "a number of GPUs, 0 to 64"),
        ("gpus = 1.5", "lane.gpus", "a number of GPUs"),
        ('gpus = "two"', "lane.gpus", "a number of GPUs"),
        ("gpus = { count = 2, colour = 1 }", "lane.gpus.colour", "unknown key"),
        ('gpus = { min-compute-capability = "nine" }', "lane.gpus.min-compute-capability", "9.0"),
        ("gpus = { min-memory-gib = -80 }", "lane.gpus.min-memory-gib", "min-memory-gib = 80"),
        ('gpus = { name = "h100!" }', "lane.gpus.name", "h200"),
        ('gpus = { count = 0, name = "h100" }', "lane.gpus.count", "count = 1"),
        ("gpus = 2\nneeds-cuda = false", "lane.gpus", "needs-cuda = true"),
        ("gpus = 0\nneeds-cuda = true", "lane.gpus", "gpus = 1"),
        ('env = { CUDA_VISIBLE_DEVICES = "0" }', "lane.env.CUDA_VISIBLE_DEVICES", "gpus = 2"),
    ],
)
def test_bad_gpu_needs_are_one_line_naming_file_key_and_fix(tmp_path, extra, key, words):
    with pytest.raises(InputError) as caught:
        _lane(tmp_path, extra)
    line = str(caught.value)
    assert line.startswith(f"lanes/gpu.toml: {key}: "), line
    assert words in line and "\n" not in line


def test_a_reproducer_declares_its_gpus():
    text = shimtree.manifest_text("nccl").replace(
        "needs-cuda = false\n", 'gpus = { count = 2, min-compute-capability = "9.0" }\n'
    )
    spec = parse_manifest(text, "nccl/manifest.toml").reproducer
    assert spec.needs_cuda and spec.gpu_needs == GpuNeeds(2, "9.0")
    plain = parse_manifest(
        shimtree.manifest_text("one").replace(
            "needs-cuda = false", 'needs-cuda = true\nmin-compute-capability = "8.0"'
        ),
        "one/manifest.toml",
    ).reproducer
    assert plain.gpus is None and plain.gpu_needs == GpuNeeds(1, "8.0")
    with pytest.raises(InputError, match=r"reproducer.gpus: set while needs-cuda = false"):
        parse_manifest(
            shimtree.manifest_text("x").replace(
                "needs-cuda = false", "needs-cuda = false\ngpus = 2"
            ),
            "x/manifest.toml",
        )


def test_a_cuda_lane_is_given_what_its_most_demanding_reproducer_needs(tmp_path):
    text = shimtree.manifest_text("nccl").replace("needs-cuda = false", "gpus = 2")
    manifests = {"nccl": parse_manifest(text, "nccl/manifest.toml")}
    lane = _lane(tmp_path, 'needs-cuda = true\nshims = ["nccl"]')
    assert lane_needs(lane, manifests) == GpuNeeds(2)
    assert lane_needs(_lane(tmp_path, 'shims = ["nccl"]'), manifests) == GpuNeeds()
    assert lane_needs(_lane(tmp_path, 'gpus = 1\nshims = ["nccl"]'), manifests) == GpuNeeds(1)


def test_lanes_json_shows_what_each_lane_is_given(tmp_path, capsys):
    (tmp_path / "lanes").mkdir()
    (tmp_path / "lanes" / "gpu.toml").write_text(LANE.format(extra='gpus = { name = "h200" }'))
    (tmp_path / "lanes" / "cpu.toml").write_text(LANE.format(extra=""))
    code, out, _ = run_cli(tmp_path, "lanes", "--json", capsys=capsys)
    rows = {row["name"]: row for row in json.loads(out)}
    Draft202012Validator(load_schema("lanes")).validate(json.loads(out))
    assert rows["gpu"]["gpus"] == {
        "count": 1,
        "min_compute_capability": None,
        "min_memory_gib": None,
        "name": "h200",
        "share": False,
    }
    assert rows["cpu"]["gpus"]["count"] == 0
    code, out, _ = run_cli(tmp_path, "lanes", capsys=capsys)
    assert code == 0 and ", 1 GPU (h200)" in out


# -- end to end: lanes packed onto declared GPUs --------------------------------------------

SEES_GPUS = """
import os
import pathlib
import time
from shims import reproducer

def check(with_shim):
    print("saw", os.environ.get("CUDA_VISIBLE_DEVICES"))
    meet = os.environ.get("PATCHLANE_TEST_MEET")
    if meet and not with_shim:
        # lanes a and b wait for each other: they hold their GPUs at the same time
        pathlib.Path(meet, str(os.getpid())).write_text("")
        deadline = time.monotonic() + 120
        while len(os.listdir(meet)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    return reproducer.FIX_VALIDATED if with_shim else reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""
GPU_LANE = """
[lane]
python = "3.11"
requirements = ["toylib==1.0"]
shims = {shims}
{extra}
[lane.indexes.main]
url = "{url}"
default = true
"""


@pytest.fixture(scope="module")
def toylib_index(tmp_path_factory):
    from tests.support.index import IndexServer, PackageIndex
    from tests.support.wheels import build_wheel

    index = PackageIndex()
    files = {"toylib.py": shimtree.BUGGY_TARGET}
    index.add(
        build_wheel(tmp_path_factory.mktemp("gpu-toylib"), "toylib", "1.0", files=files),
        "2026-01-05",
    )
    with IndexServer(index) as server:
        yield server


@pytest.mark.slow
def test_two_lanes_see_different_gpus_and_a_pair_lane_its_own_set(
    project, toylib_index, tmp_path, capsys, monkeypatch
):
    p = project
    shimtree.write_shim(p.root / "shims", "sees", reproducer=SEES_GPUS)
    shimtree.write_shim(
        p.root / "shims",
        "pair",
        reproducer=SEES_GPUS,
        # preloads: its lane runs it in forks of a launcher
        manifest=shimtree.manifest_text("pair").replace(
            "needs-cuda = false", 'gpus = 2\npreload = ["json"]'
        ),
    )
    monkeypatch.setenv("PATCHLANE_GPUS", "h100:9.0:80,h100:9.0:80")
    monkeypatch.setenv("PATCHLANE_GPU_LOCKS", str(tmp_path / "leases"))
    meet, meet_apart = tmp_path / "meet", tmp_path / "meet-apart"
    meet.mkdir()
    meet_apart.mkdir()

    def write(name: str, shims: str, extra: str) -> None:
        p.write(name, GPU_LANE.format(shims=shims, extra=extra, url=toylib_index.url))

    meeting = f'needs-cuda = true\nenv = {{ PATCHLANE_TEST_MEET = "{meet}" }}'
    write("a", '["sees"]', meeting)
    write("b", '["sees"]', meeting)
    # given both GPUs by what its reproducer declares
    write("pair", '["pair"]', "needs-cuda = true")
    write("big", '["sees"]', "gpus = 4")
    write("cpu", '["sees"]', "")
    # a one-GPU lane whose shim needs two: that shim is skipped, not failed
    write("narrow", '["pair"]', "gpus = 1")
    # two lanes for two separate runs at once, as `nox -s lane -j 2` starts them
    apart = f'needs-cuda = true\nenv = {{ PATCHLANE_TEST_MEET = "{meet_apart}" }}'
    write("c", '["sees"]', apart)
    write("d", '["sees"]', apart)
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    lanes_here = ["a", "b", "pair", "big", "cpu", "narrow"]
    code, out, err = run_cli(
        p.root, "run", *lanes_here, "-j", "3", "--run-id", "g1", "--json", capsys=capsys
    )
    assert code == 0, out + err
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "retire", "--root", str(p.root), "run", name, "--run-id", "g2"],
            env=subprocess_env(PYTHONPATH=str(ROOT)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in ("c", "d")
    ]
    for proc in runs:
        said = proc.communicate(timeout=300)[0]
        assert proc.returncode == 0, said
    apart = [r for r in validation.load(p.root / "validation/manifest.jsonl") if r.run == "g2"]
    assert {r.host.get("visible_devices") for r in apart if r.mode == "without"} == {"0", "1"}
    records = [r for r in validation.load(p.root / "validation/manifest.jsonl") if r.run == "g1"]
    seen = {(r.lane, r.mode): r.host.get("visible_devices") for r in records}
    # side by side, each on its own GPU; both modes of a lane on the same one
    assert {seen[("a", "without")], seen[("b", "without")]} == {"0", "1"}
    assert seen[("a", "without")] == seen[("a", "with")]
    assert seen[("pair", "without")] == seen[("pair", "with")] == "0,1"
    # what the reproducer itself saw agrees with its stamp
    a = next(r for r in records if r.lane == "a")
    assert f"saw {seen[('a', 'without')]}" in a.output_tail
    # a lane that needs no GPU sees none on a GPU host
    assert seen[("cpu", "without")] == ""
    lanes = {lane["lane"]: lane for lane in json.loads(out)["lanes"]}
    assert lanes["pair"]["isolation"] == "launcher"
    assert lanes["big"]["status"] == "skipped"
    assert "this host needs 4 GPUs, has 2 GPUs" in lanes["big"]["why"]
    assert "PATCHLANE_GPUS" in lanes["big"]["why"]
    narrow = lanes["narrow"]["shims"][0]
    assert narrow["outcome"] == "skipped" and "needs 2 GPUs, has 1 GPU" in narrow["why"]
    assert not any(r.lane in ("big", "narrow") for r in records)


def test_a_bisection_holds_gpus_of_its_own(tmp_path, monkeypatch):
    """`patchlane bisect` runs its candidates inside held_gpus: beside a lane that holds GPU 0,
    its reproducers see GPU 1 only; on a host without GPUs nothing changes."""
    from retire.runs.packing import held_gpus, on_gpus

    monkeypatch.setenv("PATCHLANE_GPUS", "h100,h100")
    monkeypatch.setenv("PATCHLANE_GPU_LOCKS", str(tmp_path))
    said: list[str] = []
    lane = GpuPool((Gpu("0", "h100"), Gpu("1", "h100")), tmp_path)
    with lane.hold(GpuNeeds(1)) as held:
        assert [gpu.id for gpu in held] == ["0"]
        with held_gpus(GpuNeeds(1), said.append) as mine:
            assert [gpu.id for gpu in mine] == ["1"]
            assert childenv.for_reproducer({"PATH": "/bin"})["CUDA_VISIBLE_DEVICES"] == "1"
        seen = on_gpus(
            GpuNeeds(1), lambda: childenv.for_lane({})["CUDA_VISIBLE_DEVICES"], say=said.append
        )
        assert seen() == "1"
    assert said == ["GPUs 1: h100", "GPUs 1: h100"]
    # a reproducer that needs no GPU, or a host without any: nothing held, nothing set
    with held_gpus(GpuNeeds(0), said.append) as none:
        assert none == () and "CUDA_VISIBLE_DEVICES" not in childenv.for_lane({})
    monkeypatch.setenv("PATCHLANE_GPUS", "none")
    with held_gpus(GpuNeeds(1), said.append) as none:
        assert none == ()


def test_nvidia_smis_list_and_the_engines_allocation():
    from retire.runs.gpus import _from_smi, _visible

    listed = _from_smi(
        "0, GPU-aaa, NVIDIA H100 80GB HBM3, 9.0, 81559\n"
        "1, GPU-bbb, NVIDIA H100 80GB HBM3, 9.0, 81559\n"
        "No devices were found\n"
    )
    assert listed[1] == Gpu("1", "NVIDIA H100 80GB HBM3", "9.0", 79.6)
    assert listed[1].uuid == "GPU-bbb"
    # a driver without compute_cap
    assert _from_smi("3, GPU-c, Tesla V100, 16384")[0] == Gpu("3", "Tesla V100", None, 16.0)
    # by UUID, by index, and by position inside a cgroup that renumbers
    assert [g.id for g in _visible(listed, {"CUDA_VISIBLE_DEVICES": "GPU-bbb"})] == ["GPU-bbb"]
    assert _visible(listed, {"CUDA_VISIBLE_DEVICES": "GPU-bbb"})[0].compute_capability == "9.0"
    assert [g.id for g in _visible(listed, {"CUDA_VISIBLE_DEVICES": "1"})] == ["1"]
    assert [g.name for g in _visible(listed, {"CUDA_VISIBLE_DEVICES": "4,5"})] == [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 80GB HBM3",
    ]
    assert _visible(listed, {"CUDA_VISIBLE_DEVICES": "MIG-x"}) == (Gpu("MIG-x"),)
    assert _visible(listed, {"CUDA_VISIBLE_DEVICES": ""}) == ()


CRASHES = """
import sys

if __name__ == "__main__":
    # dies before the reproducer protocol prints its host stamp
    sys.exit(3)
"""


@pytest.mark.slow
def test_a_run_that_dies_before_its_stamp_still_says_which_gpu_it_was_given(
    project, toylib_index, tmp_path, capsys, monkeypatch
):
    p = project
    shimtree.write_shim(p.root / "shims", "dies", reproducer=CRASHES)
    monkeypatch.setenv("PATCHLANE_GPUS", "h100:9.0:80,h100:9.0:80")
    monkeypatch.setenv("PATCHLANE_GPU_LOCKS", str(tmp_path / "leases"))
    p.write("one", GPU_LANE.format(shims='["dies"]', extra="gpus = 1", url=toylib_index.url))
    assert run_cli(p.root, "lock", capsys=capsys)[0] == 0
    code, out, err = run_cli(p.root, "run", "one", "--run-id", "c1", capsys=capsys)
    assert code == 1, out + err
    records = [r for r in validation.load(p.root / "validation/manifest.jsonl") if r.run == "c1"]
    assert records and all(r.outcome == "crashed" for r in records)
    # no stamp from the reproducer, but the engine knows what it gave the run
    assert {r.host.get("visible_devices") for r in records} == {"0"}
    assert all("hostname" not in r.host for r in records)
