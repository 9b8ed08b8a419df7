"""Reproducer for compile_nccl_policy (env-constraint).

A real two-rank job, one process per GPU over NCCL (needs 2 CUDA devices), with the production
times scaled down 60x (1 s here stands for 1 min there) so the relationship holds and the run takes
seconds: torch's default NCCL collective timeout of 10 min becomes 10 s and its default heartbeat
of 480 s becomes 8 s; the policy's 7200 s becomes 120 s; rank 1's first torch.compile, 15-20 min on
the deep hybrid preset, becomes a real torch.compile of a small MLP padded to a 20 s stall. Rank 0's
compile cache is warm (it runs eager) and it enters the next all_reduce at once, the way the fast
ranks of a job do. Each rank reads TORCH_DISTRIBUTED_DEFAULT_TIMEOUT the way the shop's launcher
does and passes it to init_process_group (torch itself does not read that variable).

without: torch's defaults (scaled): monitoring on, heartbeat 8 s, collective timeout 10 s.
         BUG_REPRODUCED when the job dies (the NCCL watchdog tears rank 0 down after 10 s waiting
         for rank 1, then rank 1's collective has no peer); FIX_VALIDATED if it survives.
with:    the shim's variables (checked to be in this process's environment), times scaled the same
         way. FIX_VALIDATED when both ranks finish the all_reduce with the right sum.
Without two CUDA devices:
without: SKIPPED; PATCHLANE_NCCL_POLICY_BACKEND=gloo runs the same job as two CPU ranks instead
         (the collective-timeout class, without NCCL's watchdog and heartbeat monitor).
with:    the policy check only, in child processes started the way a launcher starts a rank
         (shims.child, two side by side, each importing torch._inductor.config under its own
         environment): every variable carries the shim's value there and in a grandchild,
         torch._inductor's max_autotune_gemm is False, and a value the environment already sets
         wins.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from shims import reproducer

SHIM = "compile_nccl_policy"
# production seconds per reproducer second
SCALE = 60.0
# torch 2.x defaults, production seconds
TORCH_DEFAULTS = {
    "TORCH_NCCL_ENABLE_MONITORING": "1",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "480",
    # default_pg_nccl_timeout: 10 min
    "TORCH_DISTRIBUTED_DEFAULT_TIMEOUT": "600",
}
SECONDS = ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_DISTRIBUTED_DEFAULT_TIMEOUT")
# rank 1's first compile: 20 min in production
STALL_S = 20.0
JOB_LIMIT_S = 180.0
POLICY = (
    "TORCH_NCCL_ENABLE_MONITORING",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
    "TORCH_DISTRIBUTED_DEFAULT_TIMEOUT",
    "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM",
)

RANK = r"""
import datetime, json, os, sys, time
import torch
import torch.distributed as dist

rank, backend = int(os.environ["RANK"]), os.environ["PL_BACKEND"]
def say(event, **kw):
    t = round(time.monotonic() - T0, 2)
    print(json.dumps(dict(rank=rank, event=event, t=t, **kw)), flush=True)
T0 = time.monotonic()
# The launcher's reading of the policy: torch does not read TORCH_DISTRIBUTED_DEFAULT_TIMEOUT.
timeout = datetime.timedelta(seconds=float(os.environ["TORCH_DISTRIBUTED_DEFAULT_TIMEOUT"]))
if backend == "nccl":
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", timeout=timeout, device_id=device)
else:
    device = torch.device("cpu")
    dist.init_process_group("gloo", timeout=timeout)
warm = torch.ones(1, device=device)
dist.all_reduce(warm)  # the communicator is up before the compile, as after a parameter broadcast
say("ready", world=dist.get_world_size(), timeout_s=timeout.total_seconds())
model = torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)
).to(device)
x = torch.randn(64, 256, device=device)
if rank == 1:  # the rank whose first compile is long
    start = time.monotonic()
    model = torch.compile(model)
    model(x).sum().backward()
    compiled_s = time.monotonic() - start
    stall = float(os.environ["PL_STALL_S"])
    if compiled_s < stall:
        time.sleep(stall - compiled_s)  # scaled stand-in for the rest of the deep preset's compile
    say("compiled", real_compile_s=round(compiled_s, 2), stall_s=round(time.monotonic() - start, 2))
else:
    model(x).sum().backward()  # warm cache: no compile stall
    say("step-done")
grad = torch.full((1,), float(rank + 1), device=device)
dist.all_reduce(grad)
if backend == "nccl":
    torch.cuda.synchronize()
