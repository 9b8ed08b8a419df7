"""Reproducer for compile_nccl_policy (env-constraint).

without: the failure itself (a rank killed by the NCCL heartbeat monitor during a >8 min first
         compile, or a GEMM autotune OOM poisoning the cache) needs a multi-rank NCCL job; not
         automated, so SKIPPED.
with:    starts a child process the way a launcher starts a rank: activates only this shim before
         importing torch and checks the policy is in effect there and in a grandchild: every
         variable carries the shim's value and torch._inductor.config.max_autotune_gemm is False;
         then checks that a value the environment already sets wins (state "overridden").
         FIX_VALIDATED when all hold.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "shims" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from shims import reproducer  # noqa: E402

SHIM = "compile_nccl_policy"
CHILD = r"""
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import shims
shims.activate(only={"compile_nccl_policy"})
import torch._inductor.config as inductor
names = sorted(shims.env_constraints())
grandchild = subprocess.run([sys.executable, "-c", "import json, os, sys; print(json.dumps({n: os.environ.get(n) for n in sys.argv[1:]}))", *names],
                            capture_output=True, text=True, check=True)
state = shims.status()["compile_nccl_policy"]
print(json.dumps({"env": {n: os.environ.get(n) for n in names}, "grandchild": json.loads(grandchild.stdout),
                  "max_autotune_gemm": inductor.max_autotune_gemm, "state": state.state, "reason": state.reason}))
"""


def _child(env: dict) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(_ROOT)], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"child process failed: {result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def check(with_shim: bool) -> str:
    from importlib.util import find_spec

    if find_spec("torch") is None:
        raise reproducer.Skip("torch is not installed")
    if not with_shim:
        raise reproducer.Skip(
            "the watchdog kill needs a multi-rank NCCL job whose first compile outlasts the heartbeat "
            "timeout, and the autotune OOM a large-matmul max-autotune run; not automated"
        )
    import shims

    wanted = dict(shims.env_constraints())
    wanted = {k: v for k, v in wanted.items() if k in (
        "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
        "TORCH_DISTRIBUTED_DEFAULT_TIMEOUT", "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM")}
    clean = {k: v for k, v in os.environ.items() if k not in wanted}
    clean["PATCHLANE_SHIMS_DISABLE"] = ""
    seen = _child(clean)
    print(f"# child: state={seen['state']} max_autotune_gemm={seen['max_autotune_gemm']}")
    print(f"# child env: {seen['env']}")
    in_effect = (
        seen["state"] == "applied"
        and all(seen["env"].get(k) == v for k, v in wanted.items())
        and seen["grandchild"] == seen["env"]
        and seen["max_autotune_gemm"] is False
    )
    preset = dict(clean, TORCHINDUCTOR_MAX_AUTOTUNE_GEMM="1")
    override = _child(preset)
    print(f"# with TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1 preset: state={override['state']} "
          f"max_autotune_gemm={override['max_autotune_gemm']}")
    environment_wins = override["state"] == "overridden" and override["max_autotune_gemm"] is True
    return reproducer.FIX_VALIDATED if in_effect and environment_wins else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch"])
