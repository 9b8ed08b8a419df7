"""Reproducer for sparse_mla_dim_guard (needs CUDA >= 9.0, megatron-core >= 0.19 and tilelang).

A non-DeepSeek absorbed MLA: d_total = 128 (64 latent + 64 rope tail), v_channels = 64, 16 heads,
sq = skv = 4096, top-k 256, bf16 query [sq, b, np, 128], key [skv, b, 1, 128], indices
[b, sq, topk] (a causal top-k, -1 padded). Calls megatron-core's dispatcher
fused_sparse_mla_absorbed, the hook DSA's
_run_sparse_attention tries before it falls back to _unfused_absorbed_dsa_fn.

without: BUG_REPRODUCED when the dispatcher returns None; then runs the unfused fallback forward
         and backward and prints its peak memory (it materialises fp32 [b, np, sq, skv] scores).
with:    FIX_VALIDATED when the fused TileLang kernel runs forward and backward at these dims,
         returns [sq, b, np, 64], and its output and dQ/dK match the unfused path on the same
         inputs (bf16 tolerance); prints both peaks.
"""

from __future__ import annotations

from shims import reproducer

SHIM = "sparse_mla_dim_guard"
SQ, BATCH, HEADS, D_TOTAL, D_V, TOPK = 4096, 1, 16, 128, 64, 256
PACKAGES = ["torch", "megatron-core", "tilelang", "apache-tvm-ffi"]


def _inputs(torch):
    gen = torch.Generator(device="cpu").manual_seed(0)
    query = (torch.randn(SQ, BATCH, HEADS, D_TOTAL, generator=gen) * 0.5).to("cuda", torch.bfloat16)
    key = (torch.randn(SQ, BATCH, 1, D_TOTAL, generator=gen) * 0.5).to("cuda", torch.bfloat16)
    # A causal top-k, as DSA's indexer produces: query i picks TOPK keys among 0..i, and the first
    # rows, with fewer than TOPK candidates, pad with -1 sentinels. (The unfused path also applies
    # the causal mask; the fused kernel only reads the indices.)
    scores = torch.rand(BATCH, SQ, SQ, generator=gen).masked_fill(
        torch.ones(SQ, SQ, dtype=torch.bool).triu(1), -1.0
    )
    best = scores.topk(TOPK, dim=-1)
    topk = best.indices.masked_fill(best.values < 0, -1).to("cuda", torch.int32)
    return query, key, topk


def _measured(torch, fn, query, key):
    """fn(q, k) forward + backward under a fresh peak counter: (out, dq, dk, peak bytes above
    start)."""
    q = query.detach().clone().requires_grad_(True)
    k = key.detach().clone().requires_grad_(True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    out = fn(q, k)
    if out is None:
        return None, None, None, torch.cuda.max_memory_allocated() - start
    out.float().square().mean().backward()
    torch.cuda.synchronize()
    return out.detach(), q.grad, k.grad, torch.cuda.max_memory_allocated() - start


def check(with_shim: bool) -> str:
    reproducer.require_cuda(min_cc="9.0")
    import torch

    dsa = reproducer.require(
        "megatron.core.transformer.experimental_attention_variant.dsa", "megatron-core"
    )
    tilelang_dsa = reproducer.require(
        "megatron.core.transformer.experimental_attention_variant.ops.tilelang_dsa",
        "megatron-core",
        hint="the DSA ops need megatron-core >= 0.19",
    )
    if getattr(tilelang_dsa, "SparseMLA", None) is None:
        raise reproducer.Skip("TileLang SparseMLA kernels are unavailable: pip install tilelang")
    scale = D_TOTAL**-0.5
    query, key, topk = _inputs(torch)
    print(f"# sq=skv={SQ} b={BATCH} np={HEADS} d_total={D_TOTAL} v_channels={D_V} topk={TOPK}")

    def fused(q, k):
        return tilelang_dsa.fused_sparse_mla_absorbed(q, k, topk, scale, D_V)

    def unfused(q, k):
        return dsa._unfused_absorbed_dsa_fn(q, k, topk, scale, D_V)

    out, dq, dk, fused_peak = _measured(torch, fused, query, key)
    ref, ref_dq, ref_dk, unfused_peak = _measured(torch, unfused, query, key)
    print(
        f"# unfused fallback (_unfused_absorbed_dsa_fn) fwd+bwd peak: {unfused_peak / 2**20:.0f} "
        f"MiB"
    )
    if out is None:
        print(
            f"# fused_sparse_mla_absorbed(d_total={D_TOTAL}, v_channels={D_V}) returned None: "
            "DSA takes the unfused fallback above"
        )
        return reproducer.BUG_REPRODUCED
    print(
        f"# fused SparseMLA fwd+bwd peak: {fused_peak / 2**20:.0f} MiB "
        f"({unfused_peak / max(fused_peak, 1):.1f}x less than unfused)"
    )
    ok = tuple(out.shape) == (SQ, BATCH, HEADS, D_V)
    for name, got, want in (("out", out, ref), ("dQ", dq, ref_dq), ("dK", dk, ref_dk)):
        got, want = got.float(), want.float()
        diff = (got - want).abs().max().item()
        bound = 2e-2 * max(want.abs().max().item(), 1e-6)
        close = bool(torch.isfinite(got).all()) and diff <= bound
        print(
            f"#   fused vs unfused {name}: {tuple(got.shape)} max|diff| {diff:.3e} (bound "
            f"{bound:.3e}) "
            f"{'ok' if close else 'MISMATCH'}"
        )
        ok = ok and close
    return reproducer.FIX_VALIDATED if ok else reproducer.BUG_REPRODUCED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=PACKAGES)
