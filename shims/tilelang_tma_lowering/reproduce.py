"""Reproducer for tilelang_tma_lowering (env-constraint TL_DISABLE_TMA_LOWER=1).

The kernel is the Mamba-3 MIMO backward's Q/K staging pattern, cut down: a [chunk * R, N] bf16
shared buffer with a swizzled layout, viewed as rank-3 [chunk, R, N], filled by a T.copy from a
[B, S, R, N] global slice (TMA-eligible: 128-byte rows on Hopper), then read into registers, doubled
and written back. TileLang's bulk-copy lowering detects a TMA layout only for rank-2 shared layouts
(`ICHECK(shared_layout->InputDim() == 2) << "Cannot detect TMA layout."`, in LowerBulkCopy up to
tilelang 0.1.8; tile-ai/tilelang #746 turned other cases into a warn-and-fallback).

On a CUDA device with compute capability >= 9.0 (TMA exists) and nvcc:
without: compiles with TileLang's default pass configs (TMA lowering on).
         BUG_REPRODUCED when lowering fails; FIX_VALIDATED (upstream fixed) when it compiles,
         runs and Y == 2 * X.
with:    the shim sets TL_DISABLE_TMA_LOWER=1 and its patch turns it into the default
         tl.disable_tma_lower=True of every compile. FIX_VALIDATED when the same kernel compiles,
         runs and Y == 2 * X.
Without such a device:
without: SKIPPED (the failure is in lowering for sm_90, the proof needs the kernel to run).
with:    the policy check only, in a child process started the way a launcher starts a rank
         (shims.child: under patchlane's launcher a fork that imports tilelang itself):
         the variable is set, the patch applied, and the pass configs a compile receives carry
         tl.disable_tma_lower=True while an explicit per-kernel False still wins.
"""

from __future__ import annotations

import json
import os
import pathlib

from shims import child, reproducer

SHIM = "tilelang_tma_lowering"
# N = 64 bf16 = 128-byte rows: eligible for a TMA bulk load
S, R, N, CHUNK = 1024, 4, 64, 16
CHILD = r"""
import json, os
from unittest import mock
import shims
shims.activate(only={"tilelang_tma_lowering"})
import tilelang
from tilelang.cache.kernel_cache import KernelCache
from tilelang.jit.kernel import JITKernel
seen = []
class Stop(Exception):
    pass
def key(self, *args, **kwargs):  # the cache key is built from the pass configs the compile got
    seen.append(dict(kwargs.get("pass_configs") or {}))
    raise Stop
from shims.tilelang_tma_lowering.reproduce import build_kernel
kernel = build_kernel(tilelang, tilelang.language)
with mock.patch.object(KernelCache, "_generate_key", key):
    for configs in (None, {"tl.disable_tma_lower": False}):
        try:
            tilelang.compile(kernel, out_idx=[1], target="cuda", pass_configs=configs)
        except Stop:
            pass
state = shims.status()["tilelang_tma_lowering"]
print(json.dumps({
    "env": os.environ.get("TL_DISABLE_TMA_LOWER"),
    "default": seen[0].get("tl.disable_tma_lower") if seen else None,
    "explicit_false": seen[1].get("tl.disable_tma_lower") if len(seen) > 1 else None,
    "init_patched": bool(getattr(JITKernel.__init__, "__patchlane_tilelang_tma_lowering__", False)),
    "state": state.state, "reason": state.reason, "tilelang": tilelang.__version__,
}))
"""


# TileLang's own spelling: the language is T, and the kernel's tensors are named X and Y.
def build_kernel(tilelang, T):  # noqa: N803
    """The rank-3 TMA copy kernel (a TileLang prim_func), returning Y = 2 * X."""
    batch = T.dynamic("B")
    dtype = "bfloat16"

    # the parameters' names become the kernel's buffer names
    @T.prim_func
    def rank3_tma_copy(X: T.Tensor([batch, S, R, N], dtype), Y: T.Tensor([batch, S, R, N], dtype)):  # noqa: N803
        with T.Kernel(batch, T.ceildiv(S, CHUNK), threads=128) as (bx, by):
            flat = T.alloc_shared([CHUNK * R, N], dtype)
            T.annotate_layout({flat: tilelang.layout.make_swizzled_layout(flat)})
            # the rank-3 shared descriptor
            staged = T.view(flat, shape=[CHUNK, R, N])
            frag = T.alloc_fragment([CHUNK, R, N], "float32")
            T.copy(X[bx, by * CHUNK : (by + 1) * CHUNK, :, :], staged)
            T.copy(staged, frag)
            for i, j, k in T.Parallel(CHUNK, R, N):
                frag[i, j, k] = frag[i, j, k] * 2.0
            T.copy(frag, Y[bx, by * CHUNK : (by + 1) * CHUNK, :, :])

    return rank3_tma_copy


