"""`patchlane run --executor slurm` against a real single-node Slurm (Debian's slurm-wlm and munge,
started by the fixture in a temp folder and torn down after): lanes as jobs with their records
merged, a job cancelled mid-run reported as cancelled with the other lanes' records kept, and a
lane whose needs Slurm cannot meet reported as such. The job script and the ``[slurm]`` settings
are checked without a cluster."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from retire.bisect.budget import Budget
from retire.core.errors import InputError
from retire.core.project import Project
from retire.evidence import validation
from retire.lanes.model import Lane
from retire.runs.sbatch import JobFiles, job_script, time_limit
from retire.runs.sbatcharray import (
    LaneArray,
    array_script,
    array_time_limit,
    job_groups,
    plan,
)
from retire.runs.slurmbisect import BisectFiles, SlurmBisection, bisect_script
from retire.runs.slurmconfig import SlurmSettings, load_slurm
from retire.runs.slurmjob import JobState, parse_sacct, parse_scontrol, parse_squeue
from retire.schemas import load as load_schema
from shims.gpuneeds import GpuNeeds
from shims.manifest import parse_manifest
from tests.conftest import ROOT, run_cli, subprocess_env
from tests.support import shimtree
from tests.support.index import IndexServer, PackageIndex
from tests.support.slurmcluster import SlurmCluster, missing
from tests.support.wheels import build_wheel
from tests.test_bisect import clean_series  # noqa: F401 - fixture
from tests.test_report_bisect import SHIMS, WEEK, shop  # noqa: F401 - fixture

# -- without a cluster: the job script, the settings, Slurm's answers ------------------------------


def test_the_job_script_asks_for_the_lanes_needs_and_runs_the_lane(tmp_path):
    lane = Lane("gpu-h200", "3.12", "linux", ("torch",), shims=("nccl",), needs_cuda=True)
    manifest = parse_manifest(
        shimtree.manifest_text("nccl").replace("needs-cuda = false", "gpus = 2"),
        "nccl/manifest.toml",
    )
    settings = SlurmSettings(
        partition="gpu", constraint="hopper", gpu_type=True, sbatch_args=("--exclusive",)
    )
    files = JobFiles(tmp_path / "jobs", lane.name)
    limit = time_limit(lane, {"nccl": manifest}, settings)
    # two runs of 60 s and an hour for the env
    assert limit == "01:02:00"
    script = job_script(
        lane,
        GpuNeeds(2, name="h200"),
        settings,
        files,
        limit,
        root=tmp_path,
        run_args=["--run-id", "w1"],
    )
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in (
        "--job-name=patchlane-gpu-h200",
        f"--output={files.output}",
        "--time=01:02:00",
        "--partition=gpu",
        "--constraint=hopper",
        "--gres=gpu:h200:2",
        "--exclusive",
    ):
        assert f"#SBATCH {directive}" in lines
    assert lines[-1].endswith(f"> {files.result}")
    assert f"run gpu-h200 --manifest {files.records} --no-summary --json --run-id w1" in lines[-1]
    plain = job_script(
        lane, GpuNeeds(2, name="h200"), SlurmSettings(), files, "10", root=tmp_path, run_args=[]
    )
    assert "#SBATCH --gres=gpu:2" in plain.splitlines()
    assert "--partition" not in plain


def test_the_cpu_lanes_are_one_array_whose_tasks_each_run_their_lane(tmp_path):
    manifests = {
        "toy": parse_manifest(shimtree.manifest_text("toy"), "toy/manifest.toml"),
        "long": parse_manifest(
            shimtree.manifest_text("long").replace("timeout = 60", "timeout = 1800"),
            "long/manifest.toml",
        ),
    }
    cpu = [
        Lane(name, "3.12", "linux", ("x",), shims=(shim,))
        for name, shim in (("a", "toy"), ("b c", "long"), ("d", "toy"))
    ]
    gpu = Lane("g", "3.12", "linux", ("torch",), shims=("toy",), needs_cuda=True)
    groups = job_groups([cpu[0], gpu, cpu[1], cpu[2]], manifests, SlurmSettings(), tmp_path)
    # the GPU lane alone; the cpu lanes together, in lane order
    assert groups == [tuple(cpu), (gpu,)]
    folder = tmp_path / "jobs"
    planned = plan([gpu, *cpu], manifests, SlurmSettings(), folder, tmp_path)
    assert planned == [gpu, LaneArray(folder, tuple(cpu), "cpu-lanes")]
    assert plan([gpu, cpu[0]], manifests, SlurmSettings(), folder, tmp_path) == [gpu, cpu[0]]
    # the array's limit is its longest lane's: two runs of 30 min and an hour for the env
    assert array_time_limit(cpu, manifests, SlurmSettings()) == "02:00:00"
    assert array_time_limit(cpu, manifests, SlurmSettings(time_limit="30")) == "30"
    array = LaneArray(tmp_path / "jobs", tuple(cpu))
    script = array_script(
        array,
        SlurmSettings(partition="cpu"),
        "02:00:00",
        root=tmp_path,
        run_args=["--run-id", "w1"],
    )
    lines = script.splitlines()
    for directive in (
        "--job-name=patchlane-cpu-lanes",
        f"--output={tmp_path}/jobs/_cpu-lanes.%a.out",
        "--time=02:00:00",
        "--partition=cpu",
        "--array=0-2",
    ):
        assert f"#SBATCH {directive}" in lines
    assert not any("--gres" in line for line in lines)
    assert 'case "${SLURM_ARRAY_TASK_ID:-}" in' in lines and lines[-1] == "esac"
    arms = [line for line in lines if ") exec " in line]
    assert [arm.split(")")[0].strip() for arm in arms] == ["0", "1", "2"]
    # each arm runs its lane into the lane's own files, every word quoted for the shell
    files = JobFiles(tmp_path / "jobs", "b c")
    assert f"run 'b c' --manifest '{files.records}' --no-summary --json --run-id w1" in arms[1]
    assert arms[1].endswith(f"> '{files.result}' 2> '{files.output}' ;;")
    # bash runs the arm of its task and no other; a task without a lane says so
    bash = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True, check=False)
    assert bash.returncode == 0, bash.stderr
    stray = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={"SLURM_ARRAY_TASK_ID": "7", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert stray.returncode == 2 and "no lane for array task 7" in stray.stderr


def test_the_array_script_in_the_docs_is_the_one_written():
    shop = Path("/shared/shop")
    settings = SlurmSettings(
        partition="gpu",
        account="ml-infra",
        constraint="hopper",
        cpus_per_lane=16,
        patchlane=("/shared/venv/bin/patchlane",),
    )
    run = "20261127T030000Z-1a2b3c"
    lanes = tuple(Lane(name, "3.12", "linux", ("x",)) for name in ("py310", "py312"))
    script = array_script(
        LaneArray(shop / ".patchlane/slurm" / run, lanes),
        settings,
        "04:00:00",
        root=shop,
        run_args=["--run-id", run, "--heartbeat", "20"],
    )
    assert f"```bash\n{script}```" in (ROOT / "docs/commands.md").read_text()


@pytest.mark.parametrize(
    ("body", "key", "words"),
    [
        ('time-limit = "soon"', "slurm.time-limit", '"HH:MM:SS"'),
        ('partition = "gpu nodes"', "slurm.partition", 'partition = "gpu"'),
        ('sbatch-args = ["-N2"]', "slurm.sbatch-args[0]", '"--option=value"'),
        ("poll-seconds = 0", "slurm.poll-seconds", "poll-seconds = 10"),
        ('constraint = "a;rm"', "slurm.constraint", "hopper&ib"),
        ("partiton = 1", "slurm.partiton", "did you mean 'partition'"),
        ("cpus-per-lane = 0", "slurm.cpus-per-lane", "cpus-per-lane = 8"),
    ],
)
def test_bad_slurm_settings_are_one_line_naming_the_key_and_the_fix(tmp_path, body, key, words):
    (tmp_path / "patchlane.toml").write_text(f"[slurm]\n{body}\n")
    with pytest.raises(InputError) as caught:
        load_slurm(tmp_path)
    line = str(caught.value)
    assert line.startswith(f"patchlane.toml: {key}: ") and words in line and "\n" not in line


def test_slurm_settings_are_read(tmp_path):
    assert load_slurm(tmp_path) == SlurmSettings()
    (tmp_path / "patchlane.toml").write_text(
        '[slurm]\npartition = "gpu"\ntime-limit = "1-00:00:00"\ncpus-per-lane = 8\n'
        'patchlane = ["/shared/venv/bin/patchlane"]\nsbatch-args = ["--exclusive"]\n'
    )
    assert load_slurm(tmp_path) == SlurmSettings(
        partition="gpu",
        time_limit="1-00:00:00",
        cpus_per_lane=8,
        patchlane=("/shared/venv/bin/patchlane",),
        sbatch_args=("--exclusive",),
    )


def test_slurms_answers_are_read():
    assert parse_squeue("12|PENDING|Resources\n13|RUNNING|None\n") == {
        "12": JobState("PENDING", "Resources", "", False),
        "13": JobState("RUNNING", "None", "", True),
    }
    line = (
        "JobId=14 JobName=patchlane-a JobState=CANCELLED Reason=None ExitCode=0:15 "
        "RunTime=00:00:07 StartTime=2026-11-27T21:00:00"
    )
    cancelled = parse_scontrol(line)
    assert cancelled is not None and cancelled.words() == "cancelled (exit 0:15)"
    never = parse_scontrol(
        "JobId=15 JobState=CANCELLED Reason=None RunTime=00:00:00 StartTime=None"
    )
    assert never is not None and never.words() == "cancelled before it started"
    timeout = parse_sacct("TIMEOUT|0:0|01:00:00|None\n")
    assert timeout is not None and timeout.ended_badly
    assert timeout.words() == "killed at its time limit"


# -- a real cluster ---------------------------------------------------------------------------

TOY_LANE = """
[lane]
python = "3.11"
requirements = ["toylib=={version}"]
shims = {shims}
{extra}
[lane.indexes.main]
url = "{url}"
default = true
"""
SLOW_REPRODUCER = """
import time
from shims import reproducer

