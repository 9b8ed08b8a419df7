"""Reproducer for mamba3_mimo_gqa_backward (needs CUDA >= 9.0, mamba-ssm with the TileLang Mamba-3
kernels, and the tilelang release mamba-ssm pins: 2.3.2.post1 pins tilelang==0.1.8; with tilelang
0.1.15 mamba_mimo_bwd_bwd does not compile at all, TMA on or off).

Runs the public autograd path, mamba_ssm.ops.tilelang.mamba3.mamba3_mimo.mamba3_mimo, forward and
backward with ngroups G=2 and nheads H=4 (1 < G < H), shapes as Mamba3 builds them
(Q/K [B, S, R, G, N] bf16, V [B, S, H, P] bf16, ADT/DT fp32 and Trap bf16 [B, H, S], biases and
MIMO projections fp32 [H, R, *], Angles fp32 [B, S, H, N / 4], D fp32 [H]).

without: BUG_REPRODUCED when backward raises ValueError("G value of 2 is not currently supported!").
with:    FIX_VALIDATED when backward runs and every gradient and the output match the reference:
         the same call with Q/K expanded to G == H (head h reads group h // (H / G), what the
kernels
         index) inside autograd, so autograd itself sums the per-head dQ/dK over each group.

A mamba-ssm installed with MAMBA_SKIP_CUDA_BUILD=TRUE has no selective_scan_cuda, which the package
__init__ imports; the TileLang Mamba-3 ops do not use it, so when that __init__ fails to import the
reproducer loads the mamba_ssm package without running it (and says so).
"""

from __future__ import annotations

import importlib.util
import sys
import types

from shims import reproducer

SHIM = "mamba3_mimo_gqa_backward"
B, S, R, G, H, N, P, CHUNK, ROT = 1, 128, 4, 2, 4, 64, 64, 16, 4
PACKAGES = ["torch", "mamba-ssm", "tilelang", "apache-tvm-ffi", "triton"]


def _load_api():
    """mamba_ssm.ops.tilelang.mamba3.mamba3_mimo, even from a MAMBA_SKIP_CUDA_BUILD install."""
    name = "mamba_ssm.ops.tilelang.mamba3.mamba3_mimo"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if importlib.util.find_spec("mamba_ssm") is None:
            raise reproducer.Skip(
                "mamba-ssm is not installed: MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE "
                "pip install --no-build-isolation mamba-ssm, with tilelang==0.1.8"
            ) from None
        # mamba_ssm/__init__ imports the CUDA extensions (and, on main, the HF model helpers); the
        # TileLang Mamba-3 ops need none of it.
        print(
            f"# importing mamba_ssm/__init__ failed ({exc}); loading the TileLang Mamba-3 ops "
            f"without it"
        )
    spec = importlib.util.find_spec("mamba_ssm")
    package = types.ModuleType("mamba_ssm")
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    sys.modules["mamba_ssm"] = package
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise reproducer.Skip(
            f"mamba-ssm's TileLang Mamba-3 kernels are not importable: {exc}"
        ) from None


def _inputs(torch):
    gen = torch.Generator(device="cpu").manual_seed(0)
    f32, bf16 = torch.float32, torch.bfloat16

    def rnd(*shape, dtype=bf16, scale=0.5):
        return (torch.randn(*shape, generator=gen) * scale).to("cuda", dtype)

    dt = torch.nn.functional.softplus(torch.randn(B, H, S, generator=gen) - 1.0).cuda()
    a = -torch.nn.functional.softplus(torch.randn(B, H, S, generator=gen)).cuda()
    return {
        "Q": rnd(B, S, R, G, N),
        "K": rnd(B, S, R, G, N),
        "V": rnd(B, S, H, P),
        "ADT": a * dt,
        "DT": dt,
        "Trap": rnd(B, H, S),
        "Q_bias": 1 + rnd(H, R, N, dtype=f32, scale=0.1),
        "K_bias": 1 + rnd(H, R, N, dtype=f32, scale=0.1),
        "MIMO_V": rnd(H, R, P, dtype=f32, scale=0.25),
        "MIMO_Z": rnd(H, R, P, dtype=f32, scale=0.25),
        "MIMO_Out": rnd(H, R, P, dtype=f32, scale=0.25),
        "Angles": rnd(B, S, H, N // ROT, dtype=f32),
        "D": rnd(H, dtype=f32),
        "Z": None,
    }


def _run(api, torch, inputs, dout, expand: bool):
    """Forward + backward; returns (output, {name: grad}) for every differentiable input."""
    leaves = {
        k: v.detach().clone().requires_grad_(True) for k, v in inputs.items() if v is not None
    }
    call = dict(inputs, **leaves)
    # the G == H reference: autograd sums dQ/dK of the H / G heads of each group
    if expand:
        call["Q"] = leaves["Q"].repeat_interleave(H // G, dim=3)
        call["K"] = leaves["K"].repeat_interleave(H // G, dim=3)
    out = api.mamba3_mimo(**call, chunk_size=CHUNK, rotary_dim_divisor=ROT, dtype=torch.bfloat16)
    out.backward(dout)
    torch.cuda.synchronize()
    return out.detach(), {k: v.grad for k, v in leaves.items() if v.grad is not None}


def check(with_shim: bool) -> str:
    reproducer.require_cuda(min_cc="9.0")
    import torch

    api = _load_api()
    from importlib import metadata

    print(
        f"# mamba-ssm {metadata.version('mamba-ssm')}, tilelang {metadata.version('tilelang')}; "
        f"B={B} S={S} R={R} G={G} H={H} N={N} P={P} chunk={CHUNK}"
    )
    inputs = _inputs(torch)
    dout = (torch.randn(B, S, H, P, generator=torch.Generator().manual_seed(1)) * 0.5).to(
        "cuda", torch.bfloat16
    )
    try:
        out, grads = _run(api, torch, inputs, dout, expand=False)
    except ValueError as exc:
        print(f"# backward with G={G}, H={H}: ValueError: {exc}")
        if "not currently supported" in str(exc):
            return reproducer.BUG_REPRODUCED
        raise
    ref_out, ref_grads = _run(api, torch, inputs, dout, expand=True)
    print(
        f"# backward with G={G}, H={H} ran; dQ {tuple(grads['Q'].shape)}, dK "
        f"{tuple(grads['K'].shape)}"
    )
    ok = set(grads) == set(ref_grads)
    pairs = [("out", out, ref_out)] + [
        (f"d{k}", grads[k], ref_grads[k]) for k in sorted(ref_grads) if k in grads
    ]
    for name, got, want in pairs:
        got, want = got.float(), want.float()
        finite = bool(torch.isfinite(got).all())
        diff = (got - want).abs().max().item()
        scale = want.abs().max().item()
        close = finite and got.shape == want.shape and diff <= 1e-2 * max(scale, 1e-3)
        print(
            f"#   {name:10s} {tuple(got.shape)!s:22s} max|diff| {diff:.3e}  max|ref| {scale:.3e}  "
            f"{'ok' if close else 'MISMATCH'}"
        )
        ok = ok and close
    return reproducer.FIX_VALIDATED if ok else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=PACKAGES)