def _nvcc_available() -> bool:
    try:
        from tilelang import env as tl_env
    except ImportError:
        return False
    home = getattr(tl_env, "CUDA_HOME", "") or ""
    return bool(home) and (pathlib.Path(home) / "bin" / "nvcc").is_file()


def _policy_in_child() -> str:
    env = {k: v for k, v in os.environ.items() if k != "TL_DISABLE_TMA_LOWER"}
    env["PATCHLANE_SHIMS_DISABLE"] = ""
    # tilelang is imported in the child, after the shim is activated there (a launcher's fork
    # with tilelang already imported would not show that).
    result = child.run(CHILD, env=env, timeout=240, fresh=["tilelang"])
    if result.returncode != 0:
        raise RuntimeError(f"child process failed: {result.stderr.strip()[-2000:]}")
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    how = "a fork of the launcher" if result.forked else "a fresh interpreter"
    print(f"# no CUDA device with TMA here: policy check only, in a child process ({how}): {seen}")
    ok = (
        seen["env"] == "1"
        and seen["default"] is True
        and seen["explicit_false"] is False
        and seen["init_patched"]
        and seen["state"] == "applied"
    )
    return reproducer.FIX_VALIDATED if ok else reproducer.BUG_REPRODUCED


def check(with_shim: bool) -> str:
    from importlib.util import find_spec

    if find_spec("tilelang") is None:
        raise reproducer.Skip(
            "tilelang is not installed (pip install tilelang; 0.1.8 reproduces, 0.1.15 falls back)"
        )
    try:
        capability = reproducer.require_cuda(min_cc="9.0")
        missing = None
    except reproducer.Skip as skip:
        missing = str(skip)
    if missing is not None:
        if with_shim:
            return _policy_in_child()
        raise reproducer.Skip(
            f"{missing}: TMA lowering of a rank-3 shared copy needs a Hopper (cc >= 9.0) GPU"
        )
    import tilelang

    # TileLang's own spelling (its docs and kernels write T.prim_func, T.copy, ...)
    import tilelang.language as T  # noqa: N812
    import torch

    if not _nvcc_available():
        raise reproducer.Skip("tilelang finds no nvcc (set CUDA_HOME to a CUDA 12.x/13.x toolkit)")
    if hasattr(tilelang, "disable_cache"):
        # a kernel cached by an earlier run must not stand in for this compile
        tilelang.disable_cache()
    print(
        f"# tilelang {tilelang.__version__}, cc {capability[0]}.{capability[1]}, "
        f"TL_DISABLE_TMA_LOWER={os.environ.get('TL_DISABLE_TMA_LOWER')!r}"
    )
    try:
        kernel = tilelang.compile(build_kernel(tilelang, T), out_idx=[1])
    # TVM raises InternalError / TVMError subclasses; all are lowering failures here
    except Exception as exc:  # noqa: BLE001
        lines = [line for line in str(exc).strip().splitlines() if line.strip()]
        print(
            f"# compile with TMA lowering failed: {type(exc).__name__}: "
            f"{lines[-1] if lines else exc!r}"
        )
        return reproducer.BUG_REPRODUCED
    source = kernel.get_kernel_source()
    tma_ops = source.count("tma_load")
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(2, S, R, N, generator=gen).to("cuda", torch.bfloat16)
    y = kernel(x)
    torch.cuda.synchronize()
    correct = torch.equal(y.float(), x.float() * 2)
    print(f"# compiled and ran: TMA loads in the kernel source: {tma_ops}; Y == 2 * X: {correct}")
    return reproducer.FIX_VALIDATED if correct else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["tilelang", "apache-tvm-ffi", "torch"])