def check(with_shim):
    time.sleep(300)
    return reproducer.BUG_REPRODUCED

if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


@pytest.fixture(scope="module")
def cluster():
    """A single-node Slurm for this module's tests, torn down after them."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    started = SlurmCluster()
    started.start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def toylib_index(tmp_path_factory):
    index = PackageIndex()
    wheels = tmp_path_factory.mktemp("slurm-toylib")
    for version, source, when in (
        ("1.0", shimtree.BUGGY_TARGET, "2026-01-05"),
        ("1.1", shimtree.FIXED_TARGET, "2026-02-05"),
    ):
        index.add(build_wheel(wheels, "toylib", version, files={"toylib.py": source}), when)
    with IndexServer(index) as server:
        yield server


def _project(project, server, lanes: dict[str, tuple[str, str, str]], slurm: str = "") -> Path:
    """The LaneProject with ``lanes`` (name → (toylib version, shims, extra)) and more ``[slurm]``
    settings, locked."""
    shims = project.root / "shims"
    shimtree.write_shim(shims, "toy")
    shimtree.write_shim(
        shims,
        "toy_slow",
        reproducer=SLOW_REPRODUCER,
        manifest=shimtree.manifest_text("toy_slow").replace("timeout = 60", "timeout = 600"),
    )
    (project.root / "patchlane.toml").write_text(f"[slurm]\npoll-seconds = 0.3\n{slurm}")
    for name, (version, shim_ids, extra) in lanes.items():
        project.write(
            name, TOY_LANE.format(version=version, shims=shim_ids, extra=extra, url=server.url)
        )
    assert run_cli(project.root, "lock")[0] == 0
    return project.root


def _patchlane(root: Path, cluster: SlurmCluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "retire", "--root", str(root), *args],
        env=subprocess_env(PYTHONPATH=str(ROOT), **cluster.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_cpu_lanes_run_as_one_slurm_job_array_and_their_records_are_merged(
    project, toylib_index, cluster
):
    root = _project(
        project,
        toylib_index,
        {"old": ("1.0", '["toy"]', ""), "fixed": ("1.1", '["toy"]', "")},
    )
    proc = _patchlane(root, cluster, "run", "--executor", "slurm", "--run-id", "s1", "--json")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    document = json.loads(out)
    Draft202012Validator(load_schema("run")).validate(document)
    lanes = {lane["lane"]: lane for lane in document["lanes"]}
    assert lanes["old"]["shims"][0]["outcome"] == "needed"
    assert lanes["fixed"]["shims"][0]["outcome"] == "upstream-fixed"
    # the two cpu lanes went as ONE sbatch: a job array, a task per lane, in lane order
    ids = {name: lane["job"]["id"] for name, lane in lanes.items()}
    array_id = ids["fixed"].split("_")[0]
    assert array_id.isdigit() and ids == {"fixed": f"{array_id}_0", "old": f"{array_id}_1"}
    jobs = root / ".patchlane" / "slurm" / "s1"
    for lane in lanes.values():
        assert lane["job"]["state"] == "COMPLETED"
        assert lane["job"]["script"] == str(jobs / "_cpu-lanes.sbatch")
        assert lane["job"]["output"] == str(jobs / f"{lane['lane']}.out")
    assert err.count("submitted job ") == 2 and f"[old] submitted job {array_id}_1" in err
    # progress per lane (per array task): queued or running, then done
    assert f"[old] job {array_id}_1: " in err and f"{array_id}_0: done — COMPLETED" in err
    assert "[slurm] 0 queued, 0 running, 2 done" in err
    # each task's records, merged once: nothing lost, nothing twice
    from_jobs = validation.merge([jobs / "old.jsonl", jobs / "fixed.jsonl"])
    merged = [r for r in validation.load(root / "validation/manifest.jsonl") if r.run == "s1"]
    assert len(from_jobs) == 4 and sorted(r.record_id for r in merged) == sorted(
        r.record_id for r in from_jobs
    )
    assert document["recorded"] == 4
    script = (jobs / "_cpu-lanes.sbatch").read_text()
    assert "#SBATCH --array=0-1" in script and "#SBATCH --job-name=patchlane-cpu-lanes" in script
    assert not (jobs / "old.sbatch").exists()
    # each lane's pytest view in its own output; Slurm's own lines per task beside it
    assert "toy" in (jobs / "old.out").read_text()
    assert (jobs / "_cpu-lanes.0.out").exists() and (jobs / "_cpu-lanes.1.out").exists()
    # a second merge adds nothing
    assert validation.append(root / "validation/manifest.jsonl", from_jobs) == 0


@pytest.mark.slow
def test_an_array_task_cancelled_mid_run_is_reported_cancelled_and_the_others_records_kept(
    project, toylib_index, cluster
):
    root = _project(
        project,
        toylib_index,
        {"old": ("1.0", '["toy"]', ""), "slow": ("1.0", '["toy_slow"]', "")},
    )
    # the job says "still running toy_slow …" within a second of starting the reproducer
    proc = _patchlane(
        root, cluster, "run", "--executor", "slurm", "--run-id", "c1", "--json", "--heartbeat", "1"
    )
    records = root / "validation/manifest.jsonl"
    jobs = root / ".patchlane/slurm/c1"
    deadline = time.monotonic() + 240
    slow_id = None
    # cancel the slow lane's task once its reproducer runs and the other lane's task is done
    while time.monotonic() < deadline:
        tasks = cluster.tasks()
        output = jobs / "slow.out"
        running = output.exists() and "still running toy_slow" in output.read_text()
        if running and len(tasks) == 1:
            (slow_id,) = tasks
            break
        time.sleep(0.3)
    assert slow_id is not None, "the slow lane's task never ran its reproducer"
    # the slow lane is the array's second task (lanes in name order)
    arms = [
        line for line in (jobs / "_cpu-lanes.sbatch").read_text().splitlines() if ") exec " in line
    ]
    assert slow_id.endswith("_1") and arms[1].startswith("  1) ") and " run slow " in arms[1]
    cluster.scancel(slow_id)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    lanes = {lane["lane"]: lane for lane in json.loads(out)["lanes"]}
    slow = lanes["slow"]
    assert slow["status"] == "job-failed" and slow["job"]["state"] == "CANCELLED"
    assert slow["why"].startswith(f"Slurm job {slow_id} cancelled")
    assert "before it started" not in slow["why"]
    old = lanes["old"]
    assert old["status"] == "ran" and old["job"]["state"] == "COMPLETED"
    assert old["job"]["id"] == slow_id.replace("_1", "_0")
    kept = [r for r in validation.load(records) if r.run == "c1"]
    assert {(r.lane, r.mode) for r in kept} == {("old", "without"), ("old", "with")}
    assert f"lane slow: Slurm job {slow_id} cancelled" in err


@pytest.mark.slow
def test_a_sigterm_to_the_run_cancels_the_arrays_unfinished_tasks(project, toylib_index, cluster):
    root = _project(
        project,
        toylib_index,
        {"old": ("1.0", '["toy"]', ""), "slow": ("1.0", '["toy_slow"]', "")},
    )
    proc = _patchlane(
        root, cluster, "run", "--executor", "slurm", "--run-id", "k1", "--heartbeat", "1"
    )
    output = root / ".patchlane/slurm/k1/slow.out"
    deadline = time.monotonic() + 240
    tasks: dict[str, str] = {}
    while time.monotonic() < deadline:
        tasks = cluster.tasks()
        if len(tasks) == 1 and output.exists() and "still running toy_slow" in output.read_text():
            break
        time.sleep(0.3)
    (slow_id,) = tasks
    assert slow_id.endswith("_1") and tasks[slow_id] == "RUNNING"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    # the task still running was cancelled: nothing of the run is left in the queue
    deadline = time.monotonic() + 30
    while cluster.tasks() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert cluster.tasks() == {}
    assert "JobState=CANCELLED" in cluster.show_job(slow_id)


@pytest.mark.slow
def test_an_array_task_past_its_time_limit_is_reported_killed_at_it(project, toylib_index, cluster):
    # a minute for every task; the slow reproducer sleeps five, the other lane takes seconds
    root = _project(
        project,
        toylib_index,
        {"old": ("1.0", '["toy"]', ""), "slow": ("1.0", '["toy_slow"]', "")},
        slurm='time-limit = "1"\n',
    )
    proc = _patchlane(root, cluster, "run", "--executor", "slurm", "--run-id", "t1", "--json")
    # Slurm looks at time limits every half minute or so, and waits KillWait before SIGKILL
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 1, err
    lanes = {lane["lane"]: lane for lane in json.loads(out)["lanes"]}
    slow, old = lanes["slow"], lanes["old"]
    assert "#SBATCH --time=1" in (root / ".patchlane/slurm/t1/_cpu-lanes.sbatch").read_text()
    assert slow["status"] == "job-failed" and slow["job"]["state"] == "TIMEOUT", slow
    assert slow["why"].startswith(f"Slurm job {slow['job']['id']} killed at its time limit")
    assert slow["job"]["ended"].startswith("killed at its time limit")
    assert old["status"] == "ran" and old["job"]["state"] == "COMPLETED"
    kept = [r for r in validation.load(root / "validation/manifest.jsonl") if r.run == "t1"]
    assert {(r.lane, r.mode) for r in kept} == {("old", "without"), ("old", "with")}
    assert f"lane slow: Slurm job {slow['job']['id']} killed at its time limit" in err


@pytest.mark.slow
def test_jobs_that_never_started_are_reported_cancelled_before_they_started(
    project, toylib_index, cluster
):
    # held: Slurm keeps the array queued until released, and the test cancels it instead
    root = _project(
        project,
        toylib_index,
        {"old": ("1.0", '["toy"]', ""), "fixed": ("1.1", '["toy"]', "")},
        slurm='sbatch-args = ["--hold"]\n',
    )
    proc = _patchlane(root, cluster, "run", "--executor", "slurm", "--run-id", "h1", "--json")
    deadline = time.monotonic() + 60
    tasks: dict[str, str] = {}
    while time.monotonic() < deadline and len(tasks) < 2:
        tasks = cluster.tasks()
        time.sleep(0.3)
    # squeue -r: a task per line, each still queued
    assert sorted(tasks.values()) == ["PENDING", "PENDING"], tasks
    (array_id,) = {task.split("_")[0] for task in tasks}
    # the run has seen them queued before they go
    time.sleep(1)
    cluster.scancel(array_id)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert f"[old] job {array_id}_1: queued — PENDING (JobHeldUser)" in err
    for lane in json.loads(out)["lanes"]:
        assert lane["status"] == "job-failed" and lane["job"]["state"] == "CANCELLED", lane
        assert lane["why"].startswith(f"Slurm job {lane['job']['id']} cancelled before it started")
    assert not [r for r in validation.load(root / "validation/manifest.jsonl") if r.run == "h1"]


@pytest.mark.slow
def test_a_bisection_runs_as_one_slurm_job_and_its_records_are_merged(
    project, toylib_index, cluster
):
    root = _project(project, toylib_index, {"old": ("1.0", '["toy"]', "")})
    proc = _patchlane(root, cluster, "bisect", "toy", "--executor", "slurm", "--json")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    # the job's own document, as `patchlane bisect --json` prints it
    document = json.loads(out)
    Draft202012Validator(load_schema("bisect")).validate(document)
    assert (document["status"], document["first_fixed"]) == ("found", "1.1"), err
    (job_id,) = {
        line.split("submitted job ")[1].split()[0]
        for line in err.splitlines()
        if "[bisect toy] submitted job " in line
    }
    assert job_id.isdigit() and f"[bisect toy] job {job_id}: done — COMPLETED" in err
    (folder,) = (root / ".patchlane/slurm").iterdir()
    script = (folder / "bisect-toy.sbatch").read_text()
    assert "#SBATCH --job-name=patchlane-bisect-toy" in script and "--gres" not in script
    # the job's records, merged once into the project's manifest
    from_job = validation.load(folder / "bisect-toy.jsonl")
    recorded = [
        r for r in validation.load(root / "validation/manifest.jsonl") if r.lane == "bisect"
    ]
    assert from_job and document["records_added"] == len(from_job)
    assert sorted(r.record_id for r in recorded) == sorted(r.record_id for r in from_job)
    assert f"merged {len(from_job)} record(s) from job {job_id}" in err
    # the candidates' progress is in the job's output
    assert "toylib 1.1: fixed" in (folder / "bisect-toy.out").read_text()
    # no fixed release up to 1.0: the job exits 1, which Slurm calls FAILED; still the
    # bisection's own answer, printed as it printed it, with its exit status
    proc = _patchlane(root, cluster, "bisect", "toy", "--executor", "slurm", "--until", "1.0")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err
    said = out + err
    assert f"job {int(job_id) + 1}: done — FAILED (NonZeroExitCode)" in said, said
    assert "toylib: no fixed release — still broken at the newest, 1.0" in out
    assert "printed no result" not in said


@pytest.mark.slow
def test_a_lane_whose_needs_slurm_cannot_meet_is_reported_as_such(project, toylib_index, cluster):
    # the GPU lane is a job of its own, refused; the cpu lanes' array runs all the same
    root = _project(
        project,
        toylib_index,
        {
            "big": ("1.0", '["toy"]', "gpus = 8"),
            "old": ("1.0", '["toy"]', ""),
            "fixed": ("1.1", '["toy"]', ""),
        },
    )
    proc = _patchlane(root, cluster, "run", "--executor", "slurm", "--run-id", "n1", "--json")
    out, err = proc.communicate(timeout=120)
    lanes = {lane["lane"]: lane for lane in json.loads(out)["lanes"]}
    assert {lanes[name]["job"]["state"] for name in ("old", "fixed")} == {"COMPLETED"}, err
    assert lanes["old"]["job"]["id"].endswith("_1") and json.loads(out)["recorded"] == 4
    assert lanes["old"]["job"]["script"].endswith("/_cpu-lanes.sbatch")
    lane = lanes["big"]
    assert lane["status"] == "skipped", err
    assert lane["why"].startswith("Slurm cannot meet the lane's needs (8 GPUs): sbatch: error: ")
    assert lane["job"] == {
        "id": None,
        "state": "REFUSED",
        "ended": lane["why"].split(": ", 1)[1],
        "script": lane["job"]["script"],
        "output": lane["job"]["output"],
    }
    assert "#SBATCH --gres=gpu:8" in Path(lane["job"]["script"]).read_text()
    assert proc.returncode == 0


def test_a_bisections_job_asks_for_the_reproducers_gpus_and_keeps_its_exit_status(tmp_path):
    files = BisectFiles(tmp_path / "b1", "nccl")
    script = bisect_script(
        GpuNeeds(2), SlurmSettings(partition="gpu"), files, root=tmp_path, bisect_args=["--json"]
    )
    lines = script.splitlines()
    assert "#SBATCH --gres=gpu:2" in lines and "#SBATCH --partition=gpu" in lines
    # how many candidates a search takes is not known before: the partition's default time
    assert not any(line.startswith("#SBATCH --time") for line in lines)
    assert lines[-1].endswith(f"bisect nccl --json --manifest {files.records} > {files.result}")
    limited = bisect_script(
        GpuNeeds(), SlurmSettings(time_limit="08:00:00"), files, root=tmp_path, bisect_args=[]
    )
    assert "#SBATCH --time=08:00:00" in limited and "--gres" not in limited
    # the bisection's own exit status, where it ran to its end; none where Slurm ended it
    for state, code in (
        (JobState("COMPLETED", exit_code="0:0"), 0),
        (JobState("FAILED", exit_code="1:0"), 1),
        (JobState("TIMEOUT", exit_code="0:15"), None),
        (JobState("FAILED", exit_code="0:9"), None),
        (JobState("CANCELLED", exit_code="0:15"), None),
    ):
        assert SlurmBisection(files, "12", state).exit_code == code, state


def test_no_secret_reaches_a_job(monkeypatch):
    from retire.core import childenv
    from retire.runs import slurmclient

    monkeypatch.setenv("UV_INDEX_MAIN_PASSWORD", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_x")
    monkeypatch.setenv("UV_CACHE_DIR", "/shared/uv")
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    env = slurmclient.environment()
    assert "UV_INDEX_MAIN_PASSWORD" not in env and "GITHUB_TOKEN" not in env
    assert env["UV_CACHE_DIR"] == "/shared/uv" and env["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert childenv.RUN_TOKEN_ENV not in env


# -- the weekly report's budgeted bisections as Slurm jobs -----------------------------------------


@pytest.mark.slow
def test_the_weekly_bisections_run_as_slurm_jobs_within_the_budget_and_are_merged_once(
    shop, cluster
):
    """Two candidate-flagged shims (tests/test_report_bisect.py's shop: toylib broken up to 1.5
    and fixed from 1.6 on a loopback index): `patchlane report --bisect-budget 7 --bisect-executor
    slurm` submits both bisections at once, each with its share of the runs (4, 3), merges their
    records once, and the report shows both ends."""
    root = shop.root
    (root / "patchlane.toml").write_text("[slurm]\npoll-seconds = 0.3\n")
    before = len(validation.load(shop.validation))
    args = ("report", "--week", WEEK, "--json", "--bisect-budget", "7")
    proc = _patchlane(root, cluster, *args, "--bisect-executor", "slurm")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    document = json.loads(out)
    done = document["bisections"]
    # both were submitted before either ended: one wait over the two jobs
    submitted = [line for line in err.splitlines() if "] submitted job " in line]
    assert [line.split("]")[0] for line in submitted] == ["[bisect add_a", "[bisect add_b"], err
    first_done = min(i for i, line in enumerate(err.splitlines()) if ": done — " in line)
    assert all(err.splitlines().index(line) < first_done for line in submitted)
    (folder,) = (root / ".patchlane/slurm").iterdir()
    assert folder.name.startswith("weekly-")
    shares = {}
    for shim in SHIMS:
        script = (folder / f"bisect-{shim}.sbatch").read_text()
        assert f"#SBATCH --job-name=patchlane-bisect-{shim}" in script
        shares[shim] = int(script.split("--max-runs ")[1].split()[0])
    assert shares == {"add_a": 4, "add_b": 3}
    # each bisection's end, from its job's own document; the budget holds across them
    ran = {row["shim"]: row for row in done["ran"]}
    assert set(ran) == set(SHIMS) and done["left"] == [], err
    for shim, row in ran.items():
        assert row["status"] in ("found", "unpinned", "no-transition"), row
        assert row["command"] == f"patchlane bisect {shim}"
        assert 0 < row["runs"] <= shares[shim], row
        assert row["summary"].endswith(f"{row['runs']} reproducer run(s) over 9 release(s)."), row
        if row["runs"] == shares[shim] and row["status"] != "found":
            assert row["stopped"] == f"the budget of {shares[shim]} reproducer runs is spent"
    assert done["runs"] == sum(row["runs"] for row in ran.values()) <= 7
    # every job's records merged into the manifest, each exactly once, one per fresh run
    from_jobs = [r for shim in SHIMS for r in validation.load(folder / f"bisect-{shim}.jsonl")]
    recorded = validation.load(shop.validation)
    bisect_runs = [r for r in recorded if r.lane == "bisect"]
    assert len(recorded) == before + len(from_jobs) == before + done["runs"]
    assert sorted(r.record_id for r in bisect_runs) == sorted(r.record_id for r in from_jobs)
    assert {r.shim for r in bisect_runs} == set(SHIMS)
    # the report's Bisections section shows both
    md = (root / "reports" / f"{WEEK}.md").read_text()
    assert "## Bisections" in md
    for shim in SHIMS:
        assert f"| `{shim}` | `patchlane bisect {shim}` |" in md


@pytest.mark.slow
def test_a_weekly_bisection_slurm_refuses_is_a_failed_row_and_the_other_runs(shop, cluster):
    # add_a's reproducer asks for 8 GPUs, which the node has not: its job is refused, a failed
    # row saying so; add_b's runs to its end within the minutes
    root = shop.root
    (root / "patchlane.toml").write_text("[slurm]\npoll-seconds = 0.3\n")
    manifest = root / "shims" / "add_a" / "manifest.toml"
    text = manifest.read_text()
    manifest.write_text(text.replace("[reproducer]\n", "[reproducer]\ngpus = 8\n", 1))
    args = ("report", "--week", WEEK, "--json", "--bisect-minutes", "5")
    proc = _patchlane(root, cluster, *args, "--bisect-executor", "slurm")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    ran = {row["shim"]: row for row in json.loads(out)["bisections"]["ran"]}
    assert ran["add_a"]["status"] == "failed" and ran["add_a"]["runs"] == 0
    assert ran["add_a"]["summary"].startswith("Slurm refused the job: sbatch: error: "), ran
    assert ran["add_b"]["status"] == "found" and ran["add_b"]["floor"] == "toylib>=1.6"
    (folder,) = (root / ".patchlane/slurm").iterdir()
    script = (folder / "bisect-add_a.sbatch").read_text()
    # the minutes are the job's time, with a margin: 5 + the reproducer's timeout (600 s) +
    # build-minutes (60)
    assert "#SBATCH --gres=gpu:8" in script and "#SBATCH --time=01:15:00" in script
    assert "--max-minutes 5" in script and "--max-runs" not in script


#: add_a's reproducer answers at once on a fixed release and hangs on a broken one: its
#: bisection records the newest end (1.9, fixed) and then hangs, to be cancelled.
HANGS_WHEN_BROKEN = """
import time

