"""Reproducer for tilelang_tma_lowering (env-constraint).

without: needs a Hopper GPU and TileLang to compile a kernel with rank-3 shared-memory
         descriptors under TMA lowering; not automated yet, so SKIPPED.
with:    in a child process (the way a launcher starts ranks) activates only this shim, imports
         TileLang and checks that the policy is in effect: TL_DISABLE_TMA_LOWER=1 in the
         environment, normalize_pass_configs({}) carries tl.disable_tma_lower=True, and an explicit
         per-kernel False still wins. FIX_VALIDATED when all hold. SKIPPED without TileLang.
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

SHIM = "tilelang_tma_lowering"
CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import shims
shims.activate(only={"tilelang_tma_lowering"})
import tilelang
from tilelang.transform.pass_config import normalize_pass_configs
state = shims.status()["tilelang_tma_lowering"]
print(json.dumps({
    "env": os.environ.get("TL_DISABLE_TMA_LOWER"),
    "default": normalize_pass_configs({}).get("tl.disable_tma_lower"),
    "explicit_false": normalize_pass_configs({"tl.disable_tma_lower": False}).get("tl.disable_tma_lower"),
    "state": state.state, "reason": state.reason,
}))
"""


def check(with_shim: bool) -> str:
    from importlib.util import find_spec

    if find_spec("tilelang") is None:
        raise reproducer.Skip("tilelang is not installed")
    if not with_shim:
        raise reproducer.Skip(
            "reproducing the LowerBulkCopy/LayoutInference failure needs a Hopper GPU and a TMA-lowered "
            "TileLang kernel with rank-3 shared buffers; not automated yet"
        )
    env = {k: v for k, v in os.environ.items() if k != "TL_DISABLE_TMA_LOWER"}
    env["PATCHLANE_SHIMS_DISABLE"] = ""
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(_ROOT)], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"child process failed: {result.stderr.strip()[-2000:]}")
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"# child: {seen}")
    ok = seen["env"] == "1" and seen["default"] is True and seen["explicit_false"] is False and seen["state"] == "applied"
    return reproducer.FIX_VALIDATED if ok else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["tilelang", "torch"])