say("all_reduce-done", value=grad.item())
dist.destroy_process_group()
"""

CHILD = r"""
import json, os, subprocess, sys
import shims
shims.activate(only={"compile_nccl_policy"})
import torch._inductor.config as inductor
names = sorted(shims.env_constraints())
ECHO = "import json, os, sys; print(json.dumps({n: os.environ.get(n) for n in sys.argv[1:]}))"
grandchild = subprocess.run(
    [sys.executable, "-c", ECHO, *names], capture_output=True, text=True, check=True
)
state = shims.status()["compile_nccl_policy"]
print(json.dumps({
    "env": {n: os.environ.get(n) for n in names},
    "grandchild": json.loads(grandchild.stdout),
    "max_autotune_gemm": inductor.max_autotune_gemm,
    "state": state.state,
    "reason": state.reason,
}))
"""


def _scaled(values: dict[str, str]) -> dict[str, str]:
    out = dict(values)
    for name in SECONDS:
        if name in out:
            out[name] = f"{float(out[name]) / SCALE:g}"
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _job(backend: str, settings: dict[str, str]) -> bool:
    """Run the two-rank job; True when both ranks finish the all_reduce with the right sum."""
    env = {k: v for k, v in os.environ.items() if k not in POLICY}
    env.update(settings)
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
        WORLD_SIZE="2",
        PL_BACKEND=backend,
        PL_STALL_S=f"{STALL_S:g}",
        PYTHONUNBUFFERED="1",
    )
    # no NVLink multicast on shared hosts
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    print(
        f"# job: {backend}, 2 ranks, rank 1 stalls {STALL_S:g} s in its first compile; "
        + ", ".join(f"{k}={settings.get(k)}" for k in POLICY if k in settings)
    )
    start = time.monotonic()
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK],
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    results = []
    for r, proc in enumerate(ranks):
        try:
            out, err = proc.communicate(timeout=max(1.0, JOB_LIMIT_S - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += "\n[reproducer] killed: hung past the job limit"
        results.append((r, proc.returncode, out, err))
    survived = True
    for r, code, out, err in results:
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        done = [e for e in events if e["event"] == "all_reduce-done"]
        print(
            f"# rank {r}: exit {code}; events: "
            + "; ".join(
                f"{e['event']}@{e['t']}s"
                + (f" value={e['value']}" if "value" in e else "")
                + (
                    f" compile={e['real_compile_s']}s stall={e['stall_s']}s"
                    if "stall_s" in e
                    else ""
                )
                for e in events
            )
        )
        shown = 0
        for line in err.splitlines():
            if shown < 6 and any(
                word in line.lower()
                for word in (
                    "watchdog",
                    "timed out",
                    "timeout",
                    "killed",
                    "heartbeat",
                    "terminat",
                    "abort",
                )
            ):
                print(f"#   rank {r} stderr: {line.strip()[:300]}")
                shown += 1
        survived = survived and code == 0 and bool(done) and done[0]["value"] == 3.0
    print(f"# job {'survived' if survived else 'died'} after {time.monotonic() - start:.1f} s")
    return survived


def _policy_in_child() -> str:
    import shims
    from shims import child

    wanted = {k: v for k, v in shims.env_constraints().items() if k in POLICY}
    clean = {k: v for k, v in os.environ.items() if k not in wanted}
    clean["PATCHLANE_SHIMS_DISABLE"] = ""

    # Both children at once: each imports torch._inductor.config itself, after its environment is
    # set (that import reads TORCHINDUCTOR_MAX_AUTOTUNE_GEMM), so neither may reuse one that a
    # launcher imported; side by side they cost one import's time, not two.
    started = [
        child.start(CHILD, env=env, fresh=["torch._inductor.config"])
        for env in (clean, dict(clean, TORCHINDUCTOR_MAX_AUTOTUNE_GEMM="1"))
    ]
    answers = []
    for process in started:
        result = process.wait(timeout=240)
        if result.returncode != 0:
            raise RuntimeError(f"child process failed: {result.stderr.strip()[-2000:]}")
        answers.append(json.loads(result.stdout.strip().splitlines()[-1]))
    seen, override = answers
    print(
        "# fewer than 2 CUDA devices: policy check only, in two child processes "
        f"({'forks of the launcher' if started[0].forked else 'fresh interpreters'})"
    )
    print(f"# child: state={seen['state']} max_autotune_gemm={seen['max_autotune_gemm']}")
    print(f"# child env: {seen['env']}")
    in_effect = (
        seen["state"] == "applied"
        and all(seen["env"].get(k) == v for k, v in wanted.items())
        and seen["grandchild"] == seen["env"]
        and seen["max_autotune_gemm"] is False
    )
    print(
        f"# with TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1 preset: state={override['state']} "
        f"max_autotune_gemm={override['max_autotune_gemm']}"
    )
    environment_wins = override["state"] == "overridden" and override["max_autotune_gemm"] is True
    return reproducer.FIX_VALIDATED if in_effect and environment_wins else reproducer.BUG_REPRODUCED


def check(with_shim: bool) -> str:
    from importlib.util import find_spec

    if find_spec("torch") is None:
        raise reproducer.Skip("torch is not installed")
    import torch
    import torch.distributed as dist

    backend = os.environ.get("PATCHLANE_NCCL_POLICY_BACKEND", "nccl")
    if backend not in ("nccl", "gloo"):
        raise reproducer.Skip(f"PATCHLANE_NCCL_POLICY_BACKEND={backend!r}: use nccl or gloo")
    if backend == "nccl" and not (
        torch.cuda.is_available() and torch.cuda.device_count() >= 2 and dist.is_nccl_available()
    ):
        if with_shim:
            return _policy_in_child()
        raise reproducer.Skip(
            f"the NCCL watchdog kill needs 2 CUDA devices with NCCL (this host has "
            f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}); "
            "PATCHLANE_NCCL_POLICY_BACKEND=gloo runs the collective-timeout class on 2 CPU ranks"
        )
    if with_shim:
        import shims

        policy = {k: v for k, v in shims.env_constraints().items() if k in POLICY}
        missing = {k: v for k, v in policy.items() if os.environ.get(k) != v}
        if missing:
            raise RuntimeError(f"the shim's policy is not in this process's environment: {missing}")
        settings = _scaled(policy)
        print(f"# policy from the shim: {policy}; scaled 1/{SCALE:g}: {settings}")
    else:
        settings = _scaled(TORCH_DEFAULTS)
        print(f"# torch defaults {TORCH_DEFAULTS}; scaled 1/{SCALE:g}: {settings}")
    return reproducer.FIX_VALIDATED if _job(backend, settings) else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch"])