from shims import reproducer


def check(with_shim):
    import toylib

    if toylib.add(2, 2) == 4:
        return reproducer.FIX_VALIDATED
    time.sleep(300)
    return reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run("{shim_id}", check, packages=["toylib"])
"""


@pytest.mark.slow
def test_a_weekly_bisections_job_cancelled_mid_run_is_a_failed_row_its_records_kept(shop, cluster):
    root = shop.root
    (root / "patchlane.toml").write_text("[slurm]\npoll-seconds = 0.3\n")
    (root / "shims" / "add_a" / "reproduce.py").write_text(
        HANGS_WHEN_BROKEN.replace("{shim_id}", "add_a")
    )
    args = ("report", "--week", WEEK, "--json", "--bisect-budget", "8")
    proc = _patchlane(root, cluster, *args, "--bisect-executor", "slurm")
    deadline = time.monotonic() + 180
    job_id = None
    # cancel add_a's job once it recorded a run and add_b's job is done
    while time.monotonic() < deadline and job_id is None:
        queued = cluster.squeue()
        found = list((root / ".patchlane/slurm").glob("*/bisect-add_a.jsonl"))
        if found and found[0].read_text().strip() and list(queued) == ["patchlane-bisect-add_a"]:
            job_id = queued["patchlane-bisect-add_a"][0]
        time.sleep(0.3)
    assert job_id is not None, "add_a's job never recorded a run"
    cluster.scancel(job_id)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    done = json.loads(out)["bisections"]
    ran = {row["shim"]: row for row in done["ran"]}
    cancelled = ran["add_a"]
    assert cancelled["status"] == "failed" and cancelled["runs"] == 1, cancelled
    assert cancelled["summary"].startswith(f"Slurm job {job_id} cancelled"), cancelled
    assert "the bisection printed no result (its output: " in cancelled["summary"]
    assert "before it started" not in cancelled["summary"]
    assert ran["add_b"]["status"] == "found" and 0 < ran["add_b"]["runs"] <= 4
    # both jobs' records kept: the cancelled one's run (1.9, fixed) and all of add_b's
    recorded = [r for r in validation.load(shop.validation) if r.lane == "bisect"]
    assert [r.versions["toylib"] for r in recorded if r.shim == "add_a"] == ["1.9"]
    assert len(recorded) == 1 + ran["add_b"]["runs"] == done["runs"]


def test_the_budget_is_shared_among_bisections_run_at_once():
    assert Budget(7).shares(2) == (4, 3)
    assert Budget(6).shares(3) == (2, 2, 2)
    assert Budget(10).shares(1) == (10,)
    # never less than one run each: a budget smaller than the count reaches its first ones
    assert Budget(2).shares(5) == (1, 1)
    assert sum(Budget(41).shares(7)) == 41
    assert Budget(None, 30).shares(3) == (None, None, None)
    assert Budget(3).shares(0) == ()


def test_a_weekly_bisections_job_gets_its_bounds_share_and_minutes(tmp_path):
    from packaging.version import Version

    from retire.commands.candidatejobs import bisect_args, job_minutes
    from retire.verdicts.actions import Bisect

    project = Project(tmp_path)
    cache = ["--cache", str(project.bisect_cache)]
    action = Bisect("toy", Version("1.2"), Version("1.5"))
    assert bisect_args(project, action, Budget(7, 30, 2), 4) == [
        "--since",
        "1.2",
        "--until",
        "1.5",
        *cache,
        "--jobs",
        "2",
        "--max-runs",
        "4",
        "--max-minutes",
        "30",
        "--json",
    ]
    assert bisect_args(project, Bisect("toy"), Budget(None, 0.5), None) == [
        *cache,
        "--max-minutes",
        "0.5",
        "--json",
    ]
    manifest = parse_manifest(shimtree.manifest_text("toy"), "toy/manifest.toml")
    # the minutes, the candidate still running then (its timeout: 60 s) and build-minutes
    assert job_minutes(Budget(7, 30), manifest, SlurmSettings(build_minutes=10)) == 41
    assert job_minutes(Budget(7), manifest, SlurmSettings()) is None
