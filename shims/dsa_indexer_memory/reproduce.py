"""Reproducer for dsa_indexer_memory.

Runs megatron-core's real DSA index-score function on DeepSeek-V3.2 indexer shapes
(64 heads x 128 dims) and measures the largest tensor any single op allocates, against the size
of the [b, sq, sk] result. Works on CPU; on a CUDA host it also reports peak allocated memory.

without: BUG_REPRODUCED when the largest intermediate is >= 2x the output (upstream
         materialises [sq, b, h, sk]); FIX_VALIDATED when upstream no longer does.
with:    MEMORY_SAVE_VERIFIED when the shimmed function's largest intermediate is at most the
         output size and its result matches upstream (rtol 1e-5).
"""

from __future__ import annotations

from shims import reproducer

SHIM = "dsa_indexer_memory"
SQ = SK = 512
BATCH = 1
HEADS = 64
DIM = 128


def _index_score_fn(dsa):
    function = getattr(dsa, "_compute_index_scores", None)
    if callable(function):
        return function, getattr(function, "__wrapped__", None)
    method = dsa.DSAIndexer._compute_index_scores
    original = getattr(method, "__wrapped__", None)
    return (lambda q, w, k: method(None, q, w, k)), (
        (lambda q, w, k: original(None, q, w, k)) if original is not None else None
    )


def _largest_allocation(fn, *args):
    """(result, largest bytes of a tensor freshly allocated by one op) under a dispatch mode."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Largest(TorchDispatchMode):
        largest = 0
        op = None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = {
                t.untyped_storage().data_ptr()
                for t in tree_flatten((args, kwargs))[0]
                if isinstance(t, torch.Tensor)
            }
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                    size = t.untyped_storage().nbytes()
                    if size > Largest.largest:
                        Largest.largest, Largest.op = size, str(func)
            return out

    with Largest():
        result = fn(*args)
    return result, Largest.largest, Largest.op


def check(with_shim: bool) -> str:
    torch = reproducer.require("torch")
    dsa = reproducer.require(
        "megatron.core.transformer.experimental_attention_variant.dsa", "megatron-core"
    )

    fn, original = _index_score_fn(dsa)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device="cpu").manual_seed(0)
    q = torch.randn(SQ, BATCH, HEADS, DIM, generator=gen).to(device, torch.bfloat16)
    weights = torch.randn(SQ, BATCH, HEADS, generator=gen).to(device, torch.bfloat16)
    k = torch.randn(SK, BATCH, DIM, generator=gen).to(device, torch.bfloat16)

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    result, largest, op = _largest_allocation(fn, q, weights, k)
    out_bytes = result.numel() * result.element_size()
    print(f"# shapes: sq={SQ} sk={SK} b={BATCH} index_heads={HEADS} head_dim={DIM} device={device}")
    print(f"# output [b, sq, sk] fp32: {out_bytes / 2**20:.1f} MiB")
    print(
        f"# largest single-op allocation: {largest / 2**20:.1f} MiB by {op} "
        f"({largest / out_bytes:.1f}x the output)"
    )
    if device == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        print(f"# cuda peak allocated above inputs: {peak / 2**20:.1f} MiB")

    if not with_shim:
        return reproducer.BUG_REPRODUCED if largest >= 2 * out_bytes else reproducer.FIX_VALIDATED

    if original is None:
        print("# the shim did not replace the index-score function")
        return reproducer.BUG_REPRODUCED
    reference = original(q, weights, k)
    scale = reference.abs().max().item() or 1.0
    error = (result - reference).abs().max().item()
    print(f"# max |shimmed - upstream| = {error:.3e} (upstream max |x| = {scale:.3e})")
    if not torch.allclose(result, reference, rtol=1e-5, atol=1e-5 * scale):
        print("# numerics differ beyond rtol 1e-5")
        return reproducer.BUG_REPRODUCED
    if largest > out_bytes:
        return reproducer.BUG_REPRODUCED
    return reproducer.MEMORY_SAVE_VERIFIED


if __name__ == "__main__":
    reproducer.run(SHIM, check, packages=["torch", "megatron-core"])
