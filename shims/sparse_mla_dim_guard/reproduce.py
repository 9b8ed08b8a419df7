"""Reproducer for sparse_mla_dim_guard (needs CUDA >= 9.0, megatron-core >= 0.19 and tilelang).
Not yet run: the device host has no TileLang and the CI CPU lane has no GPU.

Calls megatron-core's fused_sparse_mla_absorbed at d_total=128, v_channels=64 (a non-DeepSeek
MLA) with bf16 query [sq, b, np, 128], key [skv, b, 1, 128] and top-k indices, then backward.

without: BUG_REPRODUCED when the dispatcher returns None (falls back to the unfused path).
with:    FIX_VALIDATED when the fused kernel runs forward and backward, returns [sq, b, np, 64]
         and the gradients are finite (the pack's compile-and-launch scope).
"""

from __future__ import annotations

import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[2]
if (_ROOT / "shims" / "__init__.py").is_file() and str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from shims import reproducer  # noqa: E402

SHIM = "sparse_mla_dim_guard"
SQ, BATCH, HEADS, D_TOTAL, D_V, TOPK = 256, 1, 16, 128, 64, 64


def check(with_shim: bool) -> str:
    reproducer.require_cuda(min_cc="9.0")
    import torch

    try:
        from megatron.core.transformer.experimental_attention_variant.ops import tilelang_dsa
    except ImportError as exc:
        raise reproducer.Skip(f"megatron-core >= 0.19 DSA ops are not importable: {exc}") from None
    if getattr(tilelang_dsa, "SparseMLA", None) is None:
        raise reproducer.Skip("TileLang SparseMLA kernels are unavailable (tilelang not installed)")
    gen = torch.Generator(device="cpu").manual_seed(0)
    query = (torch.randn(SQ, BATCH, HEADS, D_TOTAL, generator=gen) * 0.1).cuda().bfloat16().requires_grad_(True)
    key = (torch.randn(SQ, BATCH, 1, D_TOTAL, generator=gen) * 0.1).cuda().bfloat16().requires_grad_(True)
    topk = torch.stack([torch.randperm(SQ, generator=gen)[:TOPK] for _ in range(SQ)]).unsqueeze(0).cuda()
    out = tilelang_dsa.fused_sparse_mla_absorbed(query, key, topk, D_TOTAL ** -0.5, D_V)
    if out is None:
        print(f"# fused_sparse_mla_absorbed(d_total={D_TOTAL}, v_channels={D_V}) returned None: unfused fallback")
        return reproducer.BUG_REPRODUCED
    out.float().sum().backward()
    torch.cuda.synchronize()
    finite = all(torch.isfinite(t).all().item() for t in (out.float(), query.grad.float(), key.grad.float()))
    print(f"# fused output {tuple(out.shape)}, finite forward/backward: {finite}")
    return reproducer.FIX_VALIDATED if finite and out.shape[-1] == D_V else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core", "tilelang"])
