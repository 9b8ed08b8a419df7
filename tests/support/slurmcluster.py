"""A real single-node Slurm cluster for tests: Debian's slurm-wlm and munge, started in a temp
folder (its own munge key and socket, its own slurm.conf and ports), torn down after.

Nothing here imitates Slurm: ``munged``, ``slurmctld`` and ``slurmd`` are the real daemons, and
the tests talk to them with the real ``sbatch``/``squeue``/``scontrol``/``scancel``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

#: The programs a cluster needs; a test skips, naming the first one missing, without them.
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def which(name: str) -> str | None:
    """``name`` on PATH or in the sbin folders (daemons live there, off a user's PATH)."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))


def missing() -> str | None:
    """Why no cluster can start here (the first program absent), or None."""
    for name in PROGRAMS:
        if which(name) is None:
            return (
                f"Slurm is not installed: no {name} on PATH or in /usr/sbin "
                "(apt-get install slurm-wlm munge)"
            )
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _conf(folder: Path, node: str, cpus: int) -> str:
    user = "root" if os.geteuid() == 0 else os.environ.get("USER", "nobody")
    return f"""\
ClusterName=patchlane-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/munge.socket
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=3600
KillWait=5
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """One node, one partition (``debug``), ``cpus`` CPUs and no GPU; :attr:`env` holds
    ``SLURM_CONF`` for the client commands."""

    def __init__(self, cpus: int = 8) -> None:
        # a short path: munge's socket name must fit a sockaddr_un
        self.folder = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        self.node = socket.gethostname().split(".")[0]
        self.cpus = cpus
        self.conf = self.folder / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}

    def _run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        program = which(args[0]) or args[0]
        return subprocess.run(
            [program, *args[1:]],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env},
            timeout=timeout,
        )

    def start(self) -> None:
        for sub in ("state", "spool", "log", "munge"):
            (self.folder / sub).mkdir()
        munge = self.folder / "munge"
        munge.chmod(0o700)
        (munge / "munge.key").write_bytes(os.urandom(1024))
        (munge / "munge.key").chmod(0o600)
        self.conf.write_text(_conf(self.folder, self.node, self.cpus))
        for command in (
            [
                "munged",
                f"--key-file={munge / 'munge.key'}",
                f"--socket={munge / 'munge.socket'}",
                f"--pid-file={munge / 'munged.pid'}",
                f"--log-file={munge / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}",
                "--force",
            ],
            ["slurmctld", "-f", str(self.conf)],
            ["slurmd", "-f", str(self.conf), "-N", self.node],
        ):
            done = self._run(*command)
            if done.returncode != 0:
                self.stop()
                raise RuntimeError(f"{command[0]} did not start: {done.stderr.strip()}")
        self._wait_idle()

    def _wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self._run("sinfo", "-h", "-o", "%t").stdout.strip()
            if state == "idle":
                return
            time.sleep(0.3)
        logs = "".join(
            (self.folder / "log" / name).read_text()[-2000:]
            for name in ("slurmctld.log", "slurmd.log")
            if (self.folder / "log" / name).exists()
        )
        self.stop()
        raise RuntimeError(f"the node never became idle (sinfo: {state!r})\n{logs}")

    def squeue(self) -> dict[str, tuple[str, str]]:
        """Job name → (job id, state) of the jobs in the queue."""
        out = self._run("squeue", "-h", "-o", "%j|%i|%T").stdout
        return {
            name: (job, state)
            for name, job, state in (line.split("|") for line in out.splitlines() if line)
        }

    def tasks(self) -> dict[str, str]:
        """Job or array task id (``12``, ``12_0``) → state, of what is in the queue, a line per
        array task."""
        out = self._run("squeue", "-r", "-h", "-o", "%i|%T").stdout
        return dict(line.split("|") for line in out.splitlines() if line)

    def show_job(self, job_id: str) -> str:
        """``scontrol show job -o``'s line for a job or array task the controller remembers."""
        return self._run("scontrol", "show", "job", "-o", job_id).stdout

    def scancel(self, job_id: str) -> None:
        self._run("scancel", job_id)

    def stop(self) -> None:
        """Stop the daemons (slurmd, slurmctld, munged) and remove the folder."""
        self._run("scancel", "--user", str(os.geteuid()), timeout=10)
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            path = self.folder / pid_file
            try:
                pid = int(path.read_text().strip())
            except (OSError, ValueError):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
        shutil.rmtree(self.folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a daemon we started but cannot reap (double fork): a zombie counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
