"""Reproducer for mamba3_mimo_gqa_backward (needs CUDA >= 9.0, mamba-ssm with the TileLang
Mamba-3 kernels, tilelang). Not yet run anywhere: neither the CI CPU lane nor the device host has
mamba-ssm's Mamba-3 TileLang kernels installed.

Calls mamba_mimo_bwd_combined with ngroups=2, nheads=4 (1 < G < H) on random inputs shaped as
the kernels declare them (Q/K [B, S, R, G, N], V/DOUT [B, S, H, P], biases and MIMO projections
fp32 [H, R, *], discretisation tensors fp32 [B, H, S]).

without: BUG_REPRODUCED on ValueError("G value of ... is not currently supported").
with:    FIX_VALIDATED when every gradient is finite, dq/dk come back as [B, S, R, G, N], and they
         equal the group sums of the G == H call on expanded q/k (the edge case that works).
"""

from __future__ import annotations

import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "shims" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from shims import reproducer  # noqa: E402

SHIM = "mamba3_mimo_gqa_backward"
B, S, R, G, H, N, P, CHUNK, ROT = 1, 64, 4, 2, 4, 64, 64, 16, 4


def _inputs(torch):
    gen = torch.Generator(device="cpu").manual_seed(0)
    dt16, f32 = torch.bfloat16, torch.float32

    def rnd(*shape, dtype=dt16, scale=0.1):
        return (torch.randn(*shape, generator=gen) * scale).to("cuda", dtype)

    dt = torch.rand(B, H, S, generator=gen).cuda() * 0.1
    a = -torch.rand(B, H, S, generator=gen).cuda()
    da = a * dt
    da_cs = torch.cumsum(da.view(B, H, S // CHUNK, CHUNK), dim=-1).view(B, H, S)
    da_cs_rev = torch.flip(torch.cumsum(torch.flip(da.view(B, H, S // CHUNK, CHUNK), [-1]), -1), [-1]).view(B, H, S)
    seg = da.view(B, H, S // CHUNK, CHUNK)
    cums = torch.cumsum(seg, dim=-1)
    segsum = (cums.unsqueeze(-1) - cums.unsqueeze(-2)).masked_fill(
        ~torch.tril(torch.ones(CHUNK, CHUNK, dtype=torch.bool, device="cuda")), float("-inf")
    )
    return dict(
        dout=rnd(B, S, H, P), q=rnd(B, S, R, G, N), k=rnd(B, S, R, G, N), v=rnd(B, S, H, P),
        q_bias=rnd(H, R, N, dtype=f32), k_bias=rnd(H, R, N, dtype=f32),
        mimo_v=rnd(H, R, P, dtype=f32), mimo_o=rnd(H, R, P, dtype=f32), z=None, mimo_z=None,
        angles=rnd(B, S, H, N // ROT, dtype=f32), dA_cs=da_cs, dA_cs_rev=da_cs_rev, dt=dt,
        trap=rnd(B, H, S), D=rnd(H, dtype=f32), segsum=segsum, chunk_size=CHUNK,
        rotary_dim_divisor=ROT, dtype="bfloat16",
    )


def check(with_shim: bool) -> str:
    reproducer.require_cuda(min_cc="9.0")
    import torch

    try:
        from mamba_ssm.ops.tilelang.mamba3 import mamba3_mimo_bwd as bwd
    except ImportError as exc:
        raise reproducer.Skip(f"mamba-ssm's TileLang Mamba-3 kernels are not importable: {exc}") from None
    args = _inputs(torch)
    try:
        out = bwd.mamba_mimo_bwd_combined(**args)
    except ValueError as exc:
        print(f"# G={G}, H={H}: {exc}")
        if "not currently supported" in str(exc):
            return reproducer.BUG_REPRODUCED
        raise
    outs = [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if torch.is_tensor(t)]
    finite = all(torch.isfinite(t.float()).all().item() for t in outs)
    grouped = [t for t in outs if tuple(t.shape) == (B, S, R, G, N)]
    print(f"# G={G}, H={H}: {len(outs)} gradient tensors, finite={finite}, [B,S,R,G,N] grads={len(grouped)}")
    original = getattr(bwd.mamba_mimo_bwd_combined, "__wrapped__", None)
    if original is not None and grouped:
        expanded = dict(args, q=args["q"].repeat_interleave(H // G, dim=3), k=args["k"].repeat_interleave(H // G, dim=3))
        ref = [t for t in original(**expanded) if torch.is_tensor(t) and tuple(t.shape) == (B, S, R, H, N)]
        ref = [t.view(B, S, R, G, H // G, N).sum(dim=4) for t in ref]
        same = len(ref) == len(grouped) and all(torch.allclose(a.float(), b.float(), rtol=1e-3, atol=1e-3) for a, b in zip(grouped, ref))
        print(f"# matches the G == H edge case reduced per group: {same}")
        finite = finite and same
    return reproducer.FIX_VALIDATED if finite and len(grouped) >= 2 else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "mamba-ssm", "tilelang"])
